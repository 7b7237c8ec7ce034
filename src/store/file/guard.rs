//! Who may update a lockfile at a time: threads of this process through a mutex per path,
//! other processes and hosts through an exclusive lock on `.lock.json.guard` beside the
//! lockfile: std's file lock, which is `flock` on Unix and `LockFileEx` on Windows.

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The guard file's name, beside the lockfile.
pub(super) const GUARD_NAME: &str = ".lock.json.guard";

/// The exclusive lock on the guard file at `guard` (held until the file is dropped), or
/// `None` if another holder kept it for `patience`. An error says what failed: opening the
/// guard file, or locking it.
pub(super) fn flock_guard(
    guard: &Path,
    patience: Duration,
) -> Result<Option<File>, (io::Error, &'static str)> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(guard)
        .map_err(|e| (e, "opening the guard file beside"))?;
    // Polled, not blocking: a file lock has no timeout of its own.
    let give_up = Instant::now() + patience;
    let mut pause = Duration::from_millis(1);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(Some(file)),
            Err(TryLockError::WouldBlock) if Instant::now() < give_up => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err((e, "locking the guard file beside")),
        }
    }
}

/// The mutex of this process for `path`. A child made by fork starts a fresh map: a parent
/// thread may have held one of the inherited mutexes in mid-update, for ever in the child.
pub(super) fn in_process_mutex(path: &Path) -> Arc<Mutex<()>> {
    type Mutexes = (u64, HashMap<PathBuf, Arc<Mutex<()>>>);
    static MUTEXES: OnceLock<Mutex<Mutexes>> = OnceLock::new();
    let mut guard = MUTEXES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (owner, map) = &mut *guard;
    let generation = crate::per_process::generation();
    if *owner != generation {
        *owner = generation;
        map.clear();
    }
    if let Some(mutex) = map.get(path) {
        return mutex.clone(); // without a copy of the path, as `entry` would make
    }
    map.entry(path.to_path_buf()).or_default().clone()
}
