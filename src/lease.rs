//! A lock and the leases taken on it: the waiting loop around acquisition attempts, the
//! background heartbeat that renews a held lease, and release. Used by orchestrators
//! ([`Lock::acquire`]) and by remotes ([`keep_alive`]), which renew the same lease as co-owners.

use crate::claim::{Claim, State};
use crate::cleanup::{Debt, Owed};
use crate::clock::{self, Clock};
use crate::errors::{Error, Result};
use crate::inspect::{self, Broken, Inspection};
use crate::lockfile::{LockFile, Protocol};
use crate::per_process::PerProcess;
use crate::protocol::{Attempt, Engine, Held, Pursuit, ReleaseStatus};
use crate::released::Record;
use crate::store::{self, LockStore};
use crate::timing::{Polls, Timing};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How a lock is configured.
#[derive(Debug, Clone)]
pub struct LockOptions {
    /// The protocol; `None` (auto) lets the store decide: `cas` where it honours
    /// conditional writes, `lww` where it does not ([`crate::store::probe`]).
    pub protocol: Option<Protocol>,
    /// Timing.
    pub timing: Timing,
    /// object_store configuration keys on top of the environment.
    pub storage_options: HashMap<String, String>,
    /// The clocks; the system's unless a simulation brings its own.
    pub clock: Arc<dyn Clock>,
    /// Called once when a lease of this lock is lost.
    pub on_lost: Option<LossHook>,
}

/// A function called once when a held lease is lost, with the `Error::Lost` that says why.
/// It runs on the runtime's thread that noticed the loss: hand slow work elsewhere.
#[derive(Clone)]
pub struct LossHook(pub Arc<dyn Fn(&Error) + Send + Sync>);

impl std::fmt::Debug for LossHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LossHook")
    }
}

impl LockOptions {
    /// Defaults for `expire` seconds.
    pub fn new(expire: f64) -> Result<Self> {
        Ok(LockOptions {
            protocol: None,
            timing: Timing::with_expire(expire)?,
            storage_options: HashMap::new(),
            clock: clock::system(),
            on_lost: None,
        })
    }
}

/// The waker of the lock whose lockfile is `identity` ([`LockStore::identity`]), shared by
/// every lock on it in this process. Held weakly here, so that locks on URIs no longer in
/// use leave nothing.
fn waker(identity: &str) -> Arc<Notify> {
    type Wakers = Mutex<HashMap<String, std::sync::Weak<Notify>>>;
    static WAKERS: PerProcess<Wakers> = PerProcess::new(Default::default);
    let mut wakers = WAKERS.get().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(w) = wakers.get(identity).and_then(std::sync::Weak::upgrade) {
        return w;
    }
    if wakers.len() >= 1024 && wakers.len().is_power_of_two() {
        wakers.retain(|_, w| w.strong_count() > 0);
    }
    let w = Arc::new(Notify::new());
    wakers.insert(identity.to_string(), Arc::downgrade(&w));
    w
}

/// Makes a fresh owner id: random, unguessable, without `/`.
pub fn new_owner_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// A release owed by an interrupted acquisition ([`Lock::owe_cleanup`]): run in the
/// background by [`Cleanup::give_back`] or [`Cleanup::release_unheld`], or when dropped.
#[derive(Debug)]
pub struct Cleanup {
    lock: Lock,
    debt: Option<Debt>,
}

impl Cleanup {
    /// Releases `lease` (an acquisition that ended after nobody waited for it any more).
    pub fn give_back(mut self, lease: Arc<Lease>) {
        let (uri, debt) = (self.lock.uri.clone(), self.debt.take());
        crate::cleanup::spawn(async move {
            if let Err(e) = lease.release().await {
                log::warn!("{uri}: release after a cancelled acquisition failed: {e}");
            }
            drop(debt);
        });
    }

