//! Credentials from outside object_store's own chain: a profile, SSO, an assumed role, `az
//! login`, gcloud, or a caller's own provider. Whoever knows how to fetch them (the Python
//! layer bridges botocore, azure-identity and google-auth) gives a [`Fetch`]; [`Credentials`]
//! caches what it returns and fetches again before it expires, so that a lease held for
//! hours never meets an expired token. A fetch that fails while the credential in hand is
//! still valid keeps that one (and is tried again at the next request).

use super::schemes::Cloud;
use async_trait::async_trait;
use object_store::aws::AwsCredential;
use object_store::azure::AzureCredential;
use object_store::gcp::GcpCredential;
use object_store::CredentialProvider;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What a fetch returns: a credential and when it stops being valid (`None`: never).
#[derive(Debug)]
pub struct Fetched<C> {
    /// The credential.
    pub credential: C,
    /// When it expires.
    pub expires_at: Option<SystemTime>,
}

/// Fetches a credential; the error is a message for the person who reads it, without
/// secrets, naming what to do.
pub type Fetch<C> =
    Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Result<Fetched<C>, String>> + Send>> + Send + Sync>;

/// The longest a fetch of credentials may take (an SSO refresh, an assumed role, a CLI).
pub const FETCH_BOUND: Duration = Duration::from_secs(120);

/// A credential source for one cloud, shared by every store that uses it.
#[derive(Clone)]
pub struct Credentials {
    provider: Provider,
    /// Where the credentials come from, for `doctor` and messages: never a secret.
    source: Arc<str>,
}

#[derive(Clone)]
enum Provider {
    S3(Arc<Refreshing<AwsCredential>>),
    Azure(Arc<Refreshing<AzureCredential>>),
    Gcs(Arc<Refreshing<GcpCredential>>),
    /// object_store's own chain, described ([`Credentials::object_store_chain`]).
    Chain(Arc<ChainNote>),
}

/// What a caller looked at before leaving the credentials to object_store's own chain, and
/// what to do if that finds none: the words of the error that says so.
#[derive(Debug)]
pub struct ChainNote {
    pub(crate) cloud: Cloud,
    /// `looked in the storage options, AWS_ACCESS_KEY_ID and the profile 'default' ...`
    pub(crate) tried: String,
    /// `run aws configure ...`
    pub(crate) fix: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({})", self.source)
    }
}

impl Credentials {
    /// S3 credentials fetched by `fetch`, refetched `refresh` before they expire (or
    /// sooner, half their lifetime, for short-lived ones).
    pub fn s3(source: &str, refresh: Duration, fetch: Fetch<AwsCredential>) -> Credentials {
        Credentials {
            provider: Provider::S3(Refreshing::new(source, refresh, fetch)),
            source: source.into(),
        }
    }

    /// Azure credentials (a bearer token, an account key or a SAS).
    pub fn azure(source: &str, refresh: Duration, fetch: Fetch<AzureCredential>) -> Credentials {
        Credentials {
            provider: Provider::Azure(Refreshing::new(source, refresh, fetch)),
            source: source.into(),
        }
    }

    /// GCS credentials (a bearer token).
    pub fn gcs(source: &str, refresh: Duration, fetch: Fetch<GcpCredential>) -> Credentials {
        Credentials {
            provider: Provider::Gcs(Refreshing::new(source, refresh, fetch)),
            source: source.into(),
        }
    }

    /// object_store's own chain for `cloud` (keys, web identity, container credentials,
    /// instance metadata), with what the caller looked at before it (`tried`) and what to
    /// do (`fix`) for the error when it finds none.
    pub fn object_store_chain(cloud: Cloud, source: &str, tried: &str, fix: &str) -> Credentials {
        let note = ChainNote {
            cloud,
            tried: tried.to_string(),
            fix: fix.to_string(),
        };
        Credentials {
            provider: Provider::Chain(Arc::new(note)),
            source: source.into(),
        }
    }

    /// What was looked at before object_store's chain, if these stand for it.
    pub(crate) fn chain_note(&self) -> Option<&Arc<ChainNote>> {
        match &self.provider {
            Provider::Chain(note) => Some(note),
            _ => None,
        }
    }

    /// Where they come from (`"AWS profile 'prod' (botocore)"`): never a secret.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The cloud they are for.
    pub fn cloud(&self) -> Cloud {
        match self.provider {
            Provider::S3(_) => Cloud::S3,
            Provider::Azure(_) => Cloud::Azure,
            Provider::Gcs(_) => Cloud::Gcs,
            Provider::Chain(ref note) => note.cloud,
        }
    }

