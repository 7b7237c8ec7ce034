//! What a `NativeLock` holds: its lease, shared with its asyncio acquisitions, why the last
//! one was lost, and the acquisition in flight; whose turn it is and which acquisition runs;
//! and the steps that change them.

use crate::lease::{Cleanup, Lease, Lock};
use pyo3::prelude::*;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// What a NativeLock shares with its acquisitions (an `Arc`: one allocation, thousands of
/// locks are held): what it holds, whose turn it is, and which acquisition runs.
#[derive(Default)]
pub(crate) struct Shared {
    holding: Mutex<Holding>,
    /// The turn: the thread or asyncio task that holds the object, from the start of its
    /// acquisition to its release, as a `threading.Lock` is held (None: free). Taken and given
    /// by `blob_lock._turn`, which makes the rest wait for it. Any thread may give it back
    /// (`release()` may be called from another thread).
    turn: Mutex<Option<Py<PyAny>>>,
    /// The native acquisition running on the object's owner id, by number (0: none). Not
    /// the turn: a release from another thread gives the turn back while an acquisition
    /// still runs, and `abandon` frees this before the abandoned one ends; two acquisitions
    /// at once would share the owner id, and both could believe they hold the lock.
    pub(crate) running: AtomicU64,
}

impl Shared {
    pub(crate) fn holding(&self) -> MutexGuard<'_, Holding> {
        self.holding.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn turn(&self) -> MutexGuard<'_, Option<Py<PyAny>>> {
        self.turn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The turn if nobody else has its mutex now (the cycle collector must not wait).
    pub(crate) fn try_turn(&self) -> Result<MutexGuard<'_, Option<Py<PyAny>>>, ()> {
        match self.turn.try_lock() {
            Ok(turn) => Ok(turn),
            Err(std::sync::TryLockError::Poisoned(e)) => Ok(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => Err(()),
        }
    }
}

/// The lease a NativeLock holds, shared with its asyncio acquisitions, and why the last one
/// was lost (kept after its release, until the next acquisition).
#[derive(Default)]
pub(crate) struct Holding {
    pub(crate) lease: Option<Arc<Lease>>,
    pub(crate) last_loss: Option<Box<str>>,
    /// The asyncio acquisition running, if one is: `abandon` leaves what it owes there.
    pub(crate) in_flight: Option<Arc<Flight>>,
}

pub(crate) fn hold(shared: &Arc<Shared>, lease: Lease) {
    let old = {
        let mut holding = shared.holding();
        holding.last_loss = None;
        holding.lease.replace(Arc::new(lease))
    };
    // Dropped after the mutex: dropping a lease may log, which takes the GIL, while a
    // thread holding the GIL may wait for this mutex (`held`).
    drop(old);
}

/// An asyncio acquisition under way, shared by its future and, until it ends or is
/// abandoned, the lock's `Shared`. Its future runs on a runtime thread and may end (or be dropped, when
/// the awaitable is cancelled) while the cancelled Python task runs `abandon`: both take the
/// holding mutex, so each sees all or nothing of the other.
pub(crate) struct Flight {
    /// Its number (as in `Shared::running`).
    id: u64,
    /// Set by `abandon`: its caller is gone, so what it acquires or wrote is released. Only
    /// touched under the holding mutex.
    owed: Mutex<Option<Cleanup>>,
}

