//! How to reach a store: object_store's configuration keys on top of the environment, and
//! credentials from outside object_store's own chain (`Credentials`, with the `cloud` feature), if any.

#[cfg(feature = "cloud")]
use super::credentials::Credentials;
use super::environment::Environment;
use std::collections::HashMap;
use std::sync::Arc;

/// What a lock, an inspection or a listing opens its store with.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// object_store configuration keys (`aws_endpoint`, `azure_storage_account_name`, ...)
    /// and blob-lock's `blob_lock_conditional_writes`, on top of the environment.
    pub options: HashMap<String, String>,
    /// Credentials that replace object_store's own chain.
    #[cfg(feature = "cloud")]
    pub credentials: Option<Credentials>,
    /// The environment as read when this was made (the Python bindings read it holding
    /// the GIL); `None` reads the process's environment when a store is opened.
    pub environment: Option<Arc<Environment>>,
}

impl Access {
    /// Options only: object_store's own credential chain.
    pub fn options(options: HashMap<String, String>) -> Access {
        Access {
            options,
            #[cfg(feature = "cloud")]
            credentials: None,
            environment: None,
        }
    }

    /// The environment its stores are configured from: the copy kept, or the process's now.
    pub fn environment(&self) -> Arc<Environment> {
        match &self.environment {
            Some(env) => env.clone(),
            None => Arc::new(Environment::read()),
        }
    }

    /// Nothing given: the environment alone.
    pub fn is_empty(&self) -> bool {
        #[cfg(feature = "cloud")]
        if self.credentials.is_some() {
            return false;
        }
        self.options.is_empty()
    }
}

impl From<HashMap<String, String>> for Access {
    fn from(options: HashMap<String, String>) -> Access {
        Access::options(options)
    }
}
