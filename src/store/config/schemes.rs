//! The one table of schemes: which kind of store a lock URI names, from its scheme alone,
//! with each kind's names for keys and messages. A new store is a row here (and, for a
//! cloud, a variant of [`Cloud`] and a folder of its own under `store/cloud/`); the Python
//! package asks this table rather than keeping a copy.

/// The cloud stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cloud {
    /// Amazon S3 and S3-compatible stores.
    S3,
    /// Azure Blob Storage.
    Azure,
    /// Google Cloud Storage.
    Gcs,
}

/// The kind of store a URI names, from its scheme alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// A cloud store.
    Cloud(Cloud),
    /// Local files: `file://` or a plain path.
    File,
    /// `memory://`: a store inside this process.
    Memory,
}

/// One kind of store: its schemes (the first is how messages write it) and its names.
struct Row {
    kind: StoreKind,
    schemes: &'static [&'static str],
    /// How the Python package keys what it keeps per kind, and how callers name the cloud.
    key: &'static str,
    /// For messages.
    name: &'static str,
    /// What the first part of its URIs is called.
    first_part: &'static str,
    /// How messages list its schemes beyond the first.
    aliases: &'static str,
}

const TABLE: [Row; 5] = [
    Row {
        kind: StoreKind::Cloud(Cloud::S3),
        schemes: &["s3", "s3a"],
        key: "s3",
        name: "S3",
        first_part: "bucket",
        aliases: " (or s3a://)",
    },
    Row {
        kind: StoreKind::Cloud(Cloud::Azure),
        schemes: &["az", "azure", "abfs", "abfss", "adl"],
        key: "azure",
        name: "Azure",
        first_part: "container",
        aliases: " (or azure://, abfs://, abfss://, adl://)",
    },
    Row {
        kind: StoreKind::Cloud(Cloud::Gcs),
        schemes: &["gs"],
        key: "gcs",
        name: "GCS",
        first_part: "bucket",
        aliases: "",
    },
    Row {
        kind: StoreKind::File,
        schemes: &["file"],
        key: "file",
        name: "local files",
        first_part: "folder",
        aliases: " (or a plain path)",
    },
    Row {
        kind: StoreKind::Memory,
        schemes: &["memory"],
        key: "memory",
        name: "memory",
        first_part: "store name",
        aliases: "",
    },
];

fn row(kind: StoreKind) -> &'static Row {
    TABLE
        .iter()
        .find(|r| r.kind == kind)
        .expect("every kind has its row")
}

/// The kind whose scheme is `scheme` (lower case).
fn of_scheme(scheme: &str) -> Option<StoreKind> {
    TABLE
        .iter()
        .find(|r| r.schemes.contains(&scheme))
        .map(|r| r.kind)
}

/// The cloud whose scheme is `scheme` (lower case).
pub(crate) fn cloud_of(scheme: &str) -> Option<Cloud> {
    match of_scheme(scheme)? {
        StoreKind::Cloud(cloud) => Some(cloud),
        _ => None,
    }
}

/// Whether `scheme` (lower case) is a store's.
pub(crate) fn known(scheme: &str) -> bool {
    of_scheme(scheme).is_some()
}

/// The schemes of lock URIs, for messages.
pub(crate) fn schemes() -> String {
    let each: Vec<String> = TABLE
        .iter()
        .map(|r| format!("{}://{}", r.schemes[0], r.aliases))
        .collect();
    let (last, rest) = each.split_last().expect("the table has rows");
    format!("{} and {last}", rest.join(", "))
}