    /// Releases whatever the lockfile shows for this lock's owner.
    pub fn release_unheld(self) {
        drop(self);
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Some(debt) = self.debt.take() else { return };
        let lock = self.lock.clone();
        crate::cleanup::spawn(async move {
            lock.engine.store.quiesced().await;
            if let Err(e) = lock.release_unheld().await {
                log::warn!(
                    "{}: release after an interrupted acquisition failed: {e}",
                    lock.uri
                );
            }
            drop(debt);
        });
    }
}

/// One lock URI, with one owner id for every acquisition through it.
#[derive(Debug, Clone)]
pub struct Lock {
    /// The engine, with `cas` in place of auto until the store has decided.
    engine: Engine,
    /// The protocol asked for; `None` lets the store decide.
    requested: Option<Protocol>,
    owner: String,
    uri: String,
    on_lost: Option<LossHook>,
    /// Kept to open the store again ([`Lock::reopened`]).
    storage_options: Arc<HashMap<String, String>>,
    /// Releases owed by interrupted acquisitions; the next acquisition waits for them
    /// (see [`Lock::owe_cleanup`]).
    cleanups: Arc<Owed>,
}

impl Lock {
    /// Opens the lock at `uri`. Checks the URI and options; makes no request.
    pub fn new(uri: &str, options: &LockOptions) -> Result<Lock> {
        let store = store::open(uri, &options.storage_options, &options.timing)?;
        let identity = store.identity();
        let mut lock = Lock::with_store(uri, store, options);
        lock.engine.wake = Some(waker(&identity));
        lock.engine.hint = Record::Process(identity.into());
        lock.storage_options = Arc::new(options.storage_options.clone());
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
                storage_options: (*self.storage_options).clone(),
                clock: self.engine.clock.clone(),
                on_lost: self.on_lost.clone(),
            },
        )
    }

    /// The lock on a given store (tests and simulations bring their own).
    pub fn with_store(uri: &str, store: Arc<dyn LockStore>, options: &LockOptions) -> Lock {
        Lock {
            engine: Engine {
                store,
                protocol: options.protocol.unwrap_or(Protocol::Cas),
                timing: Arc::new(options.timing),
                clock: options.clock.clone(),
                hint: Default::default(),
                wake: None,
            },
            requested: options.protocol,
            owner: new_owner_id(),
            uri: uri.to_string(),
            on_lost: options.on_lost.clone(),
            storage_options: Default::default(),
            cleanups: Default::default(),
        }
    }

    /// The same lock with a given owner id (a restarted process that kept its id; tests).
    pub fn with_owner(mut self, owner: impl Into<String>) -> Lock {
        self.owner = owner.into();
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
        self.engine.store.known_protocol(self.requested)
    }

    /// The timing in use.
    pub fn timing(&self) -> &Timing {
        &self.engine.timing
    }

    /// The engine with the protocol the store allows for this lock; the first call on a
    /// store over HTTP probes it (once per process), later ones only look.
    async fn resolved(&self) -> Result<Engine> {
        let protocol = self.engine.store.protocol_for(self.requested).await?;
        Ok(self.engine.with_protocol(protocol))
    }

    /// The engine for reads, without a request: the protocol if known, else lww, whose
    /// reads take an unreadable lockfile for a write in flight and read again for a while
    /// (under cas it is corrupt at once).
    fn reader(&self) -> Engine {
        self.engine
            .with_protocol(self.protocol().unwrap_or(Protocol::Lww))
    }

    /// Waits until the lock is ours, or `timeout` passes (`Error::Timeout`); `None` waits
    /// for ever. Transient store errors are retried within the timeout; permanent ones end
    /// the wait at once, and a wait in which the store never answered ends with its error.
    /// An attempt still running at the timeout is given one request timeout more, then
    /// abandoned (whatever it wrote is released in the background). The heartbeat runs on
    /// the current tokio runtime: at once, or, on the shared runtime
    /// ([`crate::runtime::on_shared_runtime`]), from its first renewal.
    pub async fn acquire(&self, timeout: Option<Duration>) -> Result<Lease> {
        let clock = &self.engine.clock;
        let began = clock.now();
        let deadline = timeout.map(|t| began + t);
        let mut pursuit = Pursuit::default();
        let timing = &self.engine.timing;
        let mut polls = Polls::new(timing);
        let mut logged_holder = String::new();
        let claim = Arc::new(Claim::new(&self.uri, &self.owner));
        let wake = self.engine.wake.clone();
        let timed_out = |claim: &Claim, holder: &str| {
            let timeout = Error::Timeout {
                uri: self.uri.clone(),
                waited: clock.now() - began,
                holder: holder.to_string(),
            };
            claim.enter(State::Failed, &timeout);
            timeout
        };
        // A cutoff one request timeout after the deadline bounds every wait below.
        let cutoff = deadline.map(|d| d + timing.request_timeout());
        let cleaned = self.cleanups.settled();
        match cutoff {
            None => cleaned.await,
            Some(cutoff) => tokio::select! {
                biased;
                () = cleaned => {}
                _ = clock.sleep_until(cutoff) => {
                    return Err(timed_out(&claim, "ourselves (what an interrupted acquisition wrote is still being released)"));
                }
            },
        }
        loop {
            // Listening before the attempt: a release between our read and our sleep wakes us.
            let mut woken = wake.as_ref().map(|w| Box::pin(w.notified()));
            if let Some(w) = woken.as_mut() {
                w.as_mut().enable();
            }
            claim.enter(State::Acquiring, "attempt");
            let attempt = self.attempt(&mut pursuit);
            let outcome = match cutoff {
                None => attempt.await,
                Some(cutoff) => tokio::select! {
                    biased;
                    outcome = attempt => outcome,
                    _ = clock.sleep_until(cutoff) => {
                        self.release_in_background();
                        return Err(timed_out(&claim, "unknown (the last attempt did not finish in time)"));
                    }
                },
            };
            let seen_holder = matches!(outcome, Ok((_, Attempt::Busy { .. })));
            let (who, expires_in) = match outcome {
                Ok((engine, Attempt::Acquired(held))) => match self.fresh(&engine, held).await {
                    Some(held) => return Ok(self.start(engine, held, claim)),
                    None => {
                        claim.enter(State::Waiting, "acquired too late to claim it");
                        ("ourselves, too late to claim".to_string(), None)
                    }
                },
                Ok((_, Attempt::Busy { holder, expires_in })) => {
                    let who = holder.as_ref().map(LockFile::describe).unwrap_or_default();
                    claim.enter(State::Waiting, format_args!("held by {who}"));
                    (who, expires_in)
                }
                Err(e) if e.is_transient() => {
                    log::warn!("{}: acquisition attempt failed, retrying: {e}", self.uri);
                    claim.enter(State::Retrying, &e);
                    (format!("unknown ({e})"), None)
                }
                Err(e) => {
                    claim.enter(State::Failed, &e);
                    return Err(e);
                }
            };
            if who != logged_holder {
                log::debug!("{}: held by {who}, waiting", self.uri);
                logged_holder = who.clone();
            }
            let now = clock.now();
            if deadline.is_some_and(|d| now >= d) {
                if !seen_holder {
                    // The last attempt failed or came too late: a write of it may be there.
                    self.release_if_written(&pursuit);
                }
                return Err(timed_out(&claim, &who));
            }
            let pause = polls.pause(clock.jitter(), expires_in, deadline.map(|d| d - now));
            match woken {
                Some(woken) => {
                    tokio::select! {
                        _ = clock.sleep(pause) => {}
                        _ = woken => {}
                    }
                }
                None => clock.sleep(pause).await,
            }
        }
    }

    /// One acquisition attempt on the protocol the store allows.
    async fn attempt(&self, pursuit: &mut Pursuit) -> Result<(Engine, Attempt)> {
        let engine = self.resolved().await?;
        let outcome = engine.attempt(&self.owner, pursuit).await?;
        Ok((engine, outcome))
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

    /// After an acquisition of this lock was interrupted (a signal, a cancelled task) or
    /// abandoned at its timeout: releases, in the background, whatever it may have written.
    pub fn release_in_background(&self) {
        drop(self.owe_cleanup());
    }

    /// After a transient failure that ends an acquisition: a write of ours whose outcome is
    /// unknown may have landed. (After a permanent one, a release would fail as well.)
    fn release_if_written(&self, pursuit: &Pursuit) {
        if pursuit.wrote() {
            self.release_in_background();
        }
    }

    /// One attempt; never waits. `None` when someone else holds the lock (or this lock's
    /// own interrupted acquisition is still being released).
    pub async fn try_acquire(&self) -> Result<Option<Lease>> {
        let claim = Arc::new(Claim::new(&self.uri, &self.owner));
        claim.enter(State::Acquiring, "one attempt");
        if self.cleanups.pending() {
            claim.enter(
                State::Failed,
                "an interrupted acquisition is being released",
            );
            return Ok(None);
        }
        let mut pursuit = Pursuit::default();
        match self.attempt(&mut pursuit).await {
            Ok((engine, Attempt::Acquired(held))) => match self.fresh(&engine, held).await {
                Some(held) => Ok(Some(self.start(engine, held, claim))),
                None => {
                    claim.enter(State::Failed, "acquired too late to claim it");
                    self.release_in_background();
                    Ok(None)
                }
            },
            Ok((_, Attempt::Busy { holder, .. })) => {
                let who = holder.as_ref().map(LockFile::describe).unwrap_or_default();
                claim.enter(State::Failed, format_args!("held by {who}"));
                Ok(None)
            }
            Err(e) => {
                claim.enter(State::Failed, &e);
                if e.is_transient() {
                    self.release_if_written(&pursuit);
                }
                Err(e)
            }
        }
    }

    /// Releases whatever acquisition the lockfile shows for this lock's owner, without a
    /// lease in hand. Refuses (and writes nothing) when another owner holds it.
    pub async fn release_unheld(&self) -> Result<ReleaseStatus> {
        let until = self.engine.clock.now() + self.engine.timing.heartbeat;
        let released = with_retries(&self.engine, "release", until, || async {
            let engine = self.resolved().await?;
            engine.release_seeing(&self.owner, None).await
        });
        Ok(released.await.0?.0)
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
    /// given). See [`inspect::break_lock`].
    pub async fn break_lock(&self, expect: Option<(&str, u64)>) -> Result<Broken> {
        inspect::break_lock(&self.resolved().await?, expect).await
    }

    /// An acquisition whose write took so long that its lease has already run out (a
    /// request delayed past `expire - margin`) must not be claimed: a waiter may have taken
    /// the lock over meanwhile. Renew it first; claim it only if that succeeds.
    async fn fresh(&self, engine: &Engine, mut held: Held) -> Option<Held> {
        let t = &engine.timing;
        if engine.clock.now() < held.lease_start + t.expire - t.margin {
            return Some(held);
        }
        log::debug!("{}: acquired too late to claim; renewing first", self.uri);
        match engine.renew(&mut held, None).await {
            Ok(()) if engine.clock.now() < held.lease_start + t.expire - t.margin => Some(held),
            _ => None,
        }
    }

    fn start(&self, engine: Engine, held: Held, claim: Arc<Claim>) -> Lease {
        claim.enter(State::Held, format_args!("token {}", held.token));
        Lease::start(engine, held, None, self.on_lost.clone(), claim)
    }
}

/// What the remote calls: keeps the lease of `owner` alive as a co-owner until stopped.
/// `Error::NotFound` when there is no lockfile, `Error::Stolen` when it names another owner
/// or is released. Never releases.
pub async fn keep_alive(uri: &str, owner: &str, options: &LockOptions) -> Result<Lease> {
    let store = store::open(uri, &options.storage_options, &options.timing)?;
    let (mut engine, held, claim) = adopt(store, owner, options).await?;
    // Requests are bounded by the lock's own schedule, which only the lockfile told us.
    if engine.timing.request_timeout() != options.timing.request_timeout() {
        engine.store = store::open(uri, &options.storage_options, &engine.timing)?;
    }
    let on_lost = options.on_lost.clone();
    Ok(Lease::start(engine, held, Some("remote"), on_lost, claim))
}

/// [`keep_alive`] on a given store.
pub async fn keep_alive_on(
    store: Arc<dyn LockStore>,
    owner: &str,
    options: &LockOptions,
) -> Result<Lease> {
    let (engine, held, claim) = adopt(store, owner, options).await?;
    let on_lost = options.on_lost.clone();
    Ok(Lease::start(engine, held, Some("remote"), on_lost, claim))
}

/// Takes up `owner`'s lock as a co-owner: the engine on the lock's own schedule, what it
/// holds, and its claim.
async fn adopt(
    store: Arc<dyn LockStore>,
    owner: &str,
    options: &LockOptions,
) -> Result<(Engine, Held, Arc<Claim>)> {
    if owner.is_empty() || owner.contains('/') {
        return Err(Error::InvalidArgument(format!(
            "owner {owner:?} is not an owner id; pass the `owner` of the orchestrator's held lock"
        )));
    }
    let mut engine = Engine {
        store,
        protocol: options.protocol.unwrap_or(Protocol::Cas),
        timing: Arc::new(options.timing),
        clock: options.clock.clone(),
        hint: Default::default(),
        wake: None,
    };
    let claim = Arc::new(Claim::starting_in(engine.uri(), owner, State::Acquiring));
    // A remote starting during a store blip retries for a heartbeat before giving up.
    let until = engine.clock.now() + engine.timing.heartbeat;
    let adopted = with_retries(&engine, "keep_alive", until, || async {
        let protocol = engine.store.protocol_for(options.protocol).await?;
        let engine = engine.with_protocol(protocol);
        Ok((engine.adopt(owner, Some("remote")).await?, protocol))
    });
    let (held, protocol) = match adopted.await.0 {
        Ok(adopted) => adopted,
        Err(e) => {
            claim.enter(State::Failed, &e);
            return Err(e);
        }
    };
    engine.protocol = protocol;
    claim.enter(
        State::Held,
        format_args!("kept alive, token {}", held.token),
    );
    // The remote renews on the orchestrator's schedule: the lockfile's expire_s, not ours.
    if let Ok(t) = Timing::with_expire(held.body.expire_s) {
        engine.timing = Arc::new(Timing {
            settle: engine.timing.settle,
            skew: engine.timing.skew,
            ..t
        });
    }
    Ok((engine, held, claim))
}

struct Shared {
    engine: Engine,
    owner: String,
    token: u64,
    writer_name: Option<&'static str>,
    /// The heartbeat and release take turns on the lockfile through this.
    held: tokio::sync::Mutex<Held>,
    /// Past this instant we no longer claim the lock: `lease_start + expire - margin`.
    deadline: Mutex<Instant>,
    /// Why the lease was lost; sticky once set.
    lost: Mutex<Option<String>>,
    stopped: AtomicBool,
    released: AtomicBool,
    stop: Notify,
    on_lost: Option<LossHook>,
    claim: Arc<Claim>,
}

impl Shared {
    fn deadline_of(&self, held: &Held) -> Instant {
        let t = &self.engine.timing;
        held.lease_start + t.expire - t.margin
    }

    fn mark_lost(&self, reason: String) {
        let first = {
            let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
            let first = lost.is_none();
            if first {
                *lost = Some(reason.clone());
            }
            first
        };
        // Every time: a release after an earlier loss has moved the claim on since.
        self.claim.enter(State::Lost, &reason);
        if !first {
            return;
        }
        // Log only after the mutex is dropped: in Python, logging takes the GIL, and a
        // thread that holds the GIL may be waiting for this mutex (`held.lost`): deadlock.
        log::warn!(
            "{}: lock lost by owner {}: {reason}",
            self.engine.uri(),
            self.owner
        );
        if let Some(hook) = &self.on_lost {
            (hook.0)(&Error::Lost {
                uri: self.engine.uri().to_string(),
                reason,
            });
        }
    }

    fn lost_reason(&self) -> Option<String> {
        if let Some(r) = self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Some(r);
        }
        let deadline = *self.deadline.lock().unwrap_or_else(|e| e.into_inner());
        // A stopped lease (the remote's keep_alive after stop()) is lost at its deadline too;
        // only a release ends the claim without loss. Stopping was asked for, so that loss
        // is neither warned about nor told to on_lost.
        if self.engine.clock.now() >= deadline && !self.released.load(Ordering::SeqCst) {
            if self.claim.state() == State::Stopped {
                return Some("renewal was stopped and the lease ran out".into());
            }
            self.mark_lost(format!(
                "no successful renewal before the lease deadline ({}s after the last write, less the margin)",
                self.engine.timing.expire.as_secs_f64()
            ));
            return self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone();
        }
        None
    }
}

