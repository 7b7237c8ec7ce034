//! The clients of the stores: one object_store client per store and process, shared by every
//! lock, keep-alive, inspection and probe on that store (its connection pool too), with what
//! the process has learnt about the store: whether it ever answered, and whether it honours
//! conditional writes ([`super::probe`]).
//!
//! A store is its scheme, bucket or container, and effective configuration: the storage
//! options given, and the environment variables that object_store and its HTTP client read
//! (`AWS_*`, `AZURE_*`, `GOOGLE_*`, proxies, certificates). Building a client costs
//! milliseconds of CPU and a connection pool of its own ([`super::cloud`]), so it is built
//! once; a lock on a store already in use only looks it up.

use super::cloud::build;
use super::credentials::Credentials;
use super::signing::Signing;
use super::storage_options::Options;
use super::uri::Cloud;
use crate::errors::Result;
use crate::per_process::PerProcess;
use object_store::ObjectStore;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::{Duration, Instant};

/// One store's client, shared by everything on that store in this process.
pub struct Client {
    /// The object_store client.
    store: Arc<dyn ObjectStore>,
    /// The store for messages: `s3://bucket at http://127.0.0.1:9000`.
    name: String,
    /// Which cloud; `None` for memory stores, whose writes are conditional by construction.
    cloud: Option<Cloud>,
    /// The storage options asked to trust conditional writes without probing them.
    trust: bool,
    /// What signs its requests, made ready before each request.
    signing: Signing,
    /// What sends its conditional deletes (none for memory stores).
    deleter: Option<super::conditional_delete::Deleter>,
    /// What the process learnt about the store; a fork child keeps it.
    facts: Arc<Facts>,
    /// What the store can take from this process, and who goes first ([`super::load`]).
    load: Arc<super::load::Load>,
    /// One probe of the store at a time.
    probing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Client({})", self.name)
    }
}

/// What the process learnt about a store. Atomics only: a child made by fork reads them
/// whatever its parent's threads were doing.
#[derive(Debug, Default)]
pub struct Facts {
    answered: AtomicBool,
    /// When a connection was first dropped before any answer (accepted, then reset or
    /// closed), in milliseconds after [`epoch`], plus one (0: none was).
    first_drop: AtomicU64,
    verdict: AtomicU8,
    warned: AtomicBool,
    /// Whether the store honours a conditional delete: 0 not probed yet, 1 yes, 2 no.
    deletes: AtomicU8,
}

/// How long a store that has never answered may drop connections before it counts as
/// unreachable: a flaky path is retried meanwhile (the acquisition's polls, growing from
/// 50 ms), an endpoint that never speaks HTTP still fails within seconds.
const DROPS_FORGIVEN_FOR: Duration = Duration::from_secs(5);

/// The instant the process's first [`Facts::forgive_drop`] counts from.
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Facts {
    /// True once the store answered a request of this process (any HTTP answer).
    pub fn answered(&self) -> bool {
        self.answered.load(Ordering::Relaxed)
    }

    pub(crate) fn mark_answered(&self) {
        if !self.answered.load(Ordering::Relaxed) {
            self.answered.store(true, Ordering::Relaxed);
        }
    }

    /// Notes a connection dropped before the store ever answered; true while such drops
    /// are still retried ([`DROPS_FORGIVEN_FOR`] after the first).
    pub(crate) fn forgive_drop(&self) -> bool {
        let now = epoch().elapsed().as_millis() as u64 + 1;
        let first =
            match self
                .first_drop
                .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => now,
                Err(first) => first,
            };
        Duration::from_millis(now - first) < DROPS_FORGIVEN_FOR
    }

    /// The probe's verdict as stored (0: none yet).
    pub(crate) fn verdict_code(&self) -> u8 {
        self.verdict.load(Ordering::Acquire)
    }

    pub(crate) fn set_verdict_code(&self, code: u8) {
        self.verdict.store(code, Ordering::Release);
    }

    /// Whether the store honours conditional deletes, once probed.
    pub(crate) fn conditional_deletes(&self) -> Option<bool> {
        match self.deletes.load(Ordering::Acquire) {
            1 => Some(true),
            2 => Some(false),
            _ => None,
        }
    }

    pub(crate) fn set_conditional_deletes(&self, honoured: bool) {
        self.deletes
            .store(if honoured { 1 } else { 2 }, Ordering::Release);
    }

    /// True the first time only: one warning per store.
    pub(crate) fn first_warning(&self) -> bool {
        !self.warned.swap(true, Ordering::Relaxed)
    }
}

