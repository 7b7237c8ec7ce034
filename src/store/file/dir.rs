//! One lockfile's folder, and the synchronous calls on it: read, create (link), replace
//! (exchange or rename), update-if-match (compare and replace under the guards), and the
//! removal of stray temporary files. [`super::FileStore`] decides which thread runs them.

use super::folders;
use super::guard::{flock_guard, in_process_mutex, GUARD_NAME};
use super::place;
use super::version::{temp_path, version_of, TEMP_PREFIX, TEMP_SUFFIX};
use crate::errors::{Error, Result, StoreErrorKind};
use crate::lockfile::MAX_LOCKFILE_BYTES;
use crate::store::lock_store::{Snapshot, Version, Write};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::time::Duration;

/// What a [`super::FileStore`]'s calls share with the blocking pool.
#[derive(Debug)]
pub(super) struct LockDir {
    pub(super) path: PathBuf,
    pub(super) uri: String,
    /// How long an update waits for the guard file's lock before it fails (transiently):
    /// a process frozen while holding it (SIGSTOP, a VM pause) must not stall everyone.
    pub(super) guard_wait: Duration,
    /// Set once the file system refused an exchange (NFS): later writes rename at once.
    /// Only where [`LockDir::swap_in`] can exchange (nix has renameat2 on glibc only).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    no_exchange: AtomicBool,
    /// What the folder's file system is ([`super::place`]): [`place::UNKNOWN`] until the
    /// first call (on the pool) looks.
    pub(super) place: AtomicU8,
    /// Set at this store's first write, which removes stray temporary files unless this
    /// process did in the last [`STRAY_AGE`].
    strays_removed: AtomicBool,
    /// Calls running on the blocking pool: one goes on to its end even when its caller
    /// stopped waiting (a cancelled acquisition), and
    /// [`crate::store::LockStore::quiesced`] waits for it.
    pub(super) running: AtomicUsize,
    /// Notified when `running` falls to zero.
    pub(super) idle: tokio::sync::Notify,
    /// Whether writes are flushed to disk before they are published (results).
    pub(super) durable: bool,
    /// The guard file beside the lockfile ([`super::guard`]).
    pub(super) guard: PathBuf,
    /// This process's mutex for the path, and the generation of the process that looked it
    /// up: a lookup in the map of all paths hashes the whole path, on every update.
    local: OnceLock<(u64, Arc<Mutex<()>>)>,
}

/// How old a temporary file beside the lockfile must be to count as stray. Younger ones may
/// be another process's write in flight (a write takes microseconds; one frozen for longer
/// than this fails and is retried).
pub(super) const STRAY_AGE: Duration = Duration::from_secs(60);

impl LockDir {
    pub(super) fn new(path: PathBuf, uri: String, guard_wait: Duration) -> Self {
        let known = folders::place(path.parent().unwrap_or(Path::new("/")));
        LockDir {
            guard: path.with_file_name(GUARD_NAME),
            local: OnceLock::new(),
            path,
            uri,
            guard_wait,
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            no_exchange: AtomicBool::new(false),
            place: AtomicU8::new(known.unwrap_or(place::UNKNOWN)),
            strays_removed: AtomicBool::new(false),
            running: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
            durable: false,
        }
    }

