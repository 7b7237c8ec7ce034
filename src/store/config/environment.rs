//! The environment variables that configure object_store's clients (`AWS_*`, `AZURE_*`,
//! `AZURITE_*`, `GOOGLE_*`, `SERVICE_ACCOUNT`, `MSI_ENDPOINT`, proxies, certificates), read
//! once per [`Access`](super::Access) and kept with it.
//!
//! In a Python process the environment belongs to Python: `os.environ[...] = ...` calls
//! `setenv` under the GIL, and a read of the C environment on another thread at that moment
//! may see it half written. So the bindings read it while they hold the GIL, when a lock,
//! an inspection or a listing is made, and every store opened for it later (the locks of a
//! listing, a keep-alive started in the background) configures its client from that copy
//! instead of reading the environment again on a thread of the runtime. (object_store itself
//! still reads a few variables when it builds a client, once per store and process, and
//! when it fetches instance credentials: `AZURITE_BLOB_STORAGE_URL`, the proxies of its
//! HTTP client, `GCE_METADATA_HOST`, `MSI_SECRET`, `HOME`.)

use std::hash::{Hash, Hasher};

/// A copy of the variables that configure the stores' clients, sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Environment {
    vars: Vec<(String, String)>,
}

/// What a variable's name starts with, if object_store or its HTTP client reads it.
const PREFIXES: [&str; 6] = [
    "AWS_",
    "AZURE_",
    "AZURITE_",
    "GOOGLE_",
    "SSL_CERT_",
    "SERVICE_ACCOUNT",
];

fn configures_a_client(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.ends_with("_PROXY")
        || upper == "MSI_ENDPOINT"
        || PREFIXES.iter().any(|p| name.starts_with(p))
}

impl Environment {
    /// Reads the process's environment now. In a Python process, call it holding the GIL.
    pub fn read() -> Environment {
        Environment::of(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))),
        )
    }

    /// The variables among `vars` that configure a client (for tests, and callers that
    /// keep an environment of their own).
    pub fn of(vars: impl IntoIterator<Item = (String, String)>) -> Environment {
        let mut vars: Vec<_> = vars
            .into_iter()
            .filter(|(k, _)| configures_a_client(k))
            .collect();
        vars.sort();
        Environment { vars }
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .binary_search_by(|(k, _)| k.as_str().cmp(name))
            .ok()
            .map(|i| self.vars[i].1.as_str())
    }

    /// The variables whose names start with `prefix`.
    pub fn starting_with<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.vars
            .iter()
            .filter(move |(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// A digest of the whole: two clients configured from environments with different
    /// digests are different clients.
    pub fn digest(&self) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut h);
        h.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_only_what_configures_a_client() {
        let env = Environment::of(
            [
                ("AWS_REGION", "eu-west-1"),
                ("HOME", "/home/me"),
                ("https_proxy", "http://proxy:3128"),
                ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
                ("PATH", "/bin"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        assert_eq!(env.get("AWS_REGION"), Some("eu-west-1"));
        assert_eq!(env.get("https_proxy"), Some("http://proxy:3128"));
        assert_eq!(env.get("HOME"), None);
        assert_eq!(env.starting_with("AZURE_").count(), 1);
        let other = Environment::of([("AWS_REGION".to_string(), "us-east-1".to_string())]);
        assert_ne!(env.digest(), other.digest());
    }
}