    /// Identifies the source within the process: stores on the same credentials share a
    /// client, stores on others do not.
    pub(crate) fn id(&self) -> usize {
        match &self.provider {
            Provider::S3(p) => Arc::as_ptr(p) as *const () as usize,
            Provider::Azure(p) => Arc::as_ptr(p) as *const () as usize,
            Provider::Gcs(p) => Arc::as_ptr(p) as *const () as usize,
            Provider::Chain(p) => Arc::as_ptr(p) as *const () as usize,
        }
    }

    /// Makes sure a valid credential is in hand (fetching one if need be, within
    /// [`FETCH_BOUND`]), so that a store request never spends its own time on a token
    /// endpoint. The error says what failed and what to do.
    pub(crate) async fn ready(&self) -> Result<(), String> {
        let fetched = async {
            match &self.provider {
                Provider::S3(p) => p.get().await.map(drop),
                Provider::Azure(p) => p.get().await.map(drop),
                Provider::Gcs(p) => p.get().await.map(drop),
                Provider::Chain(_) => Ok(()), // asked through the client's Signing
            }
        };
        match tokio::time::timeout(FETCH_BOUND, fetched).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "fetching credentials from {} took longer than {}s",
                self.source,
                FETCH_BOUND.as_secs()
            )),
        }
    }

    pub(crate) fn aws(&self) -> Option<Arc<dyn CredentialProvider<Credential = AwsCredential>>> {
        match &self.provider {
            Provider::S3(p) => Some(p.clone()),
            _ => None,
        }
    }

    pub(crate) fn azure_provider(
        &self,
    ) -> Option<Arc<dyn CredentialProvider<Credential = AzureCredential>>> {
        match &self.provider {
            Provider::Azure(p) => Some(p.clone()),
            _ => None,
        }
    }

    pub(crate) fn gcp(&self) -> Option<Arc<dyn CredentialProvider<Credential = GcpCredential>>> {
        match &self.provider {
            Provider::Gcs(p) => Some(p.clone()),
            _ => None,
        }
    }
}

/// A failed fetch, as object_store carries it to the gate.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CredentialsFailure(pub String);

/// The message of a failed credential fetch inside an object_store error, if that is what
/// failed.
pub(crate) fn failure_in(e: &object_store::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(f) = s.downcast_ref::<CredentialsFailure>() {
            return Some(f.0.clone());
        }
        source = s.source();
    }
    None
}

/// One cached credential and the fetch that renews it. A credential inside its refresh
/// window but still valid is handed out at once while one fetch renews it in the
/// background: a renewal of a lease never waits for a token endpoint. Only a caller with no
/// valid credential at all waits for a fetch.
struct Refreshing<C> {
    source: String,
    refresh: Duration,
    fetch: Fetch<C>,
    cached: std::sync::Mutex<Option<Cached<C>>>,
    /// Held while a fetch runs: one at a time.
    fetching: tokio::sync::Mutex<()>,
    /// Itself, for the background refresh.
    this: std::sync::Weak<Refreshing<C>>,
}

struct Cached<C> {
    credential: Arc<C>,
    expires_at: Option<SystemTime>,
    fetched_at: SystemTime,
}

impl<C> Cached<C> {
    /// Fresh enough to hand out without fetching: never expires, or more than the refresh
    /// window left (the window is at most half the lifetime it was fetched with).
    fn fresh(&self, now: SystemTime, refresh: Duration) -> bool {
        let Some(expires_at) = self.expires_at else {
            return true;
        };
        let lifetime = expires_at
            .duration_since(self.fetched_at)
            .unwrap_or_default();
        let window = refresh.min(lifetime / 2);
        expires_at
            .duration_since(now)
            .is_ok_and(|left| left > window)
    }

    fn valid(&self, now: SystemTime) -> bool {
        self.expires_at.is_none_or(|t| t > now)
    }
}

impl<C> std::fmt::Debug for Refreshing<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({})", self.source)
    }
}

