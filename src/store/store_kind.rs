//! What kind of store a lock URI names, from its scheme alone (the table is
//! [`super::uri`]'s), and whether it names one place whatever the working folder and HOME.

use super::uri::{cloud_of, Cloud};

/// The kind of store a URI names, from its scheme alone. This and `cloud_of` are the one
/// table of schemes: the Python package asks them rather than keeping a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// A cloud store.
    Cloud(Cloud),
    /// Local files: `file://` or a plain path.
    File,
    /// `memory://`: a store inside this process.
    Memory,
}

impl StoreKind {
    /// The kind `uri` names; `None` for a scheme no store has ([`super::Location::parse`] says
    /// what is wrong with it).
    pub fn of_uri(uri: &str) -> Option<StoreKind> {
        let Some((scheme, _)) = uri.split_once("://") else {
            return Some(StoreKind::File);
        };
        match scheme.to_ascii_lowercase().as_str() {
            "file" => Some(StoreKind::File),
            "memory" => Some(StoreKind::Memory),
            other => cloud_of(other).map(StoreKind::Cloud),
        }
    }

    /// Its name, as the Python package keys what it keeps per kind.
    pub fn as_str(self) -> &'static str {
        match self {
            StoreKind::Cloud(Cloud::S3) => "s3",
            StoreKind::Cloud(Cloud::Azure) => "azure",
            StoreKind::Cloud(Cloud::Gcs) => "gcs",
            StoreKind::File => "file",
            StoreKind::Memory => "memory",
        }
    }

    /// Its name for messages.
    pub fn name(self) -> &'static str {
        match self {
            StoreKind::Cloud(cloud) => cloud.name(),
            StoreKind::File => "local files",
            StoreKind::Memory => "memory",
        }
    }

    /// Every kind.
    pub const ALL: [StoreKind; 5] = [
        StoreKind::Cloud(Cloud::S3),
        StoreKind::Cloud(Cloud::Azure),
        StoreKind::Cloud(Cloud::Gcs),
        StoreKind::File,
        StoreKind::Memory,
    ];
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
        assert!(names_a_fixed_place("/tmp/x") && names_a_fixed_place("memory://m"));
        assert!(!names_a_fixed_place("x/y") && !names_a_fixed_place("~/x"));
        assert!(names_a_fixed_place("file:///tmp/x") && !names_a_fixed_place("file://~/x"));
    }
}