    pub(super) fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("/"))
    }

    pub(super) fn read_sync(&self) -> Result<Option<Snapshot>> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.error(e, "reading")),
        };
        // The metadata first, to size the read: every write makes a new file, so the one
        // opened does not change under us. One byte past the limit is enough for the
        // decoder to refuse it.
        let meta = file.metadata().map_err(|e| self.error(e, "reading"))?;
        let bytes = read_to_end(&file, meta.len() as usize, MAX_LOCKFILE_BYTES + 1)
            .map_err(|e| self.error(e, "reading"))?;
        Ok(Some(Snapshot {
            version: version_of(&meta, &bytes),
            last_modified: meta
                .modified()
                .map(DateTime::<Utc>::from)
                .unwrap_or_else(|_| Utc::now()),
            bytes: Bytes::from(bytes),
        }))
    }

    /// Removes the temporary files that processes left beside the lockfile when they ended
    /// before their sweeper ([`super::sweeper`]) removed them: killed, or ended by
    /// `os._exit` (as multiprocessing's children are) within milliseconds of a write.
    fn remove_strays(&self) {
        let Ok(entries) = fs::read_dir(self.dir()) else {
            return;
        };
        let mut removed = 0;
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !(name.starts_with(TEMP_PREFIX) && name.ends_with(TEMP_SUFFIX)) {
                continue;
            }
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STRAY_AGE));
            if old && fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
        if removed > 0 {
            log::debug!("{}: removed {removed} stray temporary files", self.uri);
        }
    }

    /// Writes `body` to a fresh temporary file beside the lockfile.
    fn stage(&self, body: &[u8]) -> Result<(PathBuf, Version)> {
        if !self.strays_removed.swap(true, Ordering::Relaxed)
            && folders::sweep_due(self.dir(), STRAY_AGE)
        {
            self.remove_strays();
        }
        let dir = self.dir();
        let tmp = temp_path(dir);
        let open = || OpenOptions::new().write(true).create_new(true).open(&tmp);
        let mut file = open();
        if matches!(&file, Err(e) if e.kind() == io::ErrorKind::NotFound) {
            fs::create_dir_all(dir).map_err(|e| self.folder_error(e))?;
            file = open();
        }
        let mut f = file.map_err(|e| self.error(e, "writing"))?;
        let written = (|| {
            f.write_all(body)?;
            if self.durable {
                f.sync_all()?;
            }
            let meta = f.metadata()?;
            Ok::<_, io::Error>(version_of(&meta, body))
        })();
        match written {
            Ok(v) => Ok((tmp, v)),
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(self.error(e, "writing"))
            }
        }
    }

    pub(super) fn create_sync(&self, body: &[u8]) -> Result<Write> {
        let (tmp, version) = self.stage(body)?;
        let linked = fs::hard_link(&tmp, &self.path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) if self.durable => {
                // The new name too: a power loss must not leave the result unpublished
                // after this call said it was.
                File::open(self.dir())
                    .and_then(|d| d.sync_all())
                    .map_err(|e| self.error(e, "flushing the folder of"))?;
                Ok(Write::Done(version))
            }
            Ok(()) => Ok(Write::Done(version)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Ok(Write::Conflict { resent: false })
            }
            Err(e) => Err(self.error(e, "creating")),
        }
    }

    pub(super) fn replace(&self, body: &[u8]) -> Result<Version> {
        let (tmp, version) = self.stage(body)?;
        let swapped = match self.swap_in(&tmp) {
            Ok(true) => Ok(true),
            Ok(false) => fs::rename(&tmp, &self.path).map(|()| false),
            Err(e) => Err(e),
        };
        // After an exchange `tmp` holds the previous lockfile, which may go in a while
        // (nobody reads it); after a rename it is gone; after a failure it holds our body,
        // never to be used. Only a caller who waits hands the removal to the sweeper: on
        // the blocking pool (heartbeats) the pool's threads remove in parallel, where one
        // sweeper thread fell behind 10,000 locks renewing each second and they were lost.
        // Not on ext4 without a journal, where batches slow every later creation
        // ([`super::place`]).
        match swapped {
            Ok(true)
                if crate::runtime::driving()
                    && self.place.load(Ordering::Relaxed) != place::LOCAL_NO_JOURNAL =>
            {
                super::sweeper::remove_later(tmp)
            }
            Ok(true) => {
                let _ = fs::remove_file(&tmp);
            }
            Ok(false) => {}
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(self.error(e, "replacing"));
            }
        }
        Ok(version)
    }

    /// Exchanges `tmp` with the lockfile in one step, when the file system can: true if it
    /// did. Not a plain rename: a rename over an existing file makes ext4 flush the new
    /// file's data first (`auto_da_alloc`), about a millisecond a call; an exchange does not,
    /// and readers still see the old lockfile or the new one, never neither. NFS and other
    /// file systems without exchange (EINVAL), and a lockfile not there yet (ENOENT), take
    /// the rename.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn swap_in(&self, tmp: &Path) -> io::Result<bool> {
        use nix::errno::Errno;
        use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
        if self.no_exchange.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match renameat2(
            AT_FDCWD,
            tmp,
            AT_FDCWD,
            &self.path,
            RenameFlags::RENAME_EXCHANGE,
        ) {
            Ok(()) => Ok(true),
            Err(Errno::ENOENT) => Ok(false),
            Err(Errno::EINVAL | Errno::ENOSYS | Errno::EOPNOTSUPP) => {
                self.no_exchange.store(true, Ordering::Relaxed);
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    fn swap_in(&self, _tmp: &Path) -> io::Result<bool> {
        Ok(false)
    }

    pub(super) fn update_sync(&self, body: &[u8], expected: &Version) -> Result<Write> {
        self.guarded(|| self.compare_and_replace(body, expected))
    }

    /// Removes the lockfile if it is still at `expected`, under the same guards as an
    /// update, so that an updater holding the guard can only carry a version from before
    /// (its write then conflicts). The guard file stays: unlinking it would let a later
    /// updater lock a new one while an earlier one holds the old.
    pub(super) fn delete_if_sync(&self, expected: &Version) -> Result<bool> {
        self.guarded(|| match self.read_sync()? {
            Some(current) if &current.version == expected => match fs::remove_file(&self.path) {
                Ok(()) => Ok(true),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(self.error(e, "deleting")),
            },
            _ => Ok(false),
        })
    }

    /// Runs `step` while excluding other updaters of this lockfile: threads of this process
    /// through a mutex (flock alone does not promise that over NFS), other processes and
    /// hosts through the lock on `.lock.json.guard`. Locals drop in reverse order: the
    /// guard first.
    fn guarded<T>(&self, step: impl FnOnce() -> Result<T>) -> Result<T> {
        let local = self.local_mutex();
        let _local = local.lock().unwrap_or_else(|e| e.into_inner());
        match self.flock_guard(self.guard_wait)? {
            Some(_flock) => step(),
            None => Err(Error::Store {
                uri: self.uri.clone(),
                message: format!(
                    "the guard file beside {} stayed locked for {:.1}s (another process is updating it, or is frozen while doing so)",
                    self.path.display(),
                    self.guard_wait.as_secs_f64()
                ),
                kind: StoreErrorKind::Transient,
            }),
        }
    }

    /// [`LockDir::update_sync`] if no other thread or process is updating the lockfile right
    /// now, else `None` (without waiting).
    pub(super) fn try_update(&self, body: &[u8], expected: &Version) -> Option<Result<Write>> {
        let local = self.local_mutex();
        let _local = match local.try_lock() {
            Ok(held) => held,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        match self.flock_guard(Duration::ZERO) {
            Ok(Some(_flock)) => Some(self.compare_and_replace(body, expected)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }

    /// The guard file's lock (see [`flock_guard`]), its errors told as this lockfile's.
    fn flock_guard(&self, patience: Duration) -> Result<Option<File>> {
        flock_guard(&self.guard, patience).map_err(|(e, during)| self.error(e, during))
    }

    /// [`in_process_mutex`] for this lockfile, looked up once per process.
    fn local_mutex(&self) -> Arc<Mutex<()>> {
        let generation = crate::per_process::generation();
        let (looked_up_in, mutex) = self
            .local
            .get_or_init(|| (generation, in_process_mutex(&self.path)));
        if *looked_up_in == generation {
            mutex.clone()
        } else {
            in_process_mutex(&self.path) // a fork child's map is its own
        }
    }

    /// The update itself, under both guards.
    fn compare_and_replace(&self, body: &[u8], expected: &Version) -> Result<Write> {
        match self.read_sync()? {
            Some(current) if &current.version == expected => Ok(Write::Done(self.replace(body)?)),
            _ => Ok(Write::Conflict { resent: false }),
        }
    }
}

/// Reads `file` to its end, at most `limit` bytes, expecting `size` of them: one call when
/// the size is right (a read shorter than asked is a regular file's end, where
/// `read_to_end` asks once more to be sure), and on to the real end when the size was
/// stale (an NFS attribute cache) or the file grew since.
fn read_to_end(mut file: impl Read, size: usize, limit: usize) -> io::Result<Vec<u8>> {
    let mut bytes = vec![0; size.saturating_add(1).min(limit)];
    let mut got = 0;
    loop {
        match file.read(&mut bytes[got..]) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                if got < bytes.len() || got == limit {
                    break;
                }
                let more = (bytes.len() * 2).min(limit);
                bytes.resize(more, 0);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(got);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::read_to_end;

    #[test]
    fn a_lockfile_is_read_whole_whatever_its_metadata_said() {
        let body = vec![7u8; 1000];
        for size in [1000, 0, 10, 999, 5000] {
            assert_eq!(
                read_to_end(&body[..], size, 64 * 1024).unwrap(),
                body,
                "size {size}"
            );
        }
        // Past the limit: the limit's worth, for the decoder to refuse.
        assert_eq!(read_to_end(&body[..], 1000, 300).unwrap().len(), 300);
        assert_eq!(read_to_end(&body[..], 10, 300).unwrap().len(), 300);
    }
}
