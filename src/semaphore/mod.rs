//! A semaphore: at most N holders at once, for launch quotas across orchestrators (64 GPUs,
//! 10 licences, an API's 20 concurrent jobs). It is N slot locks under one prefix,
//! `PREFIX/slot-<i>`, each a [`Lock`] with everything a lock has (expiry without synchronized
//! clocks, heartbeat, a fencing token per slot, keep_alive by a remote, hand_off), and the
//! number N stored beside them ([`config`]).
//!
//! Taking a slot: one round over the slots, from a slot chosen by the acquisition's random
//! owner id, so that contenders spread instead of all racing for slot 0. When every slot is
//! held, the waiter reads one slot per poll (`rotation.rs`): the one whose holder expires
//! soonest when that time comes, else the next in turn; a release by a lock of this process
//! wakes it at once. Slots at or above a lowered N are never taken anew: their holders
//! finish, and they drain.

pub mod config;
mod rotation;
mod turns;

use crate::errors::{Error, Result};
use crate::lease::{new_owner_id, Lease, Lock, LockOptions, Tried};
use crate::mutation::{active, Mutation};
use crate::protocol::watched::Watched;
use crate::store::LockStore;
use crate::timing::Polls;
use config::{Config, Stored};
use rotation::Rotation;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use turns::Turns;

/// What opens the objects under a semaphore's prefix, by name (`slot-0`, `semaphore.json`):
/// a store the caller brings ([`Semaphore::with_stores`]).
pub type Opener = Arc<dyn Fn(&str) -> Arc<dyn LockStore> + Send + Sync>;

/// N slot locks under one prefix, at most N held at once.
pub struct Semaphore {
    prefix: Arc<str>,
    /// The stores brought by the caller; `None`: opened from the prefix's URI.
    opener: Option<Opener>,
    /// The number this caller asks for; the stored one wins.
    asked: usize,
    options: LockOptions,
    config: Config,
    /// The slot locks opened so far, by index (each opened once: a lock parses its URI
    /// and finds its store's client).
    slots: Mutex<Vec<Lock>>,
    /// The stored number last seen, to say once when it differs from the one asked.
    warned_for: Mutex<Option<usize>>,
    /// When this process last let go of a slot here (`turns.rs`).
    turns: Turns,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Semaphore({}, {} asked)", self.prefix, self.asked)
    }
}

/// A held slot: its lease, renewed in the background until released.
#[derive(Debug)]
pub struct Permit {
    slot: usize,
    /// The slot's lock, with this acquisition's owner id.
    lock: Lock,
    lease: Lease,
}

impl Permit {
    /// The slot's index, from 0.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The slot's lock URI: with [`Permit::owner`], what a remote keeps alive.
    pub fn uri(&self) -> &str {
        self.lock.uri()
    }

    /// The slot's lock, with the owner id this acquisition wrote (the bindings hold the
    /// lease through it as through any lock).
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// The owner id written into the slot's lockfile.
    pub fn owner(&self) -> &str {
        self.lease.owner()
    }

    /// The held lease on the slot.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The slot's index, its lock and the lease held on it (the bindings hold the lease
    /// through the lock as through any lock).
    pub fn into_parts(self) -> (usize, Lock, Lease) {
        (self.slot, self.lock, self.lease)
    }

    /// Releases the slot.
    pub async fn release(&self) -> Result<crate::protocol::ReleaseStatus> {
        self.lease.release().await
    }
}

/// The lock URI of slot `i` under `prefix`.
pub fn slot_uri(prefix: &str, i: usize) -> String {
    format!("{prefix}/slot-{i}")
}

impl Semaphore {
    /// The semaphore at `prefix`, asking for `slots` slots (the number stored beside them,
    /// if any, wins). Checks the prefix, the number and the options; makes no request.
    pub fn new(prefix: &str, slots: usize, options: &LockOptions) -> Result<Semaphore> {
        let slots = config::checked_slots(slots as u64)?;
        let prefix = prefix.trim_end_matches('/');
        if prefix.is_empty() || prefix.ends_with(":/") {
            return Err(Error::InvalidArgument(format!(
                "invalid semaphore prefix {prefix:?}: name a folder under a store, such as s3://bucket/quotas/gpu"
            )));
        }
        // The first slot's lock checks the URI and the options as any lock would.
        let first = Lock::new(&slot_uri(prefix, 0), options)?;
        Ok(Semaphore {
            prefix: prefix.into(),
            opener: None,
            asked: slots,
            config: Config::open(prefix, &options.store, &options.timing)?,
            options: options.clone(),
            slots: Mutex::new(vec![first]),
            warned_for: Mutex::new(None),
            turns: Turns::Process(prefix.into()),
        })
    }

