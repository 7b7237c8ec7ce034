//! A lock URI with its owner id: acquisition (waiting, attempts, the cleanup an
//! interrupted one owes, `owed_release.rs`), inspection and release without a lease.

use super::owed_release::Cleanup;
use super::retry::with_retries;
use super::wait::{arm, Wait};
use super::{new_owner_id, waker, Lease, LockOptions, LossHook};
use crate::errors::{Error, Result};
use crate::inspect::{self, Inspection};
use crate::lease::lifecycle::{Lifecycle, State};
use crate::lockfile::LockFile;
use crate::metrics;
use crate::owed::Owed;
use crate::protocol::released::Receipt;
use crate::protocol::watched::Watched;
use crate::protocol::Protocol;
use crate::protocol::{Acquisition, Attempt, Broken, Engine, Left, OurWrite, ReleaseStatus};
use crate::store::load::{as_kind, Kind};
use crate::store::Access;
use crate::store::{self, LockStore};
use crate::timing::Timing;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

mod acquire;
mod best_effort;

pub(crate) use acquire::Tried;
pub use acquire::WAIT_ON_OWN_OWNER;
pub use best_effort::Unanswered;

/// One lock URI, with one owner id for every acquisition through it.
#[derive(Debug, Clone)]
pub struct Lock {
    /// The engine the options made, with `cas` in place of auto (the store decides);
    /// shared with the leases taken under it (thousands of held locks).
    engine: Arc<Engine>,
    /// The engine with the protocol the store decided on, once it has ([`Lock::resolved`]):
    /// `engine` itself where that is its protocol. Kept by [`Lock::another`].
    decided: OnceLock<Arc<Engine>>,
    /// The protocol asked for; `None` lets the store decide.
    requested: Option<Protocol>,
    /// Shared with the lifecycles and leases of this lock (no copy each).
    owner: Arc<str>,
    uri: Arc<str>,
    on_lost: Option<LossHook>,
    /// Kept to open the store again ([`Lock::reopened`]).
    store: Arc<Access>,
    /// Releases owed by interrupted acquisitions; the next acquisition waits for them
    /// (see [`Lock::owe_cleanup`]).
    cleanups: Arc<Owed>,
    /// What the last acquisition through this lock left when it ended without the lock (a
    /// timeout: a caller waiting in slices, as `claim_memo` does, comes back at once; a
    /// semaphore's poll of a slot): its writes of unknown outcome and its watch; the next
    /// one starts from them ([`Acquisition::carrying`]).
    left: Arc<std::sync::Mutex<Left>>,
}

impl Lock {
    /// Opens the lock at `uri`. Checks the URI and options; makes no request.
    pub fn new(uri: &str, options: &LockOptions) -> Result<Lock> {
        let store = store::open(uri, &options.store, &options.timing)?;
        // One copy of the identity for the process-wide tables and the waker (thousands of locks).
        let identity = store.identity();
        let mut lock = Lock::with_store(uri, store, options);
        let engine = Arc::make_mut(&mut lock.engine);
        engine.wake = Some(identity.clone());
        engine.last_release = Receipt::Process(identity.clone());
        // What is watched is timed by the system clock: not for a lock on a clock of its own.
        if options.clock.is_tokio() {
            engine.watched = Watched::Process(identity);
        }
        if !options.store.is_empty() {
            lock.store = Arc::new(options.store.clone());
        }
        Ok(lock)
    }

    /// The same lock as a child made by fork needs it: the same URI and options, a store
    /// client of its own (opened again from the URI), a fresh owner id.
    pub fn reopened(&self) -> Result<Lock> {
        Lock::new(
            &self.uri,
            &LockOptions {
                protocol: self.requested,
                timing: *self.engine.timing,
                store: (*self.store).clone(),
                clock: self.engine.clock.clone(),
                on_lost: self.on_lost.clone(),
                labels: self.engine.labels.clone(),
            },
        )
    }