impl Cloud {
    /// The store's name for messages.
    pub fn name(self) -> &'static str {
        row(StoreKind::Cloud(self)).name
    }

    /// What the first part of its URIs is called.
    pub(crate) fn bucket_word(self) -> &'static str {
        row(StoreKind::Cloud(self)).first_part
    }

    /// The cloud whose store `uri` names; `None` for local files and memory:// (and for a
    /// URI that [`super::Location::parse`] would refuse).
    pub fn of_uri(uri: &str) -> Option<Cloud> {
        let (scheme, _) = uri.split_once("://")?;
        cloud_of(&scheme.to_ascii_lowercase())
    }

    /// The cloud a caller names by its key (`"s3"`, `"azure"`, `"gcs"`); the error lists them.
    pub fn from_key(key: &str) -> Result<Cloud, String> {
        let clouds = || {
            TABLE
                .iter()
                .filter(|r| matches!(r.kind, StoreKind::Cloud(_)))
        };
        match clouds().find(|r| r.key == key).map(|r| r.kind) {
            Some(StoreKind::Cloud(cloud)) => Ok(cloud),
            _ => {
                let keys: Vec<String> = clouds().map(|r| format!("{:?}", r.key)).collect();
                Err(format!(
                    "cloud must be one of {}, got {key:?}",
                    keys.join(", ")
                ))
            }
        }
    }
}

impl StoreKind {
    /// The kind `uri` names; `None` for a scheme no store has ([`super::Location::parse`] says
    /// what is wrong with it).
    pub fn of_uri(uri: &str) -> Option<StoreKind> {
        match uri.split_once("://") {
            None => Some(StoreKind::File),
            Some((scheme, _)) => of_scheme(&scheme.to_ascii_lowercase()),
        }
    }

    /// Its name, as the Python package keys what it keeps per kind.
    pub fn as_str(self) -> &'static str {
        row(self).key
    }

    /// Its name for messages.
    pub fn name(self) -> &'static str {
        row(self).name
    }

    /// Every kind, in the table's order.
    pub fn all() -> impl Iterator<Item = StoreKind> {
        TABLE.iter().map(|r| r.kind)
    }
}

/// True if `uri` names the same place whatever the working folder and HOME are: not a
/// relative path, nor one under `~` (a plain path or `file://~/...`).
pub fn names_a_fixed_place(uri: &str) -> bool {
    match uri.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("file") => rest.starts_with('/'),
        Some(_) => true,
        None => std::path::Path::new(uri).is_absolute(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_names_its_kind_of_store_by_its_scheme_alone() {
        let kind = |uri| StoreKind::of_uri(uri).map(StoreKind::as_str);
        assert_eq!(kind("S3A://b/k"), Some("s3"));
        assert_eq!(kind("abfss://c@a.dfs.core.windows.net/k"), Some("azure"));
        assert_eq!(kind("gs://b"), Some("gcs"));
        assert_eq!(kind("memory://m/k"), Some("memory"));
        assert_eq!(kind("file:///tmp/x"), Some("file"));
        assert_eq!(kind("relative/x"), Some("file"));
        assert_eq!(kind("http://host/x"), None);
        // An absolute path: on Windows one with its drive (`/tmp/x` is relative to the drive).
        let absolute = if cfg!(windows) { r"C:\tmp\x" } else { "/tmp/x" };
        assert!(names_a_fixed_place(absolute) && names_a_fixed_place("memory://m"));
        assert!(!names_a_fixed_place("x/y") && !names_a_fixed_place("~/x"));
        assert!(names_a_fixed_place("file:///tmp/x") && !names_a_fixed_place("file://~/x"));
    }

    #[test]
    fn every_kind_has_one_row_and_every_scheme_one_kind() {
        let kinds: Vec<StoreKind> = StoreKind::all().collect();
        for (i, k) in kinds.iter().enumerate() {
            assert!(!kinds[..i].contains(k), "{k:?} has two rows");
        }
        let all: Vec<&str> = TABLE
            .iter()
            .flat_map(|r| r.schemes.iter().copied())
            .collect();
        for (i, s) in all.iter().enumerate() {
            assert!(!all[..i].contains(s), "{s} is two kinds' scheme");
        }
        assert_eq!(
            schemes(),
            "s3:// (or s3a://), az:// (or azure://, abfs://, abfss://, adl://), gs://, file:// (or a plain path) and memory://"
        );
        assert_eq!(Cloud::from_key("azure"), Ok(Cloud::Azure));
        assert!(Cloud::from_key("file")
            .unwrap_err()
            .contains("\"s3\", \"azure\", \"gcs\""));
    }
}
