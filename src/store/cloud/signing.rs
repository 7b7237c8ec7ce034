//! What signs a store's requests, made ready before each request goes out: credentials from
//! outside object_store's chain ([`Credentials`]), or object_store's own chain (keys,
//! web identity, container credentials, instance metadata), asked for a credential first
//! so that a chain that finds none is reported as a credentials failure, naming what was
//! looked at, and never as a store that did not answer: nothing was sent to it.

use crate::store::config::credentials::{ChainNote, Credentials, FETCH_BOUND};
use futures_util::future::BoxFuture;
use object_store::CredentialProvider;
use std::sync::Arc;

/// How a client's requests are signed.
#[derive(Clone, Debug)]
pub(crate) enum Signing {
    /// Not at all: a memory store, or a store configured to skip signatures.
    Unsigned,
    /// Credentials from outside object_store's chain.
    Given(Credentials),
    /// object_store's own chain.
    Chain(Chain),
}

/// object_store's own credential provider of one client, with what it uses and what was
/// looked at before it.
#[derive(Clone)]
pub(crate) struct Chain {
    /// Asks the provider for a credential.
    pub(crate) ask: Ask,
    /// The cloud's name, for messages.
    pub(crate) store: &'static str,
    /// What a Rust caller can do when the chain finds nothing (each cloud's folder says).
    pub(crate) fix: &'static str,
    /// What object_store's chain takes its credentials from, in words
    /// (`the instance metadata service at http://169.254.169.254`).
    pub(crate) what: String,
    /// What was looked at before object_store's chain, and the fix, when the caller knows
    /// (the Python package names the AWS profile it read).
    pub(crate) note: Option<Arc<ChainNote>>,
    /// Where the credentials come from, as the caller named it.
    pub(crate) source: Option<String>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Chain({})", self.what)
    }
}

/// Asks object_store's credential provider of one client for a credential: its providers
/// cache what they fetched until shortly before it expires, so asking before each request
/// costs a lock and a clone.
pub(crate) type Ask = Arc<dyn Fn() -> BoxFuture<'static, object_store::Result<()>> + Send + Sync>;

/// [`Ask`] of `provider`, whatever its cloud's credential.
pub(crate) fn ask<C: Send + Sync + 'static>(
    provider: Arc<dyn CredentialProvider<Credential = C>>,
) -> Ask {
    Arc::new(move || {
        let provider = provider.clone();
        Box::pin(async move { provider.get_credential().await.map(drop) })
    })
}

impl Signing {
    /// Where the credentials come from, in words (never a secret).
    pub(crate) fn source(&self) -> String {
        match self {
            Signing::Unsigned => "nowhere: requests are not signed".to_string(),
            Signing::Given(c) => c.source().to_string(),
            Signing::Chain(chain) => match &chain.source {
                Some(source) => source.clone(),
                None => format!("object_store's chain: {}", chain.what),
            },
        }
    }

    /// Makes sure a credential is in hand, within [`FETCH_BOUND`]; the error says what was
    /// looked at, what failed and what to do.
    pub(crate) async fn ready(&self) -> Result<(), String> {
        match self {
            Signing::Unsigned => Ok(()),
            Signing::Given(credentials) => credentials.ready().await,
            Signing::Chain(chain) => chain.ready().await,
        }
    }
}

impl Chain {
    async fn ready(&self) -> Result<(), String> {
        let failed = match tokio::time::timeout(FETCH_BOUND, (self.ask)()).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => format!("which failed: {}", one_line(&e.to_string())),
            Err(_) => format!("which did not answer within {}s", FETCH_BOUND.as_secs()),
        };
        let (tried, fix) = match &self.note {
            Some(note) => (note.tried.as_str(), note.fix.as_str()),
            None => ("no credentials were given", self.fix),
        };
        Err(format!(
            "no {} credentials found: {tried}; then {}, {failed}. Nothing was sent to the store; {fix}",
            self.store,
            self.what
        ))
    }
}

/// An error of object_store's on one line: its HTTP errors nest causes with line breaks.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
