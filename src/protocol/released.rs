//! What our own last release of a lock left in the store: the released lockfile and its
//! version, its **receipt** (a "record" is a log record only). The next acquisition of that lock in this process, through any `Lock` object,
//! first tries an update-if-match on that version: when nobody wrote since, that one request
//! acquires (instead of read and update), so a lock taken again and again costs two
//! requests per acquire and release, whether the caller keeps its lock object or makes a
//! fresh one each time. A stale receipt costs one refused request and is dropped.
//!
//! The receipt is safe to use by any owner: the update lands only on the exact version that
//! was released, which is free.
//!
//! Beside it, one guess: whether the last acquisition that had no receipt of its own found no
//! lockfile. New locks come in runs (a memo's lock per invocation, a lock per task), and a
//! new lock is taken in one request by creating it first (create and release: two), where
//! reading first costs three; a lock that exists costs a refused create more if created
//! first. So an acquisition without a receipt creates first while the last such one found
//! nothing, and reads first once one found a lockfile: a run of new locks costs two
//! requests each after its first, a run of existing ones three, and a change of run one
//! request more, once. The guess only orders requests: either way the same writes decide.
//!
//! And another: whether the last receipt an acquisition had was stale (someone wrote since
//! our release). Then the next acquisition with a receipt reads first instead of updating
//! the version in the receipt, and compares: a lock that another process takes between our
//! releases costs three requests each time (read, update, release) instead of four (a refused
//! update on top), and one taken again only here goes back to two after one read that
//! finds the receipt current.

use crate::lockfile::LockFile;
use crate::store::Version;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, TryLockError};

/// A released lockfile and its version.
pub type Released = (LockFile, Version);

/// Where a lock keeps the receipt of its own last release.
#[derive(Debug, Clone)]
pub enum Receipt {
    /// In the process-wide table, under the lockfile's identity (locks opened from a URI).
    Process(Arc<str>),
    /// With this lock and its leases only (stores brought by tests and simulations, whose
    /// "processes" share one real process).
    Own(Arc<Own>),
}

/// A lock's own receipt and guesses.
#[derive(Debug, Default)]
pub struct Own {
    released: Mutex<Option<Box<Released>>>,
    guesses: [AtomicBool; 2],
}

/// The guesses of the module's header, each what the last acquisition of its kind found.
#[derive(Debug, Clone, Copy)]
pub enum Guess {
    /// An acquisition with no receipt found no lockfile: the next such one creates first.
    New = 0,
    /// An acquisition's receipt was stale: the next one with a receipt reads first.
    Stale = 1,
}

/// The process-wide guesses: read first until a lock turns out new; trust a receipt until
/// one turns out stale.
static GUESSES: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

impl Default for Receipt {
    fn default() -> Self {
        Receipt::Own(Default::default())
    }
}

/// Receipts kept at most; beyond, an arbitrary one makes room (a miss costs one request).
const KEEP: usize = 4096;

type Table = Option<HashMap<Arc<str>, Box<Released>>>;

static TABLE: Mutex<Table> = Mutex::new(None);

impl Receipt {
    /// Notes a release.
    pub fn set(&self, lf: LockFile, version: Version) {
        match self {
            Receipt::Own(own) => {
                *own.released.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some(Box::new((lf, version)))
            }
            Receipt::Process(key) => {
                let Some(mut table) = table() else { return };
                let table = table.get_or_insert_with(HashMap::new);
                if table.len() >= KEEP && !table.contains_key(key) {
                    let some = table.keys().next().cloned();
                    some.map(|k| table.remove(&k));
                }
                table.insert(key.clone(), Box::new((lf, version)));
            }
        }
    }

    /// Takes the receipt, if any: one acquisition uses it.
    pub fn take(&self) -> Option<Released> {
        let taken = match self {
            Receipt::Own(own) => own
                .released
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
            Receipt::Process(key) => table()?.as_mut()?.remove(key),
        };
        taken.map(|b| *b)
    }

    /// What the last acquisition of `guess`'s kind found (see [`Guess`]).
    pub fn likely(&self, guess: Guess) -> bool {
        self.guess(guess).load(Ordering::Relaxed)
    }

    /// Notes what an acquisition of `guess`'s kind found.
    pub fn found(&self, guess: Guess, yes: bool) {
        self.guess(guess).store(yes, Ordering::Relaxed);
    }

    fn guess(&self, guess: Guess) -> &AtomicBool {
        match self {
            Receipt::Own(own) => &own.guesses[guess as usize],
            Receipt::Process(_) => &GUESSES[guess as usize],
        }
    }
}

/// The table, unless another thread holds it: the receipt only saves requests, so nobody
/// waits for it, and a child made by fork whose parent had a thread inside it (the copied
/// mutex stays locked for ever) goes on without receipts.
fn table() -> Option<std::sync::MutexGuard<'static, Table>> {
    match TABLE.try_lock() {
        Ok(t) => Some(t),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}
