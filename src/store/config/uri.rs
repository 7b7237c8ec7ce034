//! Lock URIs: which store holds a lock, and which object in it is the lockfile's folder.
//!
//! The text after the bucket (container, memory store name) is the object key, taken
//! literally, as mops, boto3 and the AWS CLI take it: `s3://bucket/my lock/ü` is the folder of
//! the key `my lock/ü/lock.json`. What a URI parser would not pass on to the key is refused,
//! never dropped: a query (`?`) or a fragment (`#`), which would make two different names
//! one lock, and `%`, which some tools read as an escape and others as itself. So two
//! spellings are one lock only when they name one object: a trailing `/`, `file://` and a
//! plain path, `~` and the home folder (as mops expands it).

use super::schemes::{cloud_of, known, schemes, Cloud};
use crate::errors::{Error, Result};
use std::path::PathBuf;

/// A lock URI taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `memory://NAME/key`
    Memory {
        /// The store's name: one store per name in the process.
        name: String,
        /// The lock's folder inside it (may be empty).
        key: String,
    },
    /// `file:///path` or a plain path: the lock's folder.
    File(PathBuf),
    /// `s3://`, `az://`, `gs://` and their aliases.
    Cloud {
        /// Which cloud.
        kind: Cloud,
        /// The scheme as written, lower-cased (`s3`, `abfss`, ...).
        scheme: String,
        /// The bucket or container (for `abfs`, `container@account.dfs.core.windows.net`).
        authority: String,
        /// The lock's folder inside the bucket (may be empty).
        key: String,
    },
}

impl Location {
    /// Parses a lock URI. The lockfile will be `<uri>/lock.json`.
    pub fn parse(uri: &str) -> Result<Location> {
        let bad = |why: &str| Error::InvalidArgument(format!("invalid lock URI {uri:?}: {why}"));
        if uri.trim().is_empty() {
            return Err(bad("it is empty"));
        }
        if uri.contains('\0') {
            return Err(bad("it contains a NUL byte"));
        }
        let Some((scheme, rest)) = uri.split_once("://") else {
            let as_path = "; for a local folder of that name, pass a pathlib.Path or a file:// URI";
            // What was meant: file:// URIs take an absolute path, hence three slashes.
            let meant = |scheme: &str, rest: &str| {
                let rest = rest.trim_start_matches('/');
                match scheme {
                    "file" => format!("file:///{rest}"),
                    _ => format!("{scheme}://{rest}"),
                }
            };
            if let Some((scheme, rest)) = uri.split_once(':') {
                let lower = scheme.to_ascii_lowercase();
                if known(&lower) {
                    return Err(bad(&format!(
                        "write it as {} (a colon and two slashes){as_path}",
                        meant(&lower, rest)
                    )));
                }
            }
            // `s3//bucket/x`: the colon missing. As a path it would be a local folder
            // `s3/bucket/x`, and exclusion across machines would be lost without a word.
            if let Some((first, rest)) = uri.split_once("//") {
                let lower = first.to_ascii_lowercase();
                if known(&lower) {
                    return Err(bad(&format!(
                        "it looks like a {lower}:// URI with its colon missing; write it as {}{as_path}",
                        meant(&lower, rest)
                    )));
                }
            }
            return plain_path(uri).map(Location::File).map_err(|why| bad(&why));
        };
        let valid_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
        if !valid_scheme {
            return Err(bad(&format!(
                "{scheme:?} is not a URI scheme; supported are {}",
                schemes()
            )));
        }
        let scheme = scheme.to_ascii_lowercase();
        if !known(&scheme) {
            return Err(bad(&format!(
                "unknown scheme {scheme:?}; supported are {}",
                schemes()
            )));
        }
        if let Some(c) = rest.chars().find(|c| "?#%".contains(*c)) {
            return Err(bad(&format!(
                "it contains {c:?}: a URI would read it as the start of a {}, so blob-lock refuses it rather than guess; name the lock without {c:?}{}",
                match c {
                    '?' => "query",
                    '#' => "fragment",
                    _ => "percent escape",
                },
                if scheme == "file" { " or pass the plain path" } else { "" }
            )));
        }
        if let Some(c) = rest.chars().find(|c| c.is_control()) {
            return Err(bad(&format!("it contains the control character {c:?}")));
        }
        let (authority, key) = rest.split_once('/').unwrap_or((rest, ""));
        if scheme == "file" {
            return file_uri(authority, key)
                .map(Location::File)
                .map_err(|why| bad(&why));
        }
        let key = folder_key(key).map_err(|why| bad(&why))?;
        if scheme == "memory" {
            if authority.is_empty() {
                return Err(bad("no store name; write it as memory://NAME/path/to/lock"));
            }
            return Ok(Location::Memory {
                name: authority.to_string(),
                key,
            });
        }
        let kind = cloud_of(&scheme).expect("a known cloud scheme");
        check_authority(kind, &scheme, authority).map_err(|why| bad(&why))?;
        Ok(Location::Cloud {
            kind,
            scheme,
            authority: authority.to_string(),
            key,
        })
    }
}