/// A held lease, renewed by its heartbeat. Dropping it stops the heartbeat without
/// releasing (the lock then expires); call [`Lease::release`] to release.
pub struct Lease {
    shared: Arc<Shared>,
    /// The heartbeat's start, while it is filed with the shared runtime's starter and has
    /// not run.
    filed: Mutex<Option<crate::starter::Ticket>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("uri", &self.shared.engine.uri())
            .field("owner", &self.shared.owner)
            .field("token", &self.shared.token)
            .finish()
    }
}

impl Lease {
    fn start(
        engine: Engine,
        held: Held,
        writer_name: Option<&'static str>,
        on_lost: Option<LossHook>,
        claim: Arc<Claim>,
    ) -> Lease {
        let first_beat = held.lease_start + engine.timing.heartbeat;
        let shared = Arc::new(Shared {
            on_lost,
            claim,
            owner: held.owner.clone(),
            token: held.token,
            writer_name,
            deadline: Mutex::new(held.lease_start + engine.timing.expire - engine.timing.margin),
            held: tokio::sync::Mutex::new(held),
            engine,
            lost: Mutex::new(None),
            stopped: AtomicBool::new(false),
            released: AtomicBool::new(false),
            stop: Notify::new(),
        });
        let mut filed = None;
        if shared.engine.clock.is_tokio() && crate::runtime::on_shared_runtime() {
            // Nothing to do before the first renewal: the task starts then, if the lease is
            // still held (most blocking callers have released long before).
            let task = shared.clone();
            let start = Box::new(move || drop(tokio::spawn(heartbeat(task))));
            filed = Some(crate::starter::start_at(first_beat, start));
        } else {
            tokio::spawn(heartbeat(shared.clone()));
        }
        Lease {
            shared,
            filed: Mutex::new(filed),
        }
    }

