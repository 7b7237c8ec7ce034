//! The storage options given for a store, split into blob-lock's own (`blob_lock_*`) and
//! object_store's configuration keys.

#[cfg(feature = "cloud")]
use super::credentials::Credentials;
use super::environment::Environment;
use crate::errors::{Error, Result};
use std::sync::Arc;

/// The storage option that says whether to probe the store's conditional writes
/// (`verify`, the default) or to trust them without a probe (`trust`).
pub const CONDITIONAL_WRITES: &str = "blob_lock_conditional_writes";

/// The storage options split into ours (`blob_lock_*`) and object_store's. Ours may be
/// given for every store.
pub(crate) struct Options {
    /// `blob_lock_conditional_writes=trust`.
    pub(crate) trust: bool,
    /// object_store's configuration keys, lower-cased, sorted.
    pub(crate) store: Vec<(String, String)>,
    /// Credentials from outside object_store's chain.
    #[cfg(feature = "cloud")]
    pub(crate) credentials: Option<Credentials>,
    /// The environment the client is configured from (read once, [`Environment`]).
    #[cfg_attr(not(feature = "cloud"), allow(dead_code))] // the cloud clients read it
    pub(crate) environment: Arc<Environment>,
}

impl Options {
    pub(crate) fn split(access: &super::Access) -> Result<Options> {
        let mut out = Options {
            trust: false,
            store: Vec::new(),
            #[cfg(feature = "cloud")]
            credentials: access.credentials.clone(),
            environment: access.environment(),
        };
        for (k, v) in &access.options {
            let key = k.to_ascii_lowercase();
            if key == CONDITIONAL_WRITES {
                out.trust = match v.trim().to_ascii_lowercase().as_str() {
                    "trust" => true,
                    "verify" => false,
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "storage option {CONDITIONAL_WRITES} must be \"verify\" (the default: probe the store once per process) or \"trust\" (skip the probe), got {v:?}"
                        )))
                    }
                };
            } else if key.starts_with("blob_lock_") {
                return Err(Error::InvalidArgument(format!(
                    "unknown storage option {k:?}; blob-lock's own option is {CONDITIONAL_WRITES}"
                )));
            } else {
                out.store.push((key, v.clone()));
            }
        }
        out.store.sort();
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Storage options from pairs (for tests here and in `cloud`).
    #[cfg(feature = "cloud")]
    pub(crate) fn options(pairs: &[(&str, &str)]) -> Options {
        let map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Options::split(&super::super::Access::options(map)).unwrap()
    }

    #[test]
    fn our_own_option_is_checked() {
        let map: HashMap<String, String> =
            [(CONDITIONAL_WRITES.to_string(), "yes".to_string())].into();
        let e = Options::split(&map.into()).err().unwrap().to_string();
        assert!(e.contains("\"trust\""), "{e}");
    }
}