    /// A semaphore on stores the caller brings (a simulation, a store of one's own), as
    /// [`Lock::with_store`]: `open` gives the store of each object under the prefix by
    /// name (`slot-<i>`, `semaphore.json`); `prefix` names it in messages.
    pub fn with_stores(
        prefix: &str,
        slots: usize,
        options: &LockOptions,
        open: Opener,
    ) -> Result<Semaphore> {
        let slots = config::checked_slots(slots as u64)?;
        let prefix = prefix.trim_end_matches('/');
        Ok(Semaphore {
            prefix: prefix.into(),
            config: Config::with_store(open(config::CONFIG_NAME)),
            opener: Some(open),
            asked: slots,
            options: options.clone(),
            slots: Mutex::new(Vec::new()),
            warned_for: Mutex::new(None),
            turns: Turns::Own(Default::default()),
        })
    }

    /// The prefix the slots are under.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The number of slots asked for when it was made.
    pub fn asked(&self) -> usize {
        self.asked
    }

    /// The stored configuration, written with the number asked for if there is none yet.
    pub async fn configuration(&self) -> Result<Stored> {
        let mut stored = self.config.agreed(self.asked).await?;
        if active(Mutation::SemaphoreAskedNumber) {
            stored.slots = self.asked;
        }
        if stored.slots != self.asked {
            let mut warned = self.warned_for.lock().unwrap_or_else(|e| e.into_inner());
            if *warned != Some(stored.slots) {
                *warned = Some(stored.slots);
                log::warn!(
                    "{}: {} slots asked for, but {} says {} (set by {} at {}); using {}",
                    self.prefix,
                    self.asked,
                    self.config.uri(),
                    stored.slots,
                    stored.set_by,
                    stored.set_at,
                    stored.slots
                );
            }
        }
        Ok(stored)
    }

    /// The stored configuration, if there is one; writes nothing (`status`, `ls`).
    pub async fn stored(&self) -> Result<Option<Stored>> {
        Ok(self.config.read().await?.map(|(stored, _)| stored))
    }

    /// The stored configuration, read again after a transient failure until `deadline`
    /// (`None`: for ever), as a lock's attempts are.
    async fn configuration_by(&self, deadline: Option<Instant>) -> Result<Stored> {
        let clock = &self.options.clock;
        let mut polls = Polls::new(&self.options.timing);
        loop {
            match self.configuration().await {
                Err(e) if retried(&e) && deadline.is_none_or(|d| clock.now() < d) => {
                    log::debug!(
                        "{}: reading {} failed, retrying: {e}",
                        self.prefix,
                        self.config.uri()
                    );
                    let left = deadline.map(|d| d.saturating_duration_since(clock.now()));
                    clock.sleep(polls.pause(clock.jitter(), None, left)).await;
                }
                done => return done,
            }
        }
    }

    /// Stores `slots` as the number of slots: raised, new acquisitions take the new slots
    /// at once; lowered, no holder is evicted, and the slots at or above it drain.
    pub async fn set_slots(&self, slots: usize) -> Result<Stored> {
        let slots = config::checked_slots(slots as u64)?;
        self.config.set(slots).await
    }

