//! What our own last release of a lock left in the store: the released lockfile and its
//! version. The next acquisition of that lock in this process, through any `Lock` object,
//! first tries an update-if-match on that version: when nobody wrote since, that one request
//! acquires (instead of read and update), so a lock taken again and again costs two
//! requests per acquire and release, whether the caller keeps its lock object or makes a
//! fresh one each time. A stale record costs one refused request and is dropped.
//!
//! The record is safe to use by any owner: the update lands only on the exact version that
//! was released, which is free.

use crate::lockfile::LockFile;
use crate::store::Version;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, TryLockError};

/// A released lockfile and its version.
pub type Released = (LockFile, Version);

/// Where a lock keeps the record of its own last release.
#[derive(Debug, Clone)]
pub enum Record {
    /// In the process-wide table, under the lockfile's identity (locks opened from a URI).
    Process(Arc<str>),
    /// With this lock and its leases only (stores brought by tests and simulations, whose
    /// "processes" share one real process).
    Own(Arc<Mutex<Option<Box<Released>>>>),
}

impl Default for Record {
    fn default() -> Self {
        Record::Own(Default::default())
    }
}

/// Records kept at most; beyond, an arbitrary one makes room (a miss costs one request).
const KEEP: usize = 4096;

type Table = Option<HashMap<Arc<str>, Box<Released>>>;

static TABLE: Mutex<Table> = Mutex::new(None);

impl Record {
    /// Notes a release.
    pub fn set(&self, lf: LockFile, version: Version) {
        match self {
            Record::Own(slot) => {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::new((lf, version)))
            }
            Record::Process(key) => {
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

    /// Takes the record, if any: one acquisition uses it.
    pub fn take(&self) -> Option<Released> {
        let taken = match self {
            Record::Own(slot) => slot.lock().unwrap_or_else(|e| e.into_inner()).take(),
            Record::Process(key) => table()?.as_mut()?.remove(key),
        };
        taken.map(|b| *b)
    }
}

/// The table, unless another thread holds it: the record only saves requests, so nobody
/// waits for it, and a child made by fork whose parent had a thread inside it (the copied
/// mutex stays locked for ever) goes on without records.
fn table() -> Option<std::sync::MutexGuard<'static, Table>> {
    match TABLE.try_lock() {
        Ok(t) => Some(t),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}
