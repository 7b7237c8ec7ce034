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
use super::uri::Cloud;
use crate::errors::{Error, Result};
use crate::per_process::PerProcess;
use object_store::ObjectStore;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

/// At most this many requests in flight per store: a connection each, so that thousands of
/// locks heartbeating at once stay under a process's file-descriptor limit.
pub const MAX_IN_FLIGHT: usize = 64;

/// Of those, this many are kept for renewals: a burst of acquisitions or releases (thousands
/// of locks taken or given back at once) queues behind its own share and never delays the
/// renewals that keep the held locks alive.
pub const FOR_RENEWALS: usize = 16;

/// The storage option that says whether to probe the store's conditional writes
/// (`verify`, the default) or to trust them without a probe (`trust`).
pub const CONDITIONAL_WRITES: &str = "blob_lock_conditional_writes";

/// One store's client, shared by everything on that store in this process.
pub struct Client {
    /// The object_store client.
    pub(crate) store: Arc<dyn ObjectStore>,
    /// The store for messages: `s3://bucket at http://127.0.0.1:9000`.
    pub(crate) name: String,
    /// Which cloud; `None` for memory stores, whose writes are conditional by construction.
    pub(crate) cloud: Option<Cloud>,
    /// The storage options asked to trust conditional writes without probing them.
    pub(crate) trust: bool,
    /// Credentials from outside object_store's chain, made ready before each request.
    pub(crate) credentials: Option<Credentials>,
    /// What the process learnt about the store; a fork child keeps it.
    pub(crate) facts: Arc<Facts>,
    /// Bounds the requests in flight ([`MAX_IN_FLIGHT`]).
    pub(crate) slots: tokio::sync::Semaphore,
    /// Bounds the requests in flight that are not renewals ([`FOR_RENEWALS`]).
    pub(crate) bulk: tokio::sync::Semaphore,
    /// One probe of the store at a time.
    pub(crate) probing: tokio::sync::Mutex<()>,
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
    /// Connections dropped before any answer (accepted, then reset or closed).
    dropped_unanswered: AtomicU8,
    verdict: AtomicU8,
    warned: AtomicBool,
}

/// How many connections a store that has never answered may drop before it counts as
/// unreachable: a flaky path retries, an endpoint that never speaks HTTP still fails fast.
const DROPS_BEFORE_ANSWERING: u8 = 3;

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

    /// Counts one connection dropped before the store ever answered; true while such drops
    /// are still retried ([`DROPS_BEFORE_ANSWERING`]).
    pub(crate) fn forgive_drop(&self) -> bool {
        let dropped = self.dropped_unanswered.fetch_add(1, Ordering::Relaxed);
        if dropped >= DROPS_BEFORE_ANSWERING {
            self.dropped_unanswered
                .store(DROPS_BEFORE_ANSWERING, Ordering::Relaxed); // no wrap-around
            return false;
        }
        true
    }

    /// The probe's verdict as stored (0: none yet).
    pub(crate) fn verdict_code(&self) -> u8 {
        self.verdict.load(Ordering::Acquire)
    }

    pub(crate) fn set_verdict_code(&self, code: u8) {
        self.verdict.store(code, Ordering::Release);
    }

    /// True the first time only: one warning per store.
    pub(crate) fn first_warning(&self) -> bool {
        !self.warned.swap(true, Ordering::Relaxed)
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
            store,
            name,
            cloud,
            trust,
            credentials: None,
            facts,
            slots: tokio::sync::Semaphore::new(MAX_IN_FLIGHT),
            bulk: tokio::sync::Semaphore::new(MAX_IN_FLIGHT - FOR_RENEWALS),
            probing: tokio::sync::Mutex::new(()),
        }
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

/// The storage options split into ours (`blob_lock_*`) and object_store's. Ours may be
/// given for every store.
pub(crate) struct Options {
    /// `blob_lock_conditional_writes=trust`.
    pub(crate) trust: bool,
    /// object_store's configuration keys, lower-cased, sorted.
    pub(crate) store: Vec<(String, String)>,
    /// Credentials from outside object_store's chain.
    pub(crate) credentials: Option<Credentials>,
}

impl Options {
    pub(crate) fn split(access: &super::Access) -> Result<Options> {
        let mut out = Options {
            trust: false,
            store: Vec::new(),
            credentials: access.credentials.clone(),
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
        let (store, name) = build(
            cloud,
            scheme,
            authority,
            &options.store,
            options.credentials.as_ref(),
        )?;
        let facts = facts.unwrap_or_default();
        let mut client = Client::new(store, name, Some(cloud), options.trust, facts);
        client.credentials = options.credentials.clone();
        Ok(client)
    })
}

/// A client of its own, shared with nothing (`doctor --race` races independent clients).
pub(crate) fn private_client(
    cloud: Cloud,
    scheme: &str,
    authority: &str,
    options: &Options,
) -> Result<Client> {
    let (store, name) = build(
        cloud,
        scheme,
        authority,
        &options.store,
        options.credentials.as_ref(),
    )?;
    let mut client = Client::new(store, name, Some(cloud), options.trust, Default::default());
    client.credentials = options.credentials.clone();
    Ok(client)
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
    key.push_str(&format!("{:x}", environment_fingerprint()));
    key
}

/// A digest of the environment variables that object_store's builders and its HTTP client
/// read: a change makes a new client, as building one then would see it.
fn environment_fingerprint() -> u64 {
    const PREFIXES: [&str; 6] = [
        "AWS_",
        "AZURE_",
        "AZURITE_",
        "GOOGLE_",
        "SSL_CERT_",
        "SERVICE_ACCOUNT",
    ];
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for (k, v) in std::env::vars_os() {
        let Some(name) = k.to_str() else { continue };
        let proxy = name.to_ascii_uppercase().ends_with("_PROXY");
        if proxy || PREFIXES.iter().any(|p| name.starts_with(p)) {
            k.hash(&mut h);
            v.hash(&mut h);
        }
    }
    h.finish()
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

    /// Storage options from pairs (for tests here and in `cloud`).
    pub(crate) fn options(pairs: &[(&str, &str)]) -> Options {
        let map = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Options::split(&super::super::Access::options(map)).unwrap()
    }

    #[test]
    fn one_client_per_store_and_configuration() {
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

    #[test]
    fn our_own_option_is_checked() {
        let map: HashMap<String, String> =
            [(CONDITIONAL_WRITES.to_string(), "yes".to_string())].into();
        let e = Options::split(&map.into()).err().unwrap().to_string();
        assert!(e.contains("\"trust\""), "{e}");
    }
}