/// A bucket or container as the clouds name them: lower case (the URL parsers inside
/// object_store would lower-case it, making `s3://B` and `s3://b` one lock), no port, no
/// credentials.
fn check_authority(kind: Cloud, scheme: &str, authority: &str) -> Result<(), String> {
    let word = kind.bucket_word();
    if authority.is_empty() {
        return Err(format!(
            "no {word} name; write it as {scheme}://{word}/path/to/lock"
        ));
    }
    // abfs[s]://container@account.dfs.core.windows.net names the account too.
    let extra = if scheme.starts_with("abfs") { "@" } else { "" };
    if let Some(c) = authority.chars().find(|c| {
        !(c.is_ascii_lowercase() || c.is_ascii_digit() || "-._".contains(*c) || extra.contains(*c))
    }) {
        let why = if c.is_uppercase() {
            format!("{} {word} names are lower case", kind.name())
        } else {
            format!("{c:?} is not allowed in a {} {word} name (lower-case letters, digits, '-', '.' and '_')", kind.name())
        };
        return Err(format!("{word} {authority:?}: {why}"));
    }
    // The name proper (an abfs authority's part before `@`), as every cloud spells one:
    // 3 to 63 characters (dotted GCS names up to 222), a letter or digit at each end.
    let name = authority.split('@').next().unwrap_or_default();
    let longest = if kind == Cloud::Gcs && name.contains('.') {
        222
    } else {
        63
    };
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !(3..=longest).contains(&name.len()) {
        return Err(format!(
            "{word} {name:?}: {} {word} names are 3 to {longest} characters long",
            kind.name()
        ));
    }
    if !ends(name.chars().next()) || !ends(name.chars().last()) || name.contains("..") {
        return Err(format!(
            "{word} {name:?}: {} {word} names begin and end with a letter or digit, and have no \"..\"",
            kind.name()
        ));
    }
    Ok(())
}

/// The folder key after the bucket: segments separated by `/`, none empty or `.` or `..`
/// (object stores would keep them as they are, file systems would not); one trailing `/`
/// is dropped.
fn folder_key(key: &str) -> Result<String, String> {
    let key = key.strip_suffix('/').unwrap_or(key);
    if key.is_empty() {
        return Ok(String::new());
    }
    for segment in key.split('/') {
        match segment {
            "" => return Err("it has an empty path segment (`//`); write one `/`".into()),
            "." | ".." => {
                return Err(format!(
                    "it has a {segment:?} path segment, which object stores keep as a name and file systems do not; write the path without it"
                ))
            }
            _ => {}
        }
    }
    Ok(key.to_string())
}

/// `file://` + `/abs/path` (or `localhost/abs/path`, or `~/path` as mops reads it).
fn file_uri(authority: &str, rest: &str) -> Result<PathBuf, String> {
    match authority {
        "" | "localhost" => Ok(PathBuf::from(format!("/{rest}"))),
        "~" => home_path(rest),
        _ => Err("a file URI names no host; write file:///absolute/path (three slashes)".into()),
    }
}