    /// The lock on a given store (tests and simulations bring their own).
    pub fn with_store(uri: &str, store: Arc<dyn LockStore>, options: &LockOptions) -> Lock {
        Lock {
            engine: Arc::new(options.engine(store)),
            decided: OnceLock::new(),
            requested: options.protocol,
            owner: new_owner_id().into(),
            uri: uri.into(),
            on_lost: options.on_lost.clone(),
            store: no_options(),
            cleanups: Default::default(),
            left: Default::default(),
        }
    }

    /// Another lock on this URI with these options, with an owner id of its own: it shares
    /// this one's engine and store, which a fresh lock object for every `with` would
    /// otherwise parse and open again.
    pub fn another(&self) -> Lock {
        Lock {
            owner: new_owner_id().into(),
            cleanups: Default::default(),
            left: Default::default(),
            ..self.clone()
        }
    }

    /// The same lock with a given owner id (a restarted process that kept its id; tests).
    pub fn with_owner(mut self, owner: impl Into<String>) -> Lock {
        self.owner = owner.into().into();
        self
    }

    /// The same lock keeping what it sees of its lockfile in `watched` (see
    /// [`crate::protocol::watched`]): for stores brought by tests and simulations, whose locks keep
    /// no process-wide table.
    pub fn with_watched(mut self, watched: Watched) -> Lock {
        self.decided = OnceLock::new(); // decided on the engine as it was
        Arc::make_mut(&mut self.engine).watched = watched;
        self
    }

    /// The same lock keeping the receipt of its releases and its guesses in `receipt` (see
    /// [`crate::protocol::released`]): simulated processes, which share one real process, each bring
    /// their own, shared by all their locks as the process-wide one is.
    pub fn with_receipt(mut self, receipt: Receipt) -> Lock {
        self.decided = OnceLock::new(); // decided on the engine as it was
        Arc::make_mut(&mut self.engine).last_release = receipt;
        self
    }

    /// The same lock picking its tokens by `fence` (prune's own acquisition counts them).
    pub(crate) fn with_fence(mut self, fence: crate::protocol::Fence) -> Lock {
        self.decided = OnceLock::new(); // decided on the engine as it was
        Arc::make_mut(&mut self.engine).fence = fence;
        self
    }

    /// The owner id this lock writes: hand it to the remote.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The lock URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The protocol in use: the one asked for, or, for auto, the one the store decided on;
    /// `None` while the store has not been probed yet (its first write will).
    pub fn protocol(&self) -> Option<Protocol> {
        Protocol::known_for(self.engine.store.as_ref(), self.requested)
    }

    /// What wakes this process's waiters on this lockfile when a lock here releases it:
    /// `None` for a lock on a store a test brought.
    pub(crate) fn waker(&self) -> Option<Arc<tokio::sync::Notify>> {
        self.engine.wake.as_ref().map(waker)
    }

    /// The store of its lockfile.
    pub(crate) fn store(&self) -> &Arc<dyn LockStore> {
        &self.engine.store
    }

    /// The labels its acquisitions write.
    pub fn labels(&self) -> Option<&crate::lockfile::Labels> {
        self.engine.labels.as_ref()
    }

    /// The clock it judges time by.
    pub fn clock(&self) -> &Arc<dyn crate::clock::Clock> {
        &self.engine.clock
    }

    /// The timing in use.
    pub fn timing(&self) -> &Timing {
        &self.engine.timing
    }

    /// The engine with the protocol the store allows for this lock. Until the store has
    /// decided, each call asks it ([`Protocol::for_store`]: the first on a store over HTTP
    /// probes it, once per process; `cas` on a store found unsafe fails each time); once it
    /// has, the engine is kept, and later calls ask nothing.
    async fn resolved(&self) -> Result<Arc<Engine>> {
        if let Some(engine) = self.decided.get() {
            return Ok(engine.clone());
        }
        let protocol = Protocol::for_store(self.engine.store.as_ref(), self.requested).await?;
        Ok(self
            .decided
            .get_or_init(|| self.with_protocol(protocol))
            .clone())
    }

    /// The engine with `protocol`: this lock's own (no copy) where it has that protocol.
    fn with_protocol(&self, protocol: Protocol) -> Arc<Engine> {
        if protocol == self.engine.protocol {
            return self.engine.clone();
        }
        Arc::new(self.engine.with_protocol(protocol))
    }