impl<C: Send + Sync + 'static> Refreshing<C> {
    fn new(source: &str, refresh: Duration, fetch: Fetch<C>) -> Arc<Self> {
        Arc::new_cyclic(|this| Refreshing {
            source: source.to_string(),
            refresh,
            fetch,
            cached: std::sync::Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
            this: this.clone(),
        })
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, Option<Cached<C>>> {
        self.cached.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cached credential if it is fresh, or valid when `valid_will_do`.
    fn in_hand(&self, valid_will_do: bool) -> Option<Arc<C>> {
        let now = SystemTime::now();
        self.cached()
            .as_ref()
            .filter(|c| c.fresh(now, self.refresh) || (valid_will_do && c.valid(now)))
            .map(|c| c.credential.clone())
    }

    /// Fetches and caches, one fetch at a time; a caller that waited for another's fetch
    /// takes its result.
    async fn fetch_now(&self) -> Result<Arc<C>, String> {
        let _one = self.fetching.lock().await;
        if let Some(c) = self.in_hand(false) {
            return Ok(c);
        }
        let got = (self.fetch)().await?;
        let credential = Arc::new(got.credential);
        *self.cached() = Some(Cached {
            credential: credential.clone(),
            expires_at: got.expires_at,
            fetched_at: SystemTime::now(),
        });
        Ok(credential)
    }

    /// Renews the credential in the background unless a fetch already runs.
    fn refresh_in_background(&self) {
        let Some(this) = self.this.upgrade() else {
            return;
        };
        if this.fetching.try_lock().is_err() {
            return; // a fetch is under way
        }
        tokio::spawn(async move {
            if let Err(message) = this.fetch_now().await {
                log::warn!(
                    "refreshing the credentials from {} failed; the ones in hand serve until they expire: {message}",
                    this.source
                );
            }
        });
    }

    async fn get(&self) -> Result<Arc<C>, String> {
        if let Some(c) = self.in_hand(false) {
            return Ok(c);
        }
        if let Some(c) = self.in_hand(true) {
            self.refresh_in_background();
            return Ok(c);
        }
        self.fetch_now().await
    }
}

#[async_trait]
impl<C: std::fmt::Debug + Send + Sync + 'static> CredentialProvider for Refreshing<C> {
    type Credential = C;

    async fn get_credential(&self) -> object_store::Result<Arc<C>> {
        self.get()
            .await
            .map_err(|message| object_store::Error::Generic {
                store: "credentials",
                source: Box::new(CredentialsFailure(message)),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting(
        lifetime: Option<Duration>,
        fail_after: usize,
    ) -> (Fetch<GcpCredential>, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let fetch: Fetch<GcpCredential> = Arc::new(move || {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if n >= fail_after {
                    return Err("the token endpoint refused".to_string());
                }
                Ok(Fetched {
                    credential: GcpCredential {
                        bearer: format!("token-{n}"),
                    },
                    expires_at: lifetime.map(|l| SystemTime::now() + l),
                })
            })
        });
        (fetch, calls)
    }

    #[tokio::test]
    async fn a_credential_is_fetched_again_before_it_expires() {
        // Seconds, not milliseconds: a test binary that the machine pauses for a few hundred
        // milliseconds must not see the credential expire between two steps.
        let (fetch, calls) = counting(Some(Duration::from_secs(4)), usize::MAX);
        let c = Credentials::gcs("test", Duration::from_secs(300), fetch);
        let p = c.gcp().unwrap();
        let first = p.get_credential().await.unwrap();
        assert_eq!(p.get_credential().await.unwrap().bearer, first.bearer);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "cached while fresh");
        // Half its lifetime left is the refresh point of a short-lived credential: the one
        // in hand is served while a fetch in the background renews it.
        tokio::time::sleep(Duration::from_millis(2100)).await; // past half its lifetime
        assert_eq!(p.get_credential().await.unwrap().bearer, first.bearer);
        c.ready().await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while p.get_credential().await.unwrap().bearer == first.bearer {
            assert!(std::time::Instant::now() < deadline, "never renewed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2, "one fetch renewed it");
    }

    #[tokio::test]
    async fn a_credential_without_expiry_is_fetched_once() {
        let (fetch, calls) = counting(None, usize::MAX);
        let p = Credentials::gcs("test", Duration::from_secs(300), fetch)
            .gcp()
            .unwrap();
        for _ in 0..3 {
            p.get_credential().await.unwrap();
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failed_refresh_keeps_a_valid_credential_and_then_fails_named() {
        let (fetch, _) = counting(Some(Duration::from_secs(4)), 1);
        let p = Credentials::gcs("test", Duration::from_secs(300), fetch)
            .gcp()
            .unwrap();
        let first = p.get_credential().await.unwrap();
        tokio::time::sleep(Duration::from_millis(2100)).await; // past half: refreshed, refused
        let kept = p.get_credential().await.unwrap();
        assert_eq!(kept.bearer, first.bearer, "still valid: kept");
        tokio::time::sleep(Duration::from_millis(2000)).await; // past its expiry
        let e = p.get_credential().await.unwrap_err();
        assert_eq!(
            failure_in(&e).as_deref(),
            Some("the token endpoint refused")
        );
    }
}
