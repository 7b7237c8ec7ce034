//! Taking a slot: one round over the slots from where the acquisition's owner id points,
//! then, every slot held, one slot read per poll (`rotation.rs`), woken at once by a release
//! in this process; a process that just vacated a slot waits out its cooldown first
//! (`cooldown.rs`).
//! The wait itself (deadline, cutoff, polls, wakers, seniority) is a lock's
//! (`crate::lease::Wait`).
//! Each acquisition writes an owner id of its own, and an attempt abandoned mid-request
//! releases what it may have written.
//!
//! A slot won above slot 0 is reported held only once the stored number, read after the
//! slot's write landed, is above it; otherwise the acquisition steps back (releases it) and
//! goes on with the number read. So once `set_slots` has returned, no slot at or above the
//! new number is held anew: an acquisition whose write came later reads that number or a
//! later one. (Slot 0 is below every number.) A waiter reads the number at every poll, so
//! that a raised one takes effect within one.

use super::rotation::Rotation;
use super::{retried, Permit, Semaphore};
use crate::errors::{Error, Result};
use crate::lease::{arm, new_owner_id, Lease, Lock, Tried, Wait};
use crate::mutation::{active, Mutation};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

impl Semaphore {
    /// One attempt at every slot, without waiting: `None` when all are held.
    pub async fn try_acquire(&self) -> Result<Option<Permit>> {
        self.try_acquire_as(&new_owner_id()).await
    }

    /// [`Semaphore::try_acquire`], writing `owner` as the holder (each acquisition needs an
    /// owner id of its own: a slot whose lockfile names ours is ours).
    pub async fn try_acquire_as(&self, owner: &str) -> Result<Option<Permit>> {
        let mut n = self.configuration().await?.slots;
        let mut us = Contender::new(self, owner);
        let rotation = Rotation::new(n, us.spread(n));
        for slot in rotation.round() {
            if slot >= n {
                continue; // lowered meanwhile
            }
            let lock = us.lock(slot)?;
            if let Tried::Held(lease) = attempt(lock).await? {
                match self.kept(slot, lock, lease, None).await? {
                    Kept::Held(permit) => return Ok(Some(permit)),
                    Kept::SteppedBack { slots } => n = slots,
                    Kept::CutOff => unreachable!("no cutoff without a wait"),
                }
            }
        }
        Ok(None)
    }