// What the rest of store/ reads of a client. The fields stay private: what a caller may do
// with the store's facts and its probe lock is `known_or_probed`.
impl Client {
    /// The store for messages: `s3://bucket at http://127.0.0.1:9000`.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The object_store client.
    pub(crate) fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// A store in this process's memory: no network to guard, no request held up on the
    /// way, no load shared with other processes; its writes and deletes are conditional
    /// by construction.
    pub(crate) fn in_memory(&self) -> bool {
        self.cloud.is_none()
    }

    /// What the store can take from this process, and who goes first; none in memory.
    pub(crate) fn load(&self) -> Option<&Arc<super::load::Load>> {
        self.cloud.map(|_| &self.load)
    }

    /// What signs its requests.
    pub(crate) fn signing(&self) -> &Signing {
        &self.signing
    }

    /// What sends its conditional deletes (none in memory).
    pub(crate) fn deleter(&self) -> Option<&super::conditional_delete::Deleter> {
        self.deleter.as_ref()
    }

    /// What the process learnt about the store.
    pub(crate) fn facts(&self) -> &Facts {
        &self.facts
    }

    /// Whether the storage options trust the store's conditional writes without a probe.
    pub(crate) fn trusted(&self) -> bool {
        self.trust
    }

    /// A fact about the store as the process knows it (`known`), or else learnt now by
    /// `probe` and kept (`keep`) for every later caller. One probe of a store at a time: a
    /// caller that waited for another's probe takes its answer instead of probing again.
    pub(crate) async fn known_or_probed<T, E>(
        &self,
        known: impl Fn(&Facts) -> Option<T>,
        probe: impl std::future::Future<Output = std::result::Result<T, E>>,
        keep: impl FnOnce(&Facts, &T),
    ) -> std::result::Result<T, E> {
        if let Some(k) = known(&self.facts) {
            return Ok(k);
        }
        let _one = self.probing.lock().await;
        if let Some(k) = known(&self.facts) {
            return Ok(k); // probed by another caller meanwhile
        }
        let learnt = probe.await?;
        keep(&self.facts, &learnt);
        Ok(learnt)
    }
}

impl Client {
    fn new(
        store: Arc<dyn ObjectStore>,
        name: String,
        cloud: Option<Cloud>,
        trust: bool,
        facts: Arc<Facts>,
    ) -> Client {
        Client {
            load: Arc::new(super::load::Load::new(name.clone())),
            store,
            name,
            cloud,
            trust,
            signing: Signing::Unsigned,
            deleter: None,
            facts,
            probing: tokio::sync::Mutex::new(()),
        }
    }

    fn cloud(built: super::cloud::Built, cloud: Cloud, trust: bool, facts: Arc<Facts>) -> Client {
        let mut client = Client::new(built.store, built.name, Some(cloud), trust, facts);
        client.signing = built.signing;
        client.deleter = Some(built.deleter);
        client
    }

    /// A memory store's client: it answers, and its writes are conditional.
    pub(crate) fn memory(name: &str, store: Arc<dyn ObjectStore>) -> Client {
        let facts = Facts::default();
        facts.mark_answered();
        Client::new(
            store,
            format!("memory://{name}"),
            None,
            true,
            Arc::new(facts),
        )
    }
}

/// The client of the cloud store `scheme://authority` with `options`: this process's
/// shared one, built on first use.
pub(crate) fn client(
    cloud: Cloud,
    scheme: &str,
    authority: &str,
    options: &Options,
) -> Result<Arc<Client>> {
    let key = registry_key(scheme, authority, options);
    get_or_build(&key, |facts| {
        let built = build(cloud, scheme, authority, options)?;
        let facts = facts.unwrap_or_default();
        Ok(Client::cloud(built, cloud, options.trust, facts))
    })
}

/// A client of its own, shared with nothing (`doctor --race` races independent clients).
pub(crate) fn private_client(
    cloud: Cloud,
    scheme: &str,
    authority: &str,
    options: &Options,
) -> Result<Client> {
    let built = build(cloud, scheme, authority, options)?;
    Ok(Client::cloud(
        built,
        cloud,
        options.trust,
        Default::default(),
    ))
}

