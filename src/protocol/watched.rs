//! What this process has seen of the locks it waits for: the lockfile version each shows,
//! and since when (by the monotonic clock). An acquisition that finds the same version
//! still there counts from that earlier moment, not from its own first read. So waits cut
//! into pieces (single attempts polled again and again, as mops's lease waiter makes them,
//! or a wait that stops to check for a result between slices) take over an abandoned lock
//! once it has been unchanged for `expire`, as one long wait does, instead of only when its
//! last write is `expire + clock_skew` old by the wall clock.
//!
//! Sound because a version names one write: the same version at two reads means nothing
//! was written between them, whoever made the reads.

use crate::store::Version;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, TryLockError};
use tokio::time::Instant;

/// Where a lock keeps what it has seen of its lockfile between acquisitions.
#[derive(Debug, Clone, Default)]
pub enum Watched {
    /// Nowhere: each acquisition watches for itself (stores brought by tests and
    /// simulations, whose "processes" share one real process and its clock).
    #[default]
    Own,
    /// In the process-wide table, under the lockfile's identity (locks opened from a URI).
    Process(Arc<str>),
    /// In a cell of one lockfile that the locks given it share (each simulated process
    /// has one, on its own clock).
    Shared(Arc<Mutex<Option<(Version, Instant)>>>),
}

/// Lockfiles remembered at most; beyond, an arbitrary one makes room (a miss only means an
/// acquisition watches from its own first read, as without this table).
const KEEP: usize = 4096;

type Table = Option<HashMap<Arc<str>, (Version, Instant)>>;

static TABLE: Mutex<Table> = Mutex::new(None);

impl Watched {
    /// Since when this process has seen `version`, if it is the version it saw last.
    pub fn since(&self, version: &Version) -> Option<Instant> {
        let key = match self {
            Watched::Own => return None,
            Watched::Shared(cell) => {
                let cell = cell.lock().unwrap_or_else(|e| e.into_inner());
                let (seen, since) = cell.as_ref()?;
                return (seen == version).then_some(*since);
            }
            Watched::Process(key) => key,
        };
        let table = table()?;
        let (seen, since) = table.as_ref()?.get(key)?;
        (seen == version).then_some(*since)
    }

    /// Notes that `version` has been there since `since`.
    pub fn note(&self, version: &Version, since: Instant) {
        let key = match self {
            Watched::Own => return,
            Watched::Shared(cell) => {
                let mut cell = cell.lock().unwrap_or_else(|e| e.into_inner());
                if cell.as_ref().is_none_or(|(seen, _)| seen != version) {
                    *cell = Some((version.clone(), since));
                }
                return;
            }
            Watched::Process(key) => key,
        };
        let Some(mut table) = table() else { return };
        let table = table.get_or_insert_with(HashMap::new);
        if table.len() >= KEEP && !table.contains_key(key) {
            let some = table.keys().next().cloned();
            some.map(|k| table.remove(&k));
        }
        match table.get_mut(key) {
            Some((seen, _)) if seen == version => {}
            Some(entry) => *entry = (version.clone(), since),
            None => {
                table.insert(key.clone(), (version.clone(), since));
            }
        }
    }
}

/// The table, unless another thread holds it: it only shortens waits, so nobody waits for
/// it, and a child made by fork whose parent had a thread inside it (the copied mutex stays
/// locked for ever) goes on without it.
fn table() -> Option<std::sync::MutexGuard<'static, Table>> {
    match TABLE.try_lock() {
        Ok(t) => Some(t),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}
