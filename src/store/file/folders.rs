//! What this process has learned of the folders its lockfiles are in: whether a folder is on
//! a local file system (so calls may run on the caller's thread), and when its stray
//! temporary files were last removed. Users make a fresh lock object for every `with`; each
//! would otherwise pay, on its first call, a `statfs`, a listing of the folder and a hop to
//! the blocking pool.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

/// Folders remembered at most; beyond, an arbitrary one makes room (a miss only costs the
/// look a lock object without this table makes).
const KEEP: usize = 4096;

#[derive(Debug, Clone, Copy, Default)]
struct Folder {
    /// `dir::LOCAL` or `dir::REMOTE`; `dir::UNKNOWN` (0) until looked at.
    place: u8,
    /// When its stray temporary files were last removed.
    swept: Option<Instant>,
}

static TABLE: Mutex<Option<HashMap<PathBuf, Folder>>> = Mutex::new(None);

/// Where calls on lockfiles in `dir` may run, if this process looked before.
pub(super) fn place(dir: &Path) -> Option<u8> {
    let table = table()?;
    let place = table.as_ref()?.get(dir)?.place;
    (place != 0).then_some(place)
}

/// Notes where calls on lockfiles in `dir` may run.
pub(super) fn note_place(dir: &Path, place: u8) {
    update(dir, |f| f.place = place);
}

/// True (and noted as done now) when `dir`'s stray temporary files were not removed by this
/// process in the last `every`: files left since by processes that died are that old before
/// they count as stray anyway.
pub(super) fn sweep_due(dir: &Path, every: Duration) -> bool {
    let now = Instant::now();
    let mut due = true;
    update(dir, |f| {
        due = f.swept.is_none_or(|at| now.duration_since(at) >= every);
        if due {
            f.swept = Some(now);
        }
    });
    due
}

fn update(dir: &Path, change: impl FnOnce(&mut Folder)) {
    let Some(mut table) = table() else {
        change(&mut Folder::default()); // still decides, on its own
        return;
    };
    let table = table.get_or_insert_with(HashMap::new);
    if table.len() >= KEEP && !table.contains_key(dir) {
        let some = table.keys().next().cloned();
        some.map(|k| table.remove(&k));
    }
    change(table.entry(dir.to_path_buf()).or_default());
}

/// The table, unless another thread holds it: it only saves work, so nobody waits for it,
/// and a child made by fork whose parent had a thread inside it (the copied mutex stays
/// locked for ever) goes on without it.
fn table() -> Option<MutexGuard<'static, Option<HashMap<PathBuf, Folder>>>> {
    match TABLE.try_lock() {
        Ok(t) => Some(t),
        Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    }
}