fn registry_key(scheme: &str, authority: &str, options: &Options) -> String {
    let credentials = options.credentials.as_ref().map_or(0, Credentials::id);
    let mut key = format!(
        "{scheme}://{authority}\n{}\n{credentials:x}\n",
        options.trust
    );
    for (k, v) in &options.store {
        key.push_str(k);
        key.push('=');
        key.push_str(v);
        key.push('\n');
    }
    // A change of the environment makes a new client, as building one then would see it.
    key.push_str(&format!("{:x}", options.environment.digest()));
    key
}

type Clients = Mutex<HashMap<String, Arc<Client>>>;

/// The process's clients by key. A child made by fork builds its own (the parent's
/// connections belong to the parent's runtime, see [`PerProcess`]), looking in its parent's
/// map, when it can, only for what the parent learnt about each store.
static REGISTRY: PerProcess<Clients> = PerProcess::new(Default::default);

/// Clients kept beyond this many are dropped once no lock uses them.
const KEEP: usize = 256;

fn get_or_build(
    key: &str,
    build: impl FnOnce(Option<Arc<Facts>>) -> Result<Client>,
) -> Result<Arc<Client>> {
    let (mine, parents) = REGISTRY.with_parent();
    let lock = || mine.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = lock().get(key) {
        return Ok(c.clone());
    }
    // A thread of the parent may have held its map at the fork: then nothing is inherited.
    let inherited = parents.and_then(|p| match p.try_lock() {
        Ok(map) => map.get(key).map(|c| c.facts.clone()),
        Err(TryLockError::Poisoned(e)) => e.into_inner().get(key).map(|c| c.facts.clone()),
        Err(TryLockError::WouldBlock) => None,
    });
    // Built outside the lock: it takes milliseconds.
    let fresh = Arc::new(build(inherited)?);
    let mut clients = lock();
    if let Some(c) = clients.get(key) {
        return Ok(c.clone()); // another thread built it meanwhile
    }
    if clients.len() >= KEEP {
        clients.retain(|_, c| Arc::strong_count(c) > 1);
    }
    clients.insert(key.to_string(), fresh.clone());
    Ok(fresh)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[cfg(feature = "cloud")]
    #[test]
    fn one_client_per_store_and_configuration() {
        use crate::store::storage_options::tests::options;
        let o = options(&[
            ("aws_region", "us-east-1"),
            ("aws_endpoint", "http://127.0.0.1:9"),
        ]);
        let a = client(Cloud::S3, "s3", "registry-one", &o).unwrap();
        let b = client(Cloud::S3, "s3", "registry-one", &o).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "the same store shares a client");
        let other = client(Cloud::S3, "s3", "registry-two", &o).unwrap();
        assert!(!Arc::ptr_eq(&a, &other), "another bucket has its own");
        let p = options(&[
            ("aws_region", "us-west-2"),
            ("aws_endpoint", "http://127.0.0.1:9"),
        ]);
        let c = client(Cloud::S3, "s3", "registry-one", &p).unwrap();
        assert!(!Arc::ptr_eq(&a, &c), "other options make another client");
        assert_eq!(a.name, "s3://registry-one at http://127.0.0.1:9");
    }

    /// Locks that meet an unprobed store at once probe it once; a probe that failed is not
    /// kept, so the next caller probes again.
    #[tokio::test]
    async fn callers_at_once_share_one_probe_and_a_failed_one_is_not_kept() {
        use std::sync::atomic::AtomicUsize;
        let client = Client::memory(
            "probed-once",
            Arc::new(object_store::memory::InMemory::new()),
        );
        let probes = AtomicUsize::new(0);
        let known = |facts: &Facts| facts.conditional_deletes();
        let keep = |facts: &Facts, honoured: &bool| facts.set_conditional_deletes(*honoured);
        let failing = async {
            probes.fetch_add(1, Ordering::SeqCst);
            Err::<bool, &str>("reset")
        };
        assert_eq!(
            client.known_or_probed(known, failing, keep).await,
            Err("reset")
        );
        let probe = || async {
            probes.fetch_add(1, Ordering::SeqCst);
            tokio::task::yield_now().await; // the other caller reaches the probe lock meanwhile
            Ok::<_, &str>(true)
        };
        let (a, b) = tokio::join!(
            client.known_or_probed(known, probe(), keep),
            client.known_or_probed(known, probe(), keep)
        );
        assert_eq!((a, b), (Ok(true), Ok(true)));
        assert_eq!(
            probes.load(Ordering::SeqCst),
            2,
            "the failed probe and one more"
        );
        assert_eq!(client.facts().conditional_deletes(), Some(true));
    }
}