    /// The owner id.
    pub fn owner(&self) -> &str {
        &self.shared.owner
    }

    /// The fencing token of this acquisition.
    pub fn token(&self) -> u64 {
        self.shared.token
    }

    /// True once the lease is lost: taken over, released by someone else, or not renewed
    /// before its deadline. Never turns false again.
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// Why the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<String> {
        self.shared.lost_reason()
    }

    /// Stops the heartbeat and waits for a renewal in flight; the lease is then ours until
    /// it expires, unless released.
    pub async fn stop(&self) {
        self.halt();
        drop(self.shared.held.lock().await);
        self.shared.claim.enter(State::Stopped, "renewal stopped");
    }

    /// Where the claim of this lease is in its lifecycle.
    pub fn state(&self) -> State {
        self.shared.claim.state()
    }

    /// Stops the heartbeat and releases.
    pub async fn release(&self) -> Result<ReleaseStatus> {
        self.halt();
        let held = self.shared.held.lock().await;
        self.shared.claim.enter(State::Releasing, "release");
        // Retry within the lease, or a heartbeat if that has run out (nobody may have
        // taken the lock yet: releasing it still saves the next owner a wait).
        let engine = &self.shared.engine;
        let deadline = *self
            .shared
            .deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let until = deadline.max(engine.clock.now() + engine.timing.heartbeat);
        let released = release_retrying(
            engine,
            &self.shared.owner,
            Some(&held),
            until,
            Some(deadline),
        );
        let status = match released.await {
            Ok(status) => status,
            Err(e) => {
                self.shared.claim.enter(State::Failed, &e);
                return Err(e);
            }
        };
        match &status {
            ReleaseStatus::Released => {
                self.shared.released.store(true, Ordering::SeqCst);
                self.shared.claim.enter(State::Released, "released");
                if let Some(wake) = &self.shared.engine.wake {
                    wake.notify_waiters();
                }
            }
            // Not ours any more, found only now (taken over between heartbeats, released
            // or deleted by someone else): a loss like any other, told the same ways.
            other => self.shared.mark_lost(match other {
                ReleaseStatus::HeldByOther(who, _) => format!("at release it was held by {who}"),
                ReleaseStatus::NoLockfile => "at release the lockfile was gone".into(),
                _ => "at release it was already released by someone else".into(),
            }),
        }
        Ok(status)
    }

    /// Tells the heartbeat to stop, without waiting for it.
    fn halt(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        let filed = self.filed.lock().unwrap_or_else(|e| e.into_inner()).take();
        if filed.is_some_and(crate::starter::cancel) {
            return; // no task was started: nobody to tell
        }
        self.shared.stop.notify_one();
    }
}

