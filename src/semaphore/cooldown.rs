//! The cooldown: a process that vacated a slot of a semaphore (released it, stopped renewing
//! it, or lost it) waits before it takes one again, so that waiters in other processes,
//! which find a freed slot only at their next poll, get it first. Without this, a process
//! that releases and acquires in a loop takes the slot back at once (its receipt of its own
//! release makes that one request) and can starve every waiter elsewhere (measured: a waiter
//! timed out after 15 s while a loop in another process took a slot of one 388 times).
//!
//! The cooldown is a waiter's longest poll interval (`poll_max`), counted from the vacating:
//! every waiter reads some slot within it. Where the store tells waiters in other processes
//! of a write at once (local files: `LockStore::watch`), they take a freed slot within
//! milliseconds, and the cooldown is the shortest poll (`poll_min`) instead: fair, and the
//! slots do not stand idle for a poll (`Semaphore::cooldown`). It is paid only by a process
//! acquiring again within that time of vacating a slot; waiters in the same process are
//! woken by the release at once and are not held back, nor is `try_acquire`, which never
//! waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// Where a semaphore keeps when this process last vacated one of its slots.
#[derive(Debug, Clone)]
pub(crate) enum Cooldown {
    /// Process-wide, under the semaphore's prefix (semaphores opened from a URI: users make
    /// a fresh one for every `with`).
    Process(Arc<str>),
    /// With this semaphore only (stores brought by tests and simulations, whose "processes"
    /// share one real process).
    Own(Arc<Mutex<Option<Instant>>>),
}

/// Prefixes remembered at most; beyond, an arbitrary one makes room (a miss only means no
/// cooldown, as before this table).
const KEEP: usize = 4096;

static VACATED: Mutex<Option<HashMap<Arc<str>, Instant>>> = Mutex::new(None);

impl Cooldown {
    /// Notes that this process vacated one of the semaphore's slots at `at`.
    pub(crate) fn vacated(&self, at: Instant) {
        match self {
            Cooldown::Own(own) => *own.lock().unwrap_or_else(|e| e.into_inner()) = Some(at),
            Cooldown::Process(prefix) => {
                let mut table = VACATED.lock().unwrap_or_else(|e| e.into_inner());
                let table = table.get_or_insert_with(HashMap::new);
                if table.len() >= KEEP && !table.contains_key(prefix) {
                    let some = table.keys().next().cloned();
                    some.map(|k| table.remove(&k));
                }
                table.insert(prefix.clone(), at);
            }
        }
    }

    /// When this process last vacated one of the semaphore's slots, if it did.
    pub(crate) fn last_vacated(&self) -> Option<Instant> {
        match self {
            Cooldown::Own(own) => *own.lock().unwrap_or_else(|e| e.into_inner()),
            Cooldown::Process(prefix) => {
                let table = VACATED.lock().unwrap_or_else(|e| e.into_inner());
                table.as_ref()?.get(prefix).copied()
            }
        }
    }
}