    /// The engine for reads, without a request: the protocol if known, else lww, whose
    /// reads take an unreadable lockfile for a write in flight and read again for a while
    /// (under cas it is corrupt at once).
    fn reader(&self) -> Arc<Engine> {
        match self.decided.get() {
            Some(engine) => engine.clone(),
            None => self.with_protocol(self.protocol().unwrap_or(Protocol::Lww)),
        }
    }

    /// A release this lock owes, counted from now: the next acquisition through this lock
    /// (which has the same owner id, so the release could take it for its own) waits until
    /// the returned cleanup has run. Dropped unused, it releases whatever the lockfile shows
    /// for this lock's owner, as [`Lock::release_in_background`].
    pub fn owe_cleanup(&self) -> Cleanup {
        Cleanup {
            lock: self.clone(),
            debt: Some(self.cleanups.owe()),
        }
    }

    /// An acquisition through this lock, starting from what the last one left: its watch
    /// only if it ended within two of the longest polls (a wait in slices, a semaphore's
    /// polls), so that a read that lags far behind is not taken for a long watch.
    fn acquisition(&self) -> Acquisition {
        let left = std::mem::take(&mut *self.left.lock().unwrap_or_else(|e| e.into_inner()));
        let t = &self.engine.timing;
        Acquisition::carrying(left, self.engine.clock.now(), t.poll_max * 2)
    }

    /// Keeps what `acquisition`, which ended without the lock, left.
    fn leave(&self, acquisition: Acquisition) {
        let left = acquisition.left(self.engine.clock.now());
        *self.left.lock().unwrap_or_else(|e| e.into_inner()) = left;
    }

    /// A lease of this lock whose release failed: its lockfile may still show it, our own
    /// write, which the next acquisition through this lock then resolves as its own (a
    /// conditional renewal confirms it) rather than waiting it out as another holder's.
    pub(crate) async fn leave_unreleased(&self, lease: &Lease) {
        let written = lease.written().await;
        (self.left.lock().unwrap_or_else(|e| e.into_inner())).add_write(written);
    }

    /// After an acquisition of this lock was interrupted (a signal, a cancelled task) or
    /// abandoned at its timeout: releases, in the background, whatever it may have written.
    pub fn release_in_background(&self) {
        drop(self.owe_cleanup());
    }

    /// After a transient failure that ends an acquisition: a write of ours whose outcome is
    /// unknown may have landed. (After a permanent one, a release would fail as well.)
    fn release_if_written(&self, acquisition: &Acquisition) {
        if acquisition.wrote() {
            self.release_in_background();
        }
    }

    /// Releases whatever acquisition the lockfile shows for this lock's owner, without a
    /// lease in hand. Refuses (and writes nothing) when another owner holds it.
    pub async fn release_unheld(&self) -> Result<ReleaseStatus> {
        let until = self.engine.clock.now() + self.engine.timing.heartbeat;
        let released = with_retries(&self.engine, super::retry::RELEASE, until, || async {
            let engine = self.resolved().await?;
            engine.release_seeing(&self.owner, None).await
        });
        let kind = Kind::Release { deadline: None };
        Ok(as_kind(kind, released).await.0?.status)
    }

    /// Reads the lockfile once and says what it shows; never writes.
    pub async fn inspect(&self) -> Result<Inspection> {
        inspect::inspect(&self.reader()).await
    }

    /// Waits until the lock is free to take, or `timeout` passes; takes nothing.
    pub async fn wait_free(&self, timeout: Option<Duration>) -> Result<Inspection> {
        inspect::wait_free(&self.reader(), timeout).await
    }

    /// Marks the lock released whoever holds it (only the acquisition `expect` names, if
    /// given). See [`Engine::break_lock`].
    pub async fn break_lock(&self, expect: Option<(&str, u64)>) -> Result<Broken> {
        self.resolved().await?.break_lock(expect).await
    }
}

/// The options of a lock given none, shared: an empty map in an `Arc` of its own would be
/// an allocation for every such lock.
fn no_options() -> Arc<Access> {
    static NONE: std::sync::OnceLock<Arc<Access>> = std::sync::OnceLock::new();
    NONE.get_or_init(Default::default).clone()
}