/// A plain path, relative to the working folder, or to the home folder after `~/`.
fn plain_path(path: &str) -> Result<PathBuf, String> {
    if path == "~" || path.starts_with("~/") {
        return home_path(path.trim_start_matches('~').trim_start_matches('/'));
    }
    if path.starts_with('~') {
        return Err("only `~` and `~/...` are expanded; write the path out".into());
    }
    let p = std::path::Path::new(path);
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    std::env::current_dir()
        .map(|cwd| cwd.join(p))
        .map_err(|e| format!("cannot resolve a relative path: {e}"))
}

fn home_path(rest: &str) -> Result<PathBuf, String> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or("`~` names the home folder, but HOME is not set")?;
    Ok(PathBuf::from(home).join(rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloud_key(uri: &str) -> (String, String) {
        match Location::parse(uri).unwrap() {
            Location::Cloud { authority, key, .. } => (authority, key),
            other => panic!("{uri} is not a cloud URI: {other:?}"),
        }
    }

    #[test]
    fn keys_are_taken_literally() {
        assert_eq!(
            cloud_key("s3://bkt/my lock/ü"),
            ("bkt".into(), "my lock/ü".into())
        );
        assert_eq!(cloud_key("S3://bkt/x/"), ("bkt".into(), "x".into()));
        assert_eq!(cloud_key("gs://bkt"), ("bkt".into(), String::new()));
        assert_eq!(
            cloud_key("abfss://ctr@acct.dfs.core.windows.net/k"),
            ("ctr@acct.dfs.core.windows.net".into(), "k".into())
        );
        assert_eq!(
            Location::parse("memory://a/b/c").unwrap(),
            Location::Memory {
                name: "a".into(),
                key: "b/c".into()
            }
        );
    }

    // Unix paths, HOME for `~`: Windows' (drive letters, file:///C:/..., USERPROFILE) have
    // no test yet (docs/platforms.md).
    #[cfg(unix)]
    #[test]
    fn files_and_paths() {
        assert_eq!(
            Location::parse("/tmp/x").unwrap(),
            Location::File("/tmp/x".into())
        );
        assert_eq!(
            Location::parse("file:///tmp/a b").unwrap(),
            Location::File("/tmp/a b".into())
        );
        assert_eq!(
            Location::parse("/tmp/a#b").unwrap(),
            Location::File("/tmp/a#b".into()),
            "a plain path is a path"
        );
        let home = std::env::var("HOME").unwrap();
        assert_eq!(
            Location::parse("~/x").unwrap(),
            Location::parse(&format!("file://{home}/x")).unwrap()
        );
        assert_eq!(
            Location::parse("file://~/x").unwrap(),
            Location::parse("~/x").unwrap()
        );
    }

    #[test]
    fn refuses_what_would_alias_or_drop() {
        for (bad, why) in [
            ("", "empty"),
            ("ftp://x/y", "unknown scheme"),
            ("s3:///key", "no bucket"),
            ("memory:///x", "no store name"),
            ("file://host/x", "three slashes"),
            ("file:///t/m#f", "fragment"),
            ("s3://bkt/k?v=1", "query"),
            ("s3//bkt/k", "write it as s3://bkt/k"),
            ("GS//bkt/k", "colon missing; write it as gs://bkt/k"),
            ("gs:/bkt/k", "write it as gs://bkt/k"),
            ("az:ctr/k", "write it as az://ctr/k"),
            ("memory//x/k", "write it as memory://x/k"),
            ("az://ctr/a%20b", "percent"),
            ("s3://bkt//k", "empty path segment"),
            ("s3://bkt/a/../k", "\"..\""),
            ("s3://Bucket/k", "lower case"),
            ("s3://bkt:9000/k", "':' is not allowed"),
            ("s3://user@bkt/k", "'@' is not allowed"),
            ("s3://b/k", "3 to 63 characters"),
            ("s3://../k", "3 to 63 characters"),
            ("s3://.../k", "begin and end"),
            ("gs://-bkt/k", "begin and end"),
            ("s3://a..b/k", "begin and end"),
            ("s3:b/k", "two slashes"),
            ("file:/tmp/x", "two slashes"),
            ("s3://bkt/a\nb", "control character"),
            ("~bob/x", "write the path out"),
            ("a b://x", "not a URI scheme"),
        ] {
            let e = Location::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e} should say {why}");
        }
    }
}
