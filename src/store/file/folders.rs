//! What this process has learned of the folders its lockfiles are in: whether a folder is on
//! a local file system (so calls may run on the caller's thread), and when its stray
//! temporary files were last removed. Users make a fresh lock object for every `with`; each
//! would otherwise pay, on its first call, a `statfs`, a listing of the folder and a hop to
//! the blocking pool.

use crate::per_process::PerProcess;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Folders remembered at most; beyond, an arbitrary one makes room (a miss only costs the
/// look a lock object without this table makes).
const KEEP: usize = 4096;

#[derive(Debug, Clone, Copy, Default)]
struct Folder {
    /// Its [`super::place`]; `place::UNKNOWN` (0) until looked at. Not looked at again:
    /// a folder remounted from a local to a network file system (or back) while this process
    /// runs is only slower (calls inline on NFS; a watch that polling backs up).
    place: u8,
    /// When its stray temporary files were last removed.
    swept: Option<Instant>,
}

/// Per process: a child made by fork starts with a table of its own (a parent thread may
/// have held this one's mutex at the fork).
static TABLE: PerProcess<Mutex<HashMap<PathBuf, Folder>>> = PerProcess::new(Default::default);

/// Where calls on lockfiles in `dir` may run, if this process looked before.
pub(super) fn place(dir: &Path) -> Option<u8> {
    let place = table().get(dir)?.place;
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
    let mut table = table();
    if table.len() >= KEEP && !table.contains_key(dir) {
        let some = table.keys().next().cloned();
        some.map(|k| table.remove(&k));
    }
    change(table.entry(dir.to_path_buf()).or_default());
}

fn table() -> MutexGuard<'static, HashMap<PathBuf, Folder>> {
    TABLE.get().lock().unwrap_or_else(|e| e.into_inner())
}
