//! What one cloud's client is to blob-lock, behind one trait so that one function
//! configures them all ([`super::configure`]): the environment it reads, its keys, which of
//! them become URLs or host names, its endpoint, what its own credential chain uses, its
//! options' names, and how it makes a delete conditional. Each cloud's folder implements it.

use super::conditional_delete::Condition;
use super::signing::Ask;
use crate::errors::Result;
use crate::store::config::credentials::Credentials;
use crate::store::config::{Cloud, Environment};
use object_store::signer::Signer;
use object_store::{ClientConfigKey, ObjectStore, RetryConfig};
use std::sync::Arc;

/// What one cloud's object_store builder is, as [`super::configure`] uses it.
pub(crate) trait Builder: Sized {
    type Key: std::str::FromStr + AsRef<str> + Clone;
    const CLOUD: Cloud;
    /// Its own storage options (object_store's keys and the few the Python package reads),
    /// for the "did you mean" of an unknown one ([`super::option_names`]).
    const OPTION_NAMES: &'static [&'static str];
    /// Of those, the ones object_store does not parse: read before it by the Python package
    /// (`aws_profile`: given from Rust, it is refused saying so), or expanded by [`Builder::expand`]
    /// before the options are checked (Azure's connection string).
    const OPTIONS_OF_OURS: &'static [&'static str] = &[];
    /// What a Rust caller can do when object_store's chain finds no credentials.
    const NO_CREDENTIALS_FIX: &'static str;
    /// How a delete is made conditional on a version.
    const DELETE_CONDITION: Condition;
    /// The environment variables object_store reads for it.
    const ENV_PREFIX: &'static str;
    /// The builder configured from the environment, as object_store's `from_env` would
    /// from the process's.
    fn from_env(env: &Environment) -> Self;
    fn with_url(self, url: &str) -> Self;
    fn with_retry(self, retry: RetryConfig) -> Self;
    fn with_config(self, key: Self::Key, value: &str) -> Self;
    /// Credentials from outside object_store's own chain (of this builder's cloud).
    fn with_credentials(self, credentials: &Credentials) -> Self;
    fn get(&self, key: &Self::Key) -> Option<String>;
    fn client_key(key: ClientConfigKey) -> Self::Key;
    /// Keys that name the bucket or container, which only the URI may do.
    fn is_bucket(key: &Self::Key) -> bool;
    /// Keys whose values become URLs, with where a user sets them.
    fn urls() -> Vec<(Self::Key, &'static str)>;
    /// Keys whose values become part of a host name (when no endpoint is set) or a
    /// signature: names, never text.
    fn host_parts() -> Vec<(Self::Key, &'static str)>;
    /// The endpoint, for messages.
    fn endpoint(&self, env: &Environment) -> Option<String>;
    /// The keys whose values are the endpoint of the store's requests.
    fn endpoints() -> Vec<Self::Key>;
    /// What object_store's own chain takes credentials from, as configured; None when
    /// requests are not signed.
    fn chain_uses(&self) -> Option<String>;
    /// The client, the credential provider object_store gave it, and the same client as
    /// the signer of URLs (prune's conditional deletes).
    fn finish(self, env: &Environment) -> object_store::Result<Finished>;
    /// The storage options given, with what this cloud reads before object_store does
    /// (Azure's connection string) turned into object_store's keys; `sources` says where
    /// they came from.
    fn expand(
        options: &[(String, String)],
        _env: &Environment,
        _sources: &mut String,
    ) -> Result<Vec<(String, String)>> {
        Ok(options.to_vec())
    }
    /// A failure to build that is a credentials problem, not a configuration one: what to
    /// tell the user.
    fn credentials_problem(_e: &object_store::Error) -> Option<String> {
        None
    }
}

/// What a builder makes: the client, how to ask its credential provider, its signer.
pub(crate) type Finished = (Arc<dyn ObjectStore>, Ask, Arc<dyn Signer>);

/// True for a configuration value that object_store reads as true.
pub(crate) fn truthy(value: Option<String>) -> bool {
    value.is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "on" | "yes" | "y"
        )
    })
}

/// `builder` with every variable of `env` under `prefix` that is one of its keys, as
/// object_store's `from_env` sets them.
pub(crate) fn keys_from<B: Builder>(mut builder: B, env: &Environment, prefix: &str) -> B {
    for (name, value) in env.starting_with(prefix) {
        if let Ok(key) = name.to_ascii_lowercase().parse::<B::Key>() {
            builder = builder.with_config(key, value);
        }
    }
    builder
}
