//! A semaphore: at most N holders at once, for launch quotas across orchestrators (64 GPUs,
//! 10 licences, an API's 20 concurrent jobs). It is N slot locks under one prefix,
//! `PREFIX/slot-<i>`, each a [`Lock`] with everything a lock has (expiry without synchronized
//! clocks, heartbeat, a fencing token per slot, keep_alive by a remote, hand_off), and the
//! number N stored beside them ([`config`]).
//!
//! Taking a slot is `acquire.rs` (a round over the slots, then one slot read a poll,
//! `rotation.rs`; a process's cooldown after it vacated a slot, `cooldown.rs`). Slots at or above a
//! lowered N are never taken anew: their holders finish, and they drain.

mod acquire;
pub mod config;
mod cooldown;
mod rotation;
mod taken;

use crate::errors::{Error, Result};
use crate::lease::{Lease, Lock, LockOptions};
use crate::mutation::{active, Mutation};
use crate::protocol::watched::Watched;
use crate::store::LockStore;
use crate::timing::Polls;
use config::{Config, Stored};
use cooldown::Cooldown;
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

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
    /// When this process last vacated a slot here (`cooldown.rs`).
    cooldown: Cooldown,
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
            config: Config::open(prefix, options)?,
            options: options.clone(),
            slots: Mutex::new(vec![first]),
            warned_for: Mutex::new(None),
            cooldown: Cooldown::Process(prefix.into()),
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
            config: Config::with_stores(prefix, &open, options),
            opener: Some(open),
            asked: slots,
            options: options.clone(),
            slots: Mutex::new(Vec::new()),
            warned_for: Mutex::new(None),
            cooldown: Cooldown::Own(Default::default()),
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

    /// The timing of its slots' locks.
    pub fn timing(&self) -> &crate::timing::Timing {
        &self.options.timing
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
        Ok(self.config.read(true).await?.map(|(stored, _)| stored))
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
                    .with_watched(Watched::Shared(Default::default())),
            });
        }
        Ok(slots[i].clone())
    }
}

/// Whether a wait goes on after `e`: a transient store error or a saturated store, which
/// pass, as for a lock's attempts.
fn retried(e: &Error) -> bool {
    e.is_transient() || matches!(e, Error::Saturated { .. })
}
