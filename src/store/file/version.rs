//! What tells one write of a lockfile from another, and the names of temporary files: both
//! made on every update, so written without `format!` (its machinery cost more than the
//! digest of the lockfile itself).

use crate::per_process::PerProcess;
use crate::store::lock_store::Version;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf, MAIN_SEPARATOR_STR};
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) const TEMP_PREFIX: &str = ".lock.json.";
pub(super) const TEMP_SUFFIX: &str = ".tmp";

/// The version of a file with `meta` whose bytes are `content`: its identity (below) and a
/// digest of the content. Only ever compared within this process (a version a write or read
/// returned against the one a later read finds), never stored.
pub(super) fn version_of(meta: &fs::Metadata, content: &[u8]) -> Version {
    let mut e_tag = Vec::with_capacity(80);
    file_identity(meta, &mut e_tag);
    e_tag.push(b'-');
    push_hex(&mut e_tag, digest(content));
    Version {
        e_tag: Some(String::from_utf8(e_tag).expect("ASCII")),
        version: None,
    }
}

/// A digest of `content` eight bytes at a time (FxHash's step: a rotation, an exclusive or
/// and a multiplication by an odd constant). Each step is a bijection of the state for a
/// given word, so contents that differ in one word always differ here.
fn digest(content: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |h: u64, w: u64| (h.rotate_left(5) ^ w).wrapping_mul(K);
    let mut words = content.chunks_exact(8);
    let mut h = (&mut words).fold(content.len() as u64, |h, w| {
        step(h, u64::from_le_bytes(w.try_into().expect("8 bytes")))
    });
    let mut tail = [0u8; 8];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    h = step(h, u64::from_le_bytes(tail));
    h
}

/// What tells two writes of the same bytes apart: every write makes a new file, so its
/// inode (a new one each time), its modification time and its size.
#[cfg(unix)]
fn file_identity(meta: &fs::Metadata, out: &mut Vec<u8>) {
    use std::os::unix::fs::MetadataExt;
    push_hex(out, meta.ino());
    out.push(b'-');
    push_hex(out, meta.mtime() as u64);
    out.push(b'.');
    push_hex(out, meta.mtime_nsec() as u64);
    out.push(b'-');
    push_hex(out, meta.size());
}

/// Without inode numbers in std (Windows): the modification time to the nanosecond where
/// the file system keeps it, and the size.
#[cfg(not(unix))]
fn file_identity(meta: &fs::Metadata, out: &mut Vec<u8>) {
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    push_hex(out, (modified >> 64) as u64);
    push_hex(out, modified as u64);
    out.push(b'-');
    push_hex(out, meta.len());
}

/// A path for a temporary file in `dir`, unique across processes and hosts sharing the
/// folder: a random prefix drawn in each process, the pid (for whoever reads the folder),
/// and a counter. Cheaper than a fresh UUID per write (one `getrandom` call less).
pub(super) fn temp_path(dir: &Path) -> PathBuf {
    static STEM: PerProcess<Vec<u8>> = PerProcess::new(|| {
        let mut stem = TEMP_PREFIX.as_bytes().to_vec();
        push_hex(&mut stem, uuid::Uuid::new_v4().as_u64_pair().0);
        stem.push(b'-');
        push_hex(&mut stem, u64::from(std::process::id()));
        stem.push(b'-');
        stem
    });
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let stem = STEM.get();
    let mut name = Vec::with_capacity(stem.len() + 20);
    name.extend_from_slice(stem);
    push_hex(&mut name, COUNTER.fetch_add(1, Ordering::Relaxed));
    name.extend_from_slice(TEMP_SUFFIX.as_bytes());
    let name = String::from_utf8(name).expect("ASCII");
    let dir = dir.as_os_str();
    let mut path = OsString::with_capacity(dir.len() + 1 + name.len());
    path.push(dir);
    if !dir.is_empty() {
        path.push(MAIN_SEPARATOR_STR);
    }
    path.push(name);
    PathBuf::from(path)
}

/// `n` in lower-case hexadecimal without leading zeros, as `{:x}` writes it.
fn push_hex(out: &mut Vec<u8>, n: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 16];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = DIGITS[(n & 0xf) as usize];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

#[cfg(test)]
mod tests {
    use super::{digest, push_hex, temp_path, TEMP_PREFIX, TEMP_SUFFIX};
    use std::path::Path;

    #[test]
    fn hex_is_written_as_format_writes_it() {
        for n in [0, 1, 15, 16, 255, 0xdead_beef, u64::MAX, 1 << 63] {
            let mut s = Vec::new();
            push_hex(&mut s, n);
            assert_eq!(s, format!("{n:x}").as_bytes());
        }
    }

    #[test]
    fn contents_that_differ_in_one_byte_or_in_length_have_different_digests() {
        let body = br#"{"expire_s":30.0,"owner":"a9e686ec-1998-4032-61e7","token":7}"#.to_vec();
        let base = digest(&body);
        for i in 0..body.len() {
            let mut changed = body.clone();
            changed[i] ^= 1;
            assert_ne!(digest(&changed), base, "byte {i}");
        }
        assert_ne!(digest(&body[..body.len() - 1]), base);
        let mut longer = body.clone();
        longer.push(0);
        assert_ne!(digest(&longer), base, "a trailing zero byte");
        assert_ne!(digest(b""), digest(&[0]));
    }

    #[test]
    fn temporary_files_are_named_apart_in_their_folder() {
        let a = temp_path(Path::new("/tmp/locks/x"));
        let b = temp_path(Path::new("/tmp/locks/x"));
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(Path::new("/tmp/locks/x")));
        let name = a.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with(TEMP_PREFIX) && name.ends_with(TEMP_SUFFIX),
            "{name}"
        );
        assert_eq!(temp_path(Path::new("")).parent(), Some(Path::new("")));
    }
}
