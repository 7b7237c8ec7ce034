//! What signs a store's requests, made ready before each request goes out: credentials from
//! outside object_store's chain ([`Credentials`]), or object_store's own chain (keys,
//! web identity, container credentials, instance metadata), asked for a credential first
//! so that a chain that finds none is reported as a credentials failure, naming what was
//! looked at, and never as a store that did not answer: nothing was sent to it.

use super::credentials::{ChainNote, Credentials, FETCH_BOUND};
use super::uri::Cloud;
use object_store::aws::AwsCredential;
use object_store::azure::AzureCredential;
use object_store::gcp::GcpCredential;
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
    pub(crate) provider: ChainProvider,
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

/// The provider object_store built, of one cloud.
#[derive(Clone)]
pub(crate) enum ChainProvider {
    S3(Arc<dyn CredentialProvider<Credential = AwsCredential>>),
    Azure(Arc<dyn CredentialProvider<Credential = AzureCredential>>),
    Gcs(Arc<dyn CredentialProvider<Credential = GcpCredential>>),
}

impl ChainProvider {
    fn cloud(&self) -> Cloud {
        match self {
            ChainProvider::S3(_) => Cloud::S3,
            ChainProvider::Azure(_) => Cloud::Azure,
            ChainProvider::Gcs(_) => Cloud::Gcs,
        }
    }
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
        // object_store's providers cache what they fetched until shortly before it expires:
        // asking again before each request costs a lock and a clone.
        let fetched = async {
            match &self.provider {
                ChainProvider::S3(p) => p.get_credential().await.map(drop),
                ChainProvider::Azure(p) => p.get_credential().await.map(drop),
                ChainProvider::Gcs(p) => p.get_credential().await.map(drop),
            }
        };
        let failed = match tokio::time::timeout(FETCH_BOUND, fetched).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => format!("which failed: {}", one_line(&e.to_string())),
            Err(_) => format!("which did not answer within {}s", FETCH_BOUND.as_secs()),
        };
        let cloud = self.provider.cloud();
        let (tried, fix) = match &self.note {
            Some(note) => (note.tried.as_str(), note.fix.as_str()),
            None => ("no credentials were given", default_fix(cloud)),
        };
        Err(format!(
            "no {} credentials found: {tried}; then {}, {failed}. Nothing was sent to the store; {fix}",
            cloud.name(),
            self.what
        ))
    }
}

/// What a Rust caller can do when object_store's chain finds nothing.
fn default_fix(cloud: Cloud) -> &'static str {
    match cloud {
        Cloud::S3 => "give aws_access_key_id and aws_secret_access_key in the storage options (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or credentials of your own (store::Credentials)",
        Cloud::Azure => "give an account key, a SAS or a connection string (AZURE_STORAGE_CONNECTION_STRING), or credentials of your own (store::Credentials)",
        Cloud::Gcs => "give a service account key (GOOGLE_SERVICE_ACCOUNT or GOOGLE_APPLICATION_CREDENTIALS), or credentials of your own (store::Credentials)",
    }
}

/// An error of object_store's on one line: its HTTP errors nest causes with line breaks.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
