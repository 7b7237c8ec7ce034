//! What a `NativeLock` holds: its lease, shared with its asyncio acquisitions, why the last
//! one was lost, and the acquisition in flight; and the steps that change it.

use crate::lease::{Cleanup, Lease, Lock};
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

/// What a NativeLock shares with its acquisitions, in one allocation (thousands of locks
/// are held): what it holds, and the number of the acquisition through it under way.
pub(crate) type Slot = Arc<Shared>;

#[derive(Default)]
pub(crate) struct Shared {
    holding: Mutex<Holding>,
    /// The acquisition under way through the NativeLock (0: none): one at a time.
    pub(crate) acquiring: AtomicU64,
}

impl Shared {
    pub(crate) fn holding(&self) -> MutexGuard<'_, Holding> {
        self.holding.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The lease a NativeLock holds, shared with its asyncio acquisitions, and why the last one
/// was lost (kept after its release, until the next acquisition).
#[derive(Default)]
pub(crate) struct Holding {
    pub(crate) lease: Option<Arc<Lease>>,
    pub(crate) last_loss: Option<Box<str>>,
    /// The asyncio acquisition running, if one is: `abandon` leaves what it owes there.
    /// (Boxed: it holds a clone of the lock, and only asyncio acquisitions set it.)
    pub(crate) in_flight: Option<Box<InFlight>>,
}

pub(crate) fn hold(slot: &Slot, lease: Lease) {
    let old = {
        let mut holding = slot.holding();
        holding.last_loss = None;
        holding.lease.replace(Arc::new(lease))
    };
    // Dropped after the mutex: dropping a lease may log, which takes the GIL, while a
    // thread holding the GIL may wait for this mutex (`held`).
    drop(old);
}

/// An asyncio acquisition under way ([`NativeLock::in_flight`]).
pub(crate) struct InFlight {
    /// Its number (as in `NativeLock::acquiring`).
    pub(crate) id: u64,
    /// Set by `abandon`: its caller is gone, so what it acquires or wrote is released.
    pub(crate) owed: Option<Cleanup>,
}

/// Where an asyncio acquisition ends: holds its lease, or, if it was abandoned meanwhile,
/// gives it back in the background. True if held.
pub(crate) fn settle(slot: &Slot, id: u64, acquired: Option<Lease>) -> bool {
    let mut holding = slot.holding();
    let owed = match holding.in_flight.take() {
        Some(f) if f.id == id => f.owed,
        other => {
            holding.in_flight = other;
            None
        }
    };
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

/// Takes the lease out of `slot` (at once, so that a held lock reads as released from now
/// on) and releases it, keeping why it was lost, if it was (found at the release too);
/// holding none, releases whatever acquisition the lockfile shows for `lock`'s owner (an
/// interrupted acquisition may have written it).
pub(crate) fn release_slot(
    lock: Lock,
    slot: &Slot,
) -> impl Future<Output = crate::Result<crate::ReleaseStatus>> + Send + 'static {
    let taken = slot.holding().lease.take();
    let slot = slot.clone();
    async move {
        match taken {
            Some(lease) => {
                let released = lease.release().await;
                let loss = lease.lost_reason();
                slot.holding().last_loss = loss.map(String::into_boxed_str);
                released
            }
            None => lock.release_unheld().await,
        }
    }
}