    /// Slot `i`'s lock, opened once per semaphore.
    fn slot(&self, i: usize) -> Result<Lock> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        while slots.len() <= i {
            let next = slots.len();
            let uri = slot_uri(&self.prefix, next);
            slots.push(match &self.opener {
                None => Lock::new(&uri, &self.options)?,
                // What it sees of its slot is kept by the semaphore, as a process keeps it for
                // locks opened from a URI: polls that find a crashed holder's write unchanged
                // count from the first, and its slot is taken after `expire`.
                Some(open) => Lock::with_store(&uri, open(&format!("slot-{next}")), &self.options)
                    .with_watched(Watched::Slot(Default::default())),
            });
        }
        Ok(slots[i].clone())
    }

    /// One attempt at every slot, without waiting: `None` when all are held.
    pub async fn try_acquire(&self) -> Result<Option<Permit>> {
        self.try_acquire_as(&new_owner_id()).await
    }

    /// [`Semaphore::try_acquire`], writing `owner` as the holder (each acquisition needs an
    /// owner id of its own: a slot whose lockfile names ours is ours).
    pub async fn try_acquire_as(&self, owner: &str) -> Result<Option<Permit>> {
        let n = self.configuration().await?.slots;
        let mut us = Contender::new(self, owner);
        let rotation = Rotation::new(n, us.spread(n));
        for slot in rotation.round() {
            let lock = us.lock(slot)?;
            if let Tried::Held(lease) = attempt(lock).await? {
                return Ok(Some(self.permit(slot, lock, lease)));
            }
        }
        Ok(None)
    }

    /// Waits until a slot is ours, or `timeout` passes (`Error::Timeout`); `None` waits for
    /// ever. Transient store errors are retried within the timeout.
    pub async fn acquire(&self, timeout: Option<Duration>) -> Result<Permit> {
        self.acquire_as(&new_owner_id(), timeout).await
    }

    /// [`Semaphore::acquire`], writing `owner` as the holder (each acquisition needs an
    /// owner id of its own: a slot whose lockfile names ours is ours).
    pub async fn acquire_as(&self, owner: &str, timeout: Option<Duration>) -> Result<Permit> {
        let clock = self.options.clock.clone();
        let began = clock.now();
        let deadline = timeout.map(|t| began + t);
        // Having just let go of a slot here, this process leaves it to waiters elsewhere
        // for a poll of theirs first (`turns.rs`).
        if let Some(at) = self.turns.last_let_go() {
            let until = at + self.options.timing.poll_max;
            let until = deadline.map_or(until, |d| until.min(d));
            if clock.now() < until {
                clock.sleep_until(until).await;
            }
        }
        let mut us = Contender::new(self, owner);
        let mut n = self.configuration_by(deadline).await?.slots;
        let mut rotation = Rotation::new(n, us.spread(n));
        let mut polls = Polls::new(&self.options.timing);
        // Made once the first round found every slot held: an acquisition that takes a slot
        // at once looks up no waker.
        let mut wakers: Option<Vec<Arc<Notify>>> = None;
        // Counted among the process's waiters from then until it ends, however it ends.
        let mut _waiting: Option<Waiting> = None;
        let mut last_error: Option<Error> = None;
        // The first round reads every slot; then one slot per poll, or every slot again
        // after a release in this process.
        let mut round: Vec<usize> = rotation.round().collect();
        let mut reads_since_config = 0;
        loop {
            let mut woken: Vec<_> = wakers
                .iter()
                .flatten()
                .map(|w| Box::pin(w.notified()))
                .collect();
            for w in &mut woken {
                w.as_mut().enable();
            }
            for slot in round.drain(..) {
                reads_since_config += 1;
                let lock = us.lock(slot)?;
                match attempt(lock).await {
                    Ok(Tried::Held(lease)) => return Ok(self.permit(slot, lock, lease)),
                    Ok(Tried::Busy { expires_in }) => {
                        rotation.saw(slot, clock.now(), expires_in);
                        last_error = None;
                    }
                    Err(e) if retried(&e) => {
                        rotation.saw(slot, clock.now(), None);
                        last_error = Some(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            let now = clock.now();
            if deadline.is_some_and(|d| now >= d) {
                let holder = match &last_error {
                    Some(e) => format!("unknown: the last read failed ({e})"),
                    None => format!("every one of its {n} slot{}", if n == 1 { "" } else { "s" }),
                };
                return Err(Error::Timeout {
                    uri: self.prefix.to_string(),
                    waited: now - began,
                    holder,
                });
            }
            let pause = polls.pause(clock.jitter(), None, deadline.map(|d| d - now));
            let (slot, at) = rotation.next(now, pause);
            let at = deadline.map_or(at, |d| at.min(d));
            if woken.is_empty() {
                drop(woken);
                clock.sleep_until(at).await;
                round.push(slot);
            } else {
                tokio::select! {
                    _ = clock.sleep_until(at) => round.push(slot),
                    _ = futures_util::future::select_all(woken) => round.extend(rotation.round()),
                }
            }
            if wakers.is_none() {
                wakers = Some(self.wakers(n)?);
                _waiting = Some(Waiting::new());
            }
            // A changed number takes effect within one turn of the slots: new slots are
            // read at once, slots past a lowered number no longer.
            if reads_since_config >= n {
                reads_since_config = 0;
                // A failed read keeps the number known: the next turn reads it again.
                let stored = match self.configuration().await {
                    Ok(stored) => stored.slots,
                    Err(e) if retried(&e) => n,
                    Err(e) => return Err(e),
                };
                if stored != n {
                    let before = n;
                    n = stored;
                    rotation.resize(n);
                    wakers = Some(self.wakers(n)?);
                    round.retain(|&s| s < n);
                    round.extend(before..n);
                    if round.is_empty() {
                        round.push(rotation.next(clock.now(), Duration::ZERO).0);
                    }
                }
            }
        }
    }

    /// What wakes a waiter when a lock of this process releases one of the first `n` slots.
    fn wakers(&self, n: usize) -> Result<Vec<Arc<Notify>>> {
        let mut wakers = Vec::with_capacity(n);
        for i in 0..n {
            wakers.extend(self.slot(i)?.waker());
        }
        Ok(wakers)
    }

    fn permit(&self, slot: usize, lock: &Lock, lease: Lease) -> Permit {
        let (turns, clock) = (self.turns.clone(), self.options.clock.clone());
        lease.count_as_slot(Box::new(move || turns.let_go(clock.now())));
        Permit {
            slot,
            lock: lock.clone(),
            lease,
        }
    }
}

/// One acquisition counted among the process's semaphore waiters while it lives.
struct Waiting;

impl Waiting {
    fn new() -> Waiting {
        crate::metrics::semaphore_waiters(1);
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        crate::metrics::semaphore_waiters(-1);
    }
}

/// Whether a wait goes on after `e`: a transient store error or a saturated store, which
/// pass, as for a lock's attempts.
fn retried(e: &Error) -> bool {
    e.is_transient() || matches!(e, Error::Saturated { .. })
}

/// One acquisition's locks on the slots, all with its owner id, each opened once: an
/// attempt abandoned on a slot owes a release that the next attempt there waits for.
struct Contender<'a> {
    semaphore: &'a Semaphore,
    owner: Arc<str>,
    locks: Vec<Option<Lock>>,
}

impl<'a> Contender<'a> {
    fn new(semaphore: &'a Semaphore, owner: &str) -> Contender<'a> {
        // Seeded: every acquisition of the semaphore writes one owner id, so that a slot
        // another acquisition of this process holds reads as ours.
        let owner = if active(Mutation::SemaphoreSharedOwner) {
            format!("{}-shared", semaphore.prefix)
        } else {
            owner.to_string()
        };
        Contender {
            semaphore,
            owner: owner.into(),
            locks: Vec::new(),
        }
    }

    /// The slot it starts at: from its random owner id, so that contenders spread.
    fn spread(&self, n: usize) -> usize {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.owner.hash(&mut h);
        (h.finish() % n.max(1) as u64) as usize
    }

    fn lock(&mut self, i: usize) -> Result<&Lock> {
        if self.locks.len() <= i {
            self.locks.resize(i + 1, None);
        }
        if self.locks[i].is_none() {
            let lock = self.semaphore.slot(i)?.another();
            self.locks[i] = Some(lock.with_owner(self.owner.to_string()));
        }
        Ok(self.locks[i].as_ref().expect("opened above"))
    }
}

/// One attempt at a slot; if the caller stops waiting for it mid-request (a cancelled task,
/// a timeout), whatever it may have written is released in the background.
async fn attempt(lock: &Lock) -> Result<Tried> {
    struct Abandoned<'a>(Option<&'a Lock>);
    impl Drop for Abandoned<'_> {
        fn drop(&mut self) {
            if let Some(lock) = self.0 {
                lock.release_in_background();
            }
        }
    }
    let mut guard = Abandoned(Some(lock));
    let tried = lock.try_once().await;
    guard.0 = None;
    tried
}