impl Flight {
    /// Frees the object of `shared` for its next acquisition, unless another has begun already.
    fn free(&self, shared: &Arc<Shared>) {
        let _ = shared
            .running
            .compare_exchange(self.id, 0, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Marks acquisition `id` through `shared`'s object as in flight; the returned landing ends it.
    pub(crate) fn start(shared: &Arc<Shared>, lock: &Lock, id: u64) -> Landing {
        let flight = Arc::new(Flight {
            id,
            owed: Mutex::new(None),
        });
        shared.holding().in_flight = Some(flight.clone());
        Landing {
            shared: shared.clone(),
            lock: lock.clone(),
            flight: Some(flight),
        }
    }
}

/// Called by `abandon` under the holding mutex: the caller of the acquisition in
/// flight is gone. What it acquires or wrote is owed from now on (the lock's next
/// acquisition waits for it), and the object is free for that next acquisition at once,
/// whenever the abandoned one ends. False if none is in flight (it has ended: its lease,
/// if any, is held).
pub(crate) fn abandon_in_flight(shared: &Arc<Shared>, holding: &mut Holding, lock: &Lock) -> bool {
    let Some(flight) = holding.in_flight.take() else {
        return false;
    };
    let mut owed = flight.owed.lock().unwrap_or_else(|e| e.into_inner());
    if owed.is_none() {
        *owed = Some(lock.owe_cleanup());
    }
    flight.free(shared);
    true
}

/// The future's end of a [`Flight`]: [`Landing::land`] where the acquisition ends; dropped
/// unlanded (its future dropped: the awaitable was cancelled), it releases what the
/// acquisition may have written.
pub(crate) struct Landing {
    shared: Arc<Shared>,
    lock: Lock,
    flight: Option<Arc<Flight>>,
}

impl Landing {
    /// Where the acquisition ends: holds its lease, or, if it was abandoned, gives it back in
    /// the background. True if held.
    pub(crate) fn land(mut self, acquired: Option<Lease>) -> bool {
        let Some(flight) = self.flight.take() else {
            return false;
        };
        let mut holding = self.shared.holding();
        let owed = self.end(&mut holding, &flight);
        match (acquired, owed) {
            (Some(lease), None) => {
                holding.last_loss = None;
                let old = holding.lease.replace(Arc::new(lease));
                drop(holding);
                drop(old);
                true
            }
            (Some(lease), Some(owed)) => {
                drop(holding);
                owed.give_back(Arc::new(lease));
                false
            }
            // Nothing acquired; what it may have written, the owed cleanup releases (dropped).
            (None, owed) => {
                drop(holding);
                drop(owed);
                false
            }
        }
    }

    /// Takes `flight` out of the holding and frees the object for the next acquisition, in the
    /// same critical section as what the caller does with the outcome; returns what
    /// `abandon` left owed.
    fn end(&self, holding: &mut Holding, flight: &Arc<Flight>) -> Option<Cleanup> {
        if holding
            .in_flight
            .as_ref()
            .is_some_and(|f| Arc::ptr_eq(f, flight))
        {
            holding.in_flight = None;
        }
        flight.free(&self.shared);
        let owed = flight.owed.lock().unwrap_or_else(|e| e.into_inner()).take();
        owed
    }
}

impl Drop for Landing {
    fn drop(&mut self) {
        let Some(flight) = self.flight.take() else {
            return;
        };
        let mut holding = self.shared.holding();
        let owed = self.end(&mut holding, &flight);
        drop(holding);
        match owed {
            Some(owed) => owed.release_unheld(),
            None => self.lock.release_in_background(),
        }
    }
}

/// Takes the lease out of `shared` (at once, so that a held lock reads as released from now
/// on) and releases it, keeping why it was lost, if it was (found at the release too);
/// holding none, releases whatever acquisition the lockfile shows for `lock`'s owner (an
/// interrupted acquisition may have written it).
pub(crate) fn release_held(
    lock: Lock,
    shared: &Arc<Shared>,
) -> impl Future<Output = crate::Result<crate::ReleaseStatus>> + Send + 'static {
    let taken = shared.holding().lease.take();
    let shared = shared.clone();
    async move {
        match taken {
            Some(lease) => {
                let released = lease.release().await;
                let loss = lease.lost_reason();
                shared.holding().last_loss = loss.map(String::into_boxed_str);
                released
            }
            None => lock.release_unheld().await,
        }
    }
}

/// What the end of a block's release came to (`NativeLock.release_at_end`): the status
/// word, or what the caller is told of a release not answered in time (then going on in
/// the background).
pub(crate) type AtEnd = (Option<&'static str>, Option<String>);

/// The release at the end of a block whose work is done (`Lock::release_best_effort`),
/// waiting `patience` at most (`None`: the lock's own, `Timing::release_patience`); warned
/// about in the library's log when not answered and `warn`. Never a store error: without a
/// lease in hand, a failed release is told as one not answered.
pub(crate) fn release_at_end(
    lock: Lock,
    shared: &Arc<Shared>,
    patience: Option<std::time::Duration>,
    warn: bool,
) -> impl Future<Output = AtEnd> + Send + 'static {
    let taken = shared.holding().lease.take();
    let shared = shared.clone();
    async move {
        let patience = patience.unwrap_or_else(|| lock.timing().release_patience());
        let released = match taken {
            Some(lease) => {
                let released = lock.release_best_effort(lease.clone(), patience).await;
                let loss = lease.lost_reason();
                shared.holding().last_loss = loss.map(String::into_boxed_str);
                released
            }
            None => lock
                .release_unheld()
                .await
                .map_err(|e| crate::lease::Unanswered {
                    waited: std::time::Duration::ZERO,
                    error: Some(e.to_string()),
                    frees_in: lock.timing().expire,
                }),
        };
        match released {
            Ok(status) => (Some(status.as_str()), None),
            Err(unanswered) => {
                if warn {
                    unanswered.warn(lock.uri());
                }
                (None, Some(unanswered.to_string()))
            }
        }
    }
}