/// Runs `op` until it succeeds, fails for good, or `until` passes, retrying transient store
/// errors with capped exponential backoff and jitter. Also says whether an attempt failed
/// first: its write may have landed all the same.
async fn with_retries<T, F, Fut>(
    engine: &Engine,
    what: &str,
    until: Instant,
    mut op: F,
) -> (Result<T>, bool)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut pause = Duration::from_millis(50);
    let mut retried = false;
    loop {
        match op().await {
            Err(e) if e.is_transient() && engine.clock.now() + pause < until => {
                log::warn!("{}: {what} failed, retrying: {e}", engine.uri());
                retried = true;
                engine
                    .clock
                    .sleep(pause.mul_f64(engine.clock.jitter()))
                    .await;
                pause = (pause * 2).min(engine.timing.heartbeat / 2);
            }
            other => return (other, retried),
        }
    }
}

/// Releases with retries until `until`. After an attempt failed (it may have landed all
/// the same), finding our own acquisition released means it did; and so does finding a
/// later acquisition before our lease `deadline`, since until then nobody can take the lock
/// over unless it was released.
async fn release_retrying(
    engine: &Engine,
    owner: &str,
    held: Option<&Held>,
    until: Instant,
    deadline: Option<Instant>,
) -> Result<ReleaseStatus> {
    let token = held.map(|h| h.token);
    let released = with_retries(engine, "release", until, || {
        engine.release_seeing(owner, held)
    });
    match released.await {
        (Ok((ReleaseStatus::AlreadyReleased, Some(lf))), true)
            if lf.writer_id == owner && token.is_none_or(|t| t == lf.token) =>
        {
            Ok(ReleaseStatus::Released)
        }
        (Ok((_, Some(lf))), true)
            if token.is_some_and(|t| lf.token > t)
                && deadline.is_some_and(|d| engine.clock.now() < d) =>
        {
            Ok(ReleaseStatus::Released)
        }
        (result, _) => result.map(|(status, _)| status),
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.halt();
        if self.shared.claim.state().is_holding() {
            // Dropped mid-renewal or mid-release (an abandoned future) too.
            self.shared.claim.enter(State::Stopped, "lease dropped");
        }
    }
}

