//! Taking turns: a process that let go of a slot of a semaphore waits before it takes one
//! again, so that waiters in other processes, which find a freed slot only at their next
//! poll, get it first. Without this, a process that releases and acquires in a loop takes
//! the slot back at once (its record of its own release makes that one request) and can
//! starve every waiter elsewhere (measured: a waiter timed out after 15 s while a loop in
//! another process took a slot of one 388 times).
//!
//! The pause is a waiter's longest poll interval (`poll_max`), counted from the let-go:
//! every waiter reads some slot within it. Where the store tells waiters in other processes
//! of a write at once (local files: `LockStore::watch`), they take a freed slot within
//! milliseconds, and the pause is the shortest poll (`poll_min`) instead: fair, and the
//! slots do not stand idle for a poll (`Semaphore::turn`). It is paid only by a process
//! acquiring again within that time of its own let-go; waiters in the same process are
//! woken by the release at once and are not held back, nor is `try_acquire`, which never
//! waits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// Where a semaphore keeps when this process last let go of one of its slots.
#[derive(Debug, Clone)]
pub(crate) enum Turns {
    /// Process-wide, under the semaphore's prefix (semaphores opened from a URI: users make
    /// a fresh one for every `with`).
    Process(Arc<str>),
    /// With this semaphore only (stores brought by tests and simulations, whose "processes"
    /// share one real process).
    Own(Arc<Mutex<Option<Instant>>>),
}

/// Prefixes remembered at most; beyond, an arbitrary one makes room (a miss only means no
/// pause, as before this table).
const KEEP: usize = 4096;

static LET_GO: Mutex<Option<HashMap<Arc<str>, Instant>>> = Mutex::new(None);

impl Turns {
    /// Notes that this process let go of one of the semaphore's slots at `at`.
    pub(crate) fn let_go(&self, at: Instant) {
        match self {
            Turns::Own(own) => *own.lock().unwrap_or_else(|e| e.into_inner()) = Some(at),
            Turns::Process(prefix) => {
                let mut table = LET_GO.lock().unwrap_or_else(|e| e.into_inner());
                let table = table.get_or_insert_with(HashMap::new);
                if table.len() >= KEEP && !table.contains_key(prefix) {
                    let some = table.keys().next().cloned();
                    some.map(|k| table.remove(&k));
                }
                table.insert(prefix.clone(), at);
            }
        }
    }

    /// When this process last let go of one of the semaphore's slots, if it did.
    pub(crate) fn last_let_go(&self) -> Option<Instant> {
        match self {
            Turns::Own(own) => *own.lock().unwrap_or_else(|e| e.into_inner()),
            Turns::Process(prefix) => {
                let table = LET_GO.lock().unwrap_or_else(|e| e.into_inner());
                table.as_ref()?.get(prefix).copied()
            }
        }
    }
}