    /// What a slot won becomes: held if the stored number, read now, is above it (slot 0
    /// always is); else released again, with the number read. Within `wait`'s cutoff, when
    /// there is one: past it, the slot is released in the background ([`Kept::CutOff`]).
    async fn kept(
        &self,
        slot: usize,
        lock: &Lock,
        lease: Lease,
        wait: Option<&Wait>,
    ) -> Result<Kept> {
        if slot == 0 || active(Mutation::SemaphoreUncheckedSlot) {
            return Ok(Kept::Held(self.permit(slot, lock, lease)));
        }
        let read = self.configuration_by(wait.and_then(Wait::deadline));
        let read = match wait {
            Some(wait) => wait.within_cutoff(read).await,
            None => Some(read.await),
        };
        let Some(stored) = read else {
            lock.owe_cleanup().give_back(Arc::new(lease));
            return Ok(Kept::CutOff);
        };
        let stored = match stored {
            // Still ours when it is reported: the read may have taken longer than the lease
            // had left (a slow answer), and a slot lost meanwhile is never reported held.
            Ok(stored)
                if slot < stored.slots && !lease.is_lost() && !lease.remaining().is_zero() =>
            {
                return Ok(Kept::Held(self.permit(slot, lock, lease)))
            }
            Ok(stored) => Ok(stored.slots),
            Err(e) => Err(e),
        };
        log::debug!(
            "{}: took slot {slot}, then read {}; stepping back",
            self.prefix,
            match &stored {
                Ok(n) if slot < *n => "the number, after the slot's lease had run out".into(),
                Ok(n) => format!("{n} slots stored"),
                Err(e) => format!("no number ({e})"),
            }
        );
        let released = match wait {
            Some(wait) => wait.within_cutoff(lease.release()).await,
            None => Some(lease.release().await),
        };
        match released {
            Some(Ok(_)) => {}
            // Not released: it expires by itself, as a crashed holder's would, unless this
            // acquisition takes the slot again (its own write, resolved as such).
            Some(Err(e)) => {
                log::warn!(
                    "{}: stepping back from slot {slot} failed: {e}",
                    self.prefix
                );
                lock.leave_unreleased(&lease).await;
            }
            None => lock.owe_cleanup().give_back(Arc::new(lease)),
        }
        stored.map(|slots| Kept::SteppedBack { slots })
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
        // The deadline, its cutoff, the polls and the seniority, as a lock's wait has them.
        let mut wait = Wait::new(&clock, &self.options.timing, timeout);
        let deadline = wait.deadline();
        // Having just vacated a slot here, this process leaves it to waiters elsewhere
        // first (`cooldown.rs`).
        // (The cooldown's length is looked up only within the longest it can be: a slot
        // vacated longer ago holds nothing back, and a fresh semaphore per `with` asks
        // nothing then.)
        let recent = |at| clock.now() < at + self.options.timing.poll_max;
        if let Some(at) = self.cooldown.last_vacated().filter(|&at| recent(at)) {
            let until = at + self.cooldown()?;
            let until = deadline.map_or(until, |d| until.min(d));
            if clock.now() < until {
                clock.sleep_until(until).await;
            }
        }
        let timed_out = |wait: &Wait, holder: String, saturated: Option<String>| Error::Timeout {
            uri: self.prefix.to_string(),
            waited: wait.waited(),
            holder,
            saturated,
        };
        let mut us = Contender::new(self, owner);
        // Every read of the number within the cutoff too, as every attempt is.
        let cut_off = |wait: &Wait| {
            let holder = "unknown (reading the number of slots did not finish in time)";
            timed_out(wait, holder.into(), None)
        };
        let Some(stored) = wait.within_cutoff(self.configuration_by(deadline)).await else {
            return Err(cut_off(&wait));
        };
        let mut n = stored?.slots;
        let mut rotation = Rotation::new(n, us.spread(n));
        // Made once the first round found every slot held: an acquisition that takes a slot
        // at once looks up no waker, and is not counted as a waiter.
        let mut wakers: Option<Vec<(usize, Arc<Notify>)>> = None;
        // Where the store hears other processes' writes (local files), the watches that wake
        // the waker of a slot written: kept while it waits.
        let mut _watches: Vec<Box<dyn std::any::Any + Send + Sync>> = Vec::new();
        // Counted among the process's waiters from then until it ends, however it ends.
        let mut _waiting: Option<Waiting> = None;
        let mut last_error: Option<Error> = None;
        // The first round reads every slot; then one slot per poll, or the slot written
        // when woken.
        let mut round: Vec<usize> = rotation.round().collect();
        loop {
            // Listening before the attempts: a release between a read and the sleep wakes us.
            let armed = arm(wakers.iter().flatten().map(|(_, w)| w));
            for slot in std::mem::take(&mut round) {
                if slot >= n {
                    continue;
                }
                let lock = us.lock(slot)?;
                // An attempt still in flight at the cutoff is abandoned (`attempt` releases
                // what it may have written).
                let Some(tried) = wait.within_cutoff(attempt(lock)).await else {
                    let holder = "unknown (the last attempt did not finish in time)".into();
                    return Err(timed_out(&wait, holder, None));
                };
                match tried {
                    Ok(Tried::Held(lease)) => match self.kept(slot, lock, lease, Some(&wait)).await
                    {
                        Ok(Kept::Held(permit)) => return Ok(permit),
                        Ok(Kept::CutOff) => return Err(cut_off(&wait)),
                        // Lowered to `slots` meanwhile: the rest of the round below it.
                        // (Its wakers of slots past it only wake it once more.)
                        Ok(Kept::SteppedBack { slots }) => {
                            n = slots;
                            rotation.resize(n);
                        }
                        Err(e) if retried(&e) => last_error = Some(e),
                        Err(e) => return Err(e),
                    },
                    Ok(Tried::Busy { holder, expires_in }) => {
                        if let Some(holder) = holder.as_deref() {
                            wait.saw(holder);
                        }
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
            if wait.past_deadline() {
                let holder = match &last_error {
                    Some(e) => format!("unknown: the last read failed ({e})"),
                    None if n == 1 => "the holder of its 1 slot".to_string(),
                    None => format!("the holders of all {n} of its slots"),
                };
                let saturated = match &last_error {
                    Some(Error::Saturated { message, .. }) => Some(message.clone()),
                    _ => None,
                };
                return Err(timed_out(&wait, holder, saturated));
            }
            // Every slot read was held: from here on it is a waiter.
            if _waiting.is_none() {
                _waiting = Some(Waiting::new());
            }
            let now = clock.now();
            let pause = wait.next_pause(None);
            let (slot, at) = rotation.next(now, pause);
            let at = deadline.map_or(at, |d| at.min(d));
            // A slot written (released here, or by another process where the store hears
            // it): that slot is read now; else the slot the rotation chose.
            match wait.sleep(at, armed).await {
                None => round.push(slot),
                Some(i) => round.extend(wakers.as_ref().and_then(|w| w.get(i)).map(|(s, _)| *s)),
            }
            // (Made after the first pause, which has no wake: `poll_min` at most.)
            if wakers.is_none() {
                let made = self.wakers(n)?;
                _watches = self.watches(&made);
                if !_watches.is_empty() {
                    // A write between our reads and the watches would go unheard.
                    round.extend(rotation.round());
                }
                wakers = Some(made);
            }
            // The number, read at every poll: a raised one takes effect within one (its new
            // slots are read at once), a lowered one's slots are read no more. A failed read
            // keeps the number known; the next poll reads it again.
            let Some(stored) = wait.within_cutoff(self.configuration()).await else {
                return Err(cut_off(&wait));
            };
            let stored = match stored {
                Ok(stored) => stored.slots,
                Err(e) if retried(&e) => n,
                Err(e) => return Err(e),
            };
            if stored != n {
                let before = n;
                n = stored;
                rotation.resize(n);
                let made = self.wakers(n)?;
                _watches = self.watches(&made);
                wakers = Some(made);
                round.retain(|&s| s < n);
                round.extend(before..n);
                if round.is_empty() {
                    round.push(rotation.next(clock.now(), Duration::ZERO).0);
                }
            }
        }
    }

    /// What wakes a waiter when one of the first `n` slots is released by a lock of this
    /// process (or written by another process, with [`Semaphore::watches`]), by slot.
    fn wakers(&self, n: usize) -> Result<Vec<(usize, Arc<Notify>)>> {
        let mut wakers = Vec::with_capacity(n);
        for i in 0..n {
            wakers.extend(self.slot(i)?.waker().map(|w| (i, w)));
        }
        Ok(wakers)
    }

    /// Watches that wake each slot's waker when another process writes the slot, where
    /// the store hears of that (local files); none elsewhere.
    fn watches(
        &self,
        wakers: &[(usize, Arc<Notify>)],
    ) -> Vec<Box<dyn std::any::Any + Send + Sync>> {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        (wakers.iter())
            .filter_map(|(i, w)| slots.get(*i)?.store().watch(w))
            .collect()
    }

    /// The cooldown: how long this process leaves a slot it vacated to waiters elsewhere
    /// before it takes one again (`cooldown.rs`): one longest poll, within which each of
    /// them reads some slot; where they hear a release at once (a store that watches
    /// writes, local files), only the shortest poll.
    fn cooldown(&self) -> Result<Duration> {
        let timing = &self.options.timing;
        let heard = self
            .slot(0)?
            .store()
            .watch(&Arc::new(Notify::new()))
            .is_some();
        Ok(if heard {
            timing.poll_min
        } else {
            timing.poll_max
        })
    }

    fn permit(&self, slot: usize, lock: &Lock, lease: Lease) -> Permit {
        let (cooldown, clock) = (self.cooldown.clone(), self.options.clock.clone());
        lease.count_as_slot(Box::new(move || cooldown.vacated(clock.now())));
        Permit {
            slot,
            lock: lock.clone(),
            lease,
        }
    }
}

/// What a slot won became ([`Semaphore::kept`]).
enum Kept {
    Held(Permit),
    /// Released again: the stored number, read after it was won, is `slots`, at or below it.
    SteppedBack {
        slots: usize,
    },
    /// The read of the number did not end by the wait's cutoff: the slot is being released
    /// in the background.
    CutOff,
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
