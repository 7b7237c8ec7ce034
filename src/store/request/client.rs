//! A store's client: object_store's client of the store, shared by every lock, keep-alive,
//! inspection and probe on that store in this process (its connection pool too), with what
//! the process has learnt about the store (whether it ever answered, whether it honours
//! conditional writes: [`super::super::probe`]), its [`Load`](crate::store::load::Load), and what
//! its cloud adds to object_store's client (`CloudParts`). Cloud clients are built and
//! kept once per store by `store/cloud/`; memory stores by `store/open.rs`.

use crate::store::config::Cloud;
use crate::store::lock_store::Version;
use async_trait::async_trait;
use object_store::path::Path;
use object_store::ObjectStore;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a cloud's client adds to object_store's, as a request meets it: credentials made
/// ready before it leaves, where they come from, a failed fetch of them told apart from the
/// store's answers, and `prune`'s conditional delete. Memory stores have none.
#[async_trait]
pub(crate) trait CloudParts: Send + Sync {
    /// Where the credentials come from, in words (never a secret).
    fn credentials_source(&self) -> String;
    /// Makes sure a credential is in hand; the error says what was looked at, what failed
    /// and what to do.
    async fn ready(&self) -> Result<(), String>;
    /// The message of a failed credential fetch inside `e`, if that is what failed.
    fn credentials_failure(&self, e: &object_store::Error) -> Option<String>;
    /// Deletes `path` if it is still at `expected`.
    async fn delete_if(
        &self,
        path: &Path,
        expected: &Version,
        valid_for: Duration,
    ) -> object_store::Result<Deleted>;
}

/// What a conditional delete did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "cloud"), allow(dead_code))] // made by the cloud clients only
pub(crate) enum Deleted {
    /// The object was at the version given, and is gone.
    Yes,
    /// The object was not at the version given (or was gone already): nothing was deleted.
    Changed,
}

/// A cloud client as its cloud built it.
#[cfg_attr(not(feature = "cloud"), allow(dead_code))] // made by the cloud clients only
pub(crate) struct Built {
    pub(crate) store: Arc<dyn ObjectStore>,
    /// The store, for messages.
    pub(crate) name: String,
    pub(crate) parts: Box<dyn CloudParts>,
}

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
    /// What its cloud adds to object_store's client (none for memory stores).
    parts: Option<Box<dyn CloudParts>>,
    /// What the process learnt about the store; a fork child keeps it.
    facts: Arc<Facts>,
    /// What the store can take from this process, and who goes first ([`crate::store::load`]).
    load: Arc<crate::store::load::Load>,
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
    pub(crate) fn load(&self) -> Option<&Arc<crate::store::load::Load>> {
        self.cloud.map(|_| &self.load)
    }

    /// What its cloud adds to object_store's client (none in memory).
    pub(crate) fn parts(&self) -> Option<&dyn CloudParts> {
        self.parts.as_deref()
    }

    /// Where its credentials come from, in words.
    pub(crate) fn credentials_source(&self) -> String {
        match &self.parts {
            Some(parts) => parts.credentials_source(),
            None => "nowhere: requests are not signed".to_string(),
        }
    }

    /// What the process learnt about the store.
    pub(crate) fn facts(&self) -> &Facts {
        &self.facts
    }

    /// The same, to hand to a client built anew for the store (a child made by fork).
    #[cfg_attr(not(feature = "cloud"), allow(dead_code))] // made by the cloud clients only
    pub(crate) fn shared_facts(&self) -> Arc<Facts> {
        self.facts.clone()
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
            load: Arc::new(crate::store::load::Load::new(name.clone())),
            store,
            name,
            cloud,
            trust,
            parts: None,
            facts,
            probing: tokio::sync::Mutex::new(()),
        }
    }

    /// A cloud store's client, as its cloud built it.
    #[cfg_attr(not(feature = "cloud"), allow(dead_code))] // made by the cloud clients only
    pub(crate) fn cloud(built: Built, cloud: Cloud, trust: bool, facts: Arc<Facts>) -> Client {
        let mut client = Client::new(built.store, built.name, Some(cloud), trust, facts);
        client.parts = Some(built.parts);
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

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