async fn heartbeat(shared: Arc<Shared>) {
    // Only the interval: a copy of the whole timing would live in every idle task.
    let heartbeat = shared.engine.timing.heartbeat;
    let mut next = shared.held.lock().await.lease_start + heartbeat;
    let mut retry = Duration::from_millis(50);
    loop {
        tokio::select! {
            biased; // deterministic under simulation
            _ = shared.engine.clock.sleep_until(next) => {}
            _ = shared.stop.notified() => {}
        }
        if shared.stopped.load(Ordering::SeqCst) || shared.lost_reason().is_some() {
            return;
        }
        let mut held = shared.held.lock().await;
        if shared.stopped.load(Ordering::SeqCst)
            || !shared.claim.enter(State::Renewing, "heartbeat")
        {
            return; // stopped, or lost meanwhile
        }
        let deadline = *shared.deadline.lock().unwrap_or_else(|e| e.into_inner());
        let renewal = {
            // Boxed: inline, the renewal's state made every idle heartbeat task about 1.9 KB
            // (most of a held lock's memory); boxed it exists only while a renewal runs.
            let renewal = shared.engine.renew(&mut held, shared.writer_name);
            let mut renewal = Box::pin(crate::store::gate::urgently(renewal));
            tokio::select! {
                biased;
                r = &mut renewal => r,
                _ = shared.engine.clock.sleep_until(deadline) => {
                    // From the deadline on a waiter may take over, so a renewal still in flight
                    // cannot save the lease: declare the loss now, not when the request ends.
                    shared.mark_lost("the renewal in flight did not finish before the lease deadline".into());
                    // Not cancelled: a request on the wire may land anyway, and its outcome is
                    // settled like any other (a release waits for it).
                    let _ = renewal.await;
                    return;
                }
            }
        };
        match renewal {
            Ok(()) => {
                let deadline = shared.deadline_of(&held);
                // Past the old deadline we may already have told the user the lease is lost;
                // lost is sticky, so a late success changes nothing.
                if shared.lost_reason().is_some() {
                    return;
                }
                *shared.deadline.lock().unwrap_or_else(|e| e.into_inner()) = deadline;
                if !shared.claim.enter(State::Held, "renewed") {
                    return;
                }
                next = held.lease_start + heartbeat;
                retry = Duration::from_millis(50);
            }
            Err(Error::Lost { reason, .. }) => {
                shared.mark_lost(reason);
                return;
            }
            Err(e) if !e.is_transient() && !matches!(e, Error::InvalidLockFile { .. }) => {
                // Bad credentials, a deleted bucket: no retry can renew the lease. (An
                // unreadable lockfile may be a foreign writer's torn write: retried.)
                shared.mark_lost(format!("renewal failed and cannot succeed: {e}"));
                return;
            }
            Err(e) => {
                let now = shared.engine.clock.now();
                if now >= deadline {
                    shared.mark_lost(format!("renewal failed until the lease deadline: {e}"));
                    return;
                }
                log::warn!("{}: renewal failed, retrying: {e}", shared.engine.uri());
                shared.claim.enter(State::RenewRetrying, &e);
                // Jittered, so that holders cut off together do not retry in step.
                next = (now + retry.mul_f64(shared.engine.clock.jitter())).min(deadline);
                retry = (retry * 2).min(heartbeat / 2);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::drive;

    #[test]
    fn a_lease_released_before_its_first_renewal_takes_its_start_back() {
        let options = LockOptions::new(30.0).unwrap();
        let store = crate::store::open("memory://brief/lock", &Default::default(), &options.timing)
            .unwrap();
        let lock = Lock::with_store("t", store, &options);
        for _ in 0..100 {
            let lease = drive(lock.acquire(None)).unwrap();
            assert_eq!(crate::starter::filed(), 1, "filed, not spawned");
            assert_eq!(drive(lease.release()).unwrap(), ReleaseStatus::Released);
            assert_eq!(crate::starter::filed(), 0, "taken back at release");
        }
        let dropped = drive(lock.acquire(None)).unwrap();
        drop(dropped);
        assert_eq!(crate::starter::filed(), 0, "taken back when dropped");
    }
}
