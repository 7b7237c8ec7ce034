//! Lockfiles on a local or NFS file system, with the two conditional writes the cas protocol
//! needs. object_store's local store creates with a hard link but has no update-if-match, so
//! this module does both itself:
//!
//! - create-if-absent: write a unique temporary file, then `link(2)` it to `lock.json`. A link
//!   fails if the name exists, atomically, also over NFS (the primitive of flufl.lock).
//! - update-if-match: under an exclusive lock on a guard file beside the lockfile (flock,
//!   which Linux maps to fcntl locks on NFS), compare the current version with the expected
//!   one, then exchange a temporary file with the lockfile (`renameat2`), or rename it over
//!   the lockfile where the file system cannot exchange.
//!
//! Every write makes a new file (a new inode), and a file once published as the lockfile is
//! never written again, so readers never see a torn lockfile. (Writing the replaced file
//! again as the next update's temporary file would save creating and removing one, more
//! than half an update's cost on ext4 (BENCHMARKS.md), but a reader that opened it as the
//! lockfile a moment
//! earlier, mops's among them, could read it half written.) A caller who waits leaves the
//! removal of the replaced file to [`crate::sweeper`]. The version is a digest of inode, mtime,
//! size and content: any write changes it.

use super::{LockStore, Snapshot, Version, Write};
use crate::errors::{Error, Result, StoreErrorKind};
use crate::lockfile::MAX_LOCKFILE_BYTES;
use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write as _};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::time::{Duration, Instant};

/// A lockfile on a file system.
///
/// Calls run on tokio's blocking pool: a file call can hang (an NFS server away, a stalled
/// disk) and must not stall the heartbeats of other locks on the runtime's two threads.
/// Except on a thread that drives a caller's own wait ([`crate::runtime::driving`]), when
/// the file system is known to be local (ext4, xfs, btrfs, tmpfs, overlayfs, f2fs): there a
/// slow call delays only that caller, and the pool's two thread hops are a noticeable part
/// of a local call's cost (BENCHMARKS.md). An update that would have to wait for another
/// updater goes to the pool all the same.
#[derive(Debug)]
pub struct FileStore {
    files: Arc<Files>,
}

/// What a [`FileStore`]'s calls share with the blocking pool.
#[derive(Debug)]
struct Files {
    path: PathBuf,
    uri: String,
    /// How long an update waits for the guard file's lock before it fails (transiently):
    /// a process frozen while holding it (SIGSTOP, a VM pause) must not stall everyone.
    guard_wait: Duration,
    /// Set once the file system refused an exchange (NFS): later writes rename at once.
    no_exchange: AtomicBool,
    /// Whether calls may run inline: [`UNKNOWN`] until the first call (on the pool) looks
    /// at the file system, then [`LOCAL`] or [`REMOTE`].
    place: AtomicU8,
    /// Set at this store's first write, which removes stray temporary files.
    strays_removed: AtomicBool,
    /// Calls running on the blocking pool: one goes on to its end even when its caller
    /// stopped waiting (a cancelled acquisition), and [`LockStore::quiesced`] waits for it.
    running: AtomicUsize,
    /// Notified when `running` falls to zero.
    idle: tokio::sync::Notify,
}

/// How old a temporary file beside the lockfile must be to count as stray. Younger ones may
/// be another process's write in flight (a write takes microseconds; one frozen for longer
/// than this fails and is retried).
const STRAY_AGE: Duration = Duration::from_secs(60);

const UNKNOWN: u8 = 0;
const LOCAL: u8 = 1;
const REMOTE: u8 = 2;

impl FileStore {
    /// The lockfile at `path`; `uri` names it in messages. An update waits at most
    /// `guard_wait` for another process's update to finish.
    pub fn new(path: PathBuf, uri: String, guard_wait: Duration) -> Self {
        FileStore {
            files: Arc::new(Files {
                path,
                uri,
                guard_wait,
                no_exchange: AtomicBool::new(false),
                place: AtomicU8::new(UNKNOWN),
                strays_removed: AtomicBool::new(false),
                running: AtomicUsize::new(0),
                idle: tokio::sync::Notify::new(),
            }),
        }
    }

    /// True where calls may run inline: on a caller's own thread, for a lockfile known to be
    /// on a local file system.
    fn inline(&self) -> bool {
        self.files.place.load(Ordering::Relaxed) == LOCAL && crate::runtime::driving()
    }

    /// Runs `call` on the blocking pool with this store's files; the first call also finds
    /// out where later calls may run (statfs, which can hang on NFS too).
    async fn blocking<T: Send + 'static>(
        &self,
        call: impl FnOnce(&Files) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let files = self.files.clone();
        files.running.fetch_add(1, Ordering::SeqCst);
        tokio::task::spawn_blocking(move || {
            struct Ended<'a>(&'a Files);
            impl Drop for Ended<'_> {
                fn drop(&mut self) {
                    if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
                        self.0.idle.notify_waiters();
                    }
                }
            }
            let _ended = Ended(&files);
            if files.place.load(Ordering::Relaxed) == UNKNOWN {
                files.place.store(files.where_to_run(), Ordering::Relaxed);
            }
            call(&files)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }
}

impl Files {
    /// [`LOCAL`] if the lockfile's folder (or its nearest existing ancestor) is on a file
    /// system known to be local, else [`REMOTE`].
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn where_to_run(&self) -> u8 {
        use nix::sys::statfs::{self as sfs, statfs};
        let local = [
            sfs::EXT4_SUPER_MAGIC, // also ext2 and ext3: one magic number
            sfs::XFS_SUPER_MAGIC,
            sfs::BTRFS_SUPER_MAGIC,
            sfs::TMPFS_MAGIC,
            sfs::OVERLAYFS_SUPER_MAGIC,
            sfs::F2FS_SUPER_MAGIC,
        ];
        match self.dir().ancestors().find_map(|d| statfs(d).ok()) {
            Some(fs) if local.contains(&fs.filesystem_type()) => LOCAL,
            _ => REMOTE,
        }
    }

    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn where_to_run(&self) -> u8 {
        REMOTE
    }

    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("/"))
    }

    fn error(&self, e: io::Error, during: &str) -> Error {
        // What waiting cannot fix fails at once; a full disk, a lack of file descriptors
        // or an NFS server away may pass.
        let errno = e.raw_os_error().map(Errno::from_raw);
        let permanent = matches!(
            errno,
            Some(
                Errno::ENAMETOOLONG
                    | Errno::ELOOP
                    | Errno::EACCES
                    | Errno::EPERM
                    | Errno::EROFS
                    | Errno::ENOTDIR
                    | Errno::EISDIR
                    | Errno::EINVAL
                    | Errno::EXDEV
            )
        ) || matches!(
            e.kind(),
            io::ErrorKind::PermissionDenied
                | io::ErrorKind::ReadOnlyFilesystem
                | io::ErrorKind::NotADirectory
                | io::ErrorKind::IsADirectory
                | io::ErrorKind::InvalidInput
                | io::ErrorKind::Unsupported
        );
        let kind = if permanent {
            StoreErrorKind::Permanent
        } else {
            StoreErrorKind::Transient
        };
        Error::Store {
            uri: self.uri.clone(),
            message: format!("{during} {} failed: {e}", self.path.display()),
            kind,
        }
    }

    /// The lock's folder cannot be made: a missing or forbidden ancestor (a path under
    /// /proc), which waiting will not fix; a full disk, a lack of descriptors or a network
    /// file system's hiccup may pass.
    fn folder_error(&self, e: io::Error) -> Error {
        let errno = e.raw_os_error().map(Errno::from_raw);
        let passing = matches!(
            errno,
            Some(
                Errno::ENOSPC
                    | Errno::EDQUOT
                    | Errno::EMFILE
                    | Errno::ENFILE
                    | Errno::EIO
                    | Errno::ENOMEM
                    | Errno::EINTR
                    | Errno::EAGAIN
                    | Errno::ETIMEDOUT
                    | Errno::ESTALE
                    | Errno::EBUSY
            )
        );
        match self.error(e, "creating the folder of") {
            Error::Store { uri, message, .. } if !passing => Error::Store {
                uri,
                message,
                kind: StoreErrorKind::Permanent,
            },
            other => other,
        }
    }

    fn read_sync(&self) -> Result<Option<Snapshot>> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.error(e, "reading")),
        };
        // The metadata first, to size the buffer: every write makes a new file, so the one
        // opened does not change under us. One byte past the limit is enough for the
        // decoder to refuse it.
        let meta = file.metadata().map_err(|e| self.error(e, "reading"))?;
        let limit = MAX_LOCKFILE_BYTES + 1;
        let mut bytes = Vec::with_capacity((meta.len() as usize).min(limit) + 1);
        (&file)
            .take(limit as u64)
            .read_to_end(&mut bytes)
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
    /// before their sweeper ([`crate::sweeper`]) removed them: killed, or ended by
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
        if !self.strays_removed.swap(true, Ordering::Relaxed) {
            self.remove_strays();
        }
        let dir = self.dir();
        let tmp = dir.join(temp_name());
        let open = || OpenOptions::new().write(true).create_new(true).open(&tmp);
        let mut file = open();
        if matches!(&file, Err(e) if e.kind() == io::ErrorKind::NotFound) {
            fs::create_dir_all(dir).map_err(|e| self.folder_error(e))?;
            file = open();
        }
        let mut f = file.map_err(|e| self.error(e, "writing"))?;
        let written = (|| {
            f.write_all(body)?;
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

    fn create_sync(&self, body: &[u8]) -> Result<Write> {
        let (tmp, version) = self.stage(body)?;
        let linked = fs::hard_link(&tmp, &self.path);
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(Write::Done(version)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(Write::Conflict),
            Err(e) => Err(self.error(e, "creating")),
        }
    }

    fn replace(&self, body: &[u8]) -> Result<Version> {
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
        match swapped {
            Ok(true) if crate::runtime::driving() => crate::sweeper::remove_later(tmp),
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

    fn update_sync(&self, body: &[u8], expected: &Version) -> Result<Write> {
        // Excludes other updaters of this lockfile: threads of this process through a mutex
        // (flock alone does not promise that over NFS), other processes and hosts through
        // flock on `.lock.json.guard`. Locals drop in reverse order: flock first.
        let local = in_process_mutex(&self.path);
        let _local = local.lock().unwrap_or_else(|e| e.into_inner());
        match self.flock_guard(self.guard_wait)? {
            Some(_flock) => self.compare_and_replace(body, expected),
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

    /// [`Files::update_sync`] if no other thread or process is updating the lockfile right
    /// now, else `None` (without waiting).
    fn try_update(&self, body: &[u8], expected: &Version) -> Option<Result<Write>> {
        let local = in_process_mutex(&self.path);
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

    /// The update itself, under both guards.
    fn compare_and_replace(&self, body: &[u8], expected: &Version) -> Result<Write> {
        match self.read_sync()? {
            Some(current) if &current.version == expected => Ok(Write::Done(self.replace(body)?)),
            _ => Ok(Write::Conflict),
        }
    }

    /// The exclusive lock on the guard file, or `None` if another holder kept it for
    /// `patience`.
    fn flock_guard(&self, patience: Duration) -> Result<Option<Flock<File>>> {
        let guard_path = self.dir().join(".lock.json.guard");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&guard_path)
            .map_err(|e| self.error(e, "opening the guard file beside"))?;
        // Polled, not blocking: flock has no timeout of its own.
        let give_up = Instant::now() + patience;
        let mut file = file;
        let mut pause = Duration::from_millis(1);
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(guard) => return Ok(Some(guard)),
                Err((back, Errno::EWOULDBLOCK)) if Instant::now() < give_up => {
                    file = back;
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err((_, Errno::EWOULDBLOCK)) => return Ok(None),
                Err((_, errno)) => {
                    return Err(self.error(errno.into(), "locking the guard file beside"))
                }
            }
        }
    }
}

/// The mutex of this process for `path`. A child made by fork starts a fresh map: a parent
/// thread may have held one of the inherited mutexes in mid-update, for ever in the child.
fn in_process_mutex(path: &Path) -> Arc<Mutex<()>> {
    type Mutexes = (u32, HashMap<PathBuf, Arc<Mutex<()>>>);
    static MUTEXES: OnceLock<Mutex<Mutexes>> = OnceLock::new();
    let mut guard = MUTEXES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (owner, map) = &mut *guard;
    let pid = std::process::id();
    if *owner != pid {
        *owner = pid;
        map.clear();
    }
    map.entry(path.to_path_buf()).or_default().clone()
}

/// A name for a temporary file, unique across processes and hosts sharing the folder: a
/// random prefix drawn once per process, the pid (a forked child inherits the prefix), and a
/// counter. Cheaper than a fresh UUID per write (one `getrandom` call less).
fn temp_name() -> String {
    static PREFIX: OnceLock<u64> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| uuid::Uuid::new_v4().as_u64_pair().0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{TEMP_PREFIX}{prefix:016x}-{:x}-{n:x}{TEMP_SUFFIX}",
        std::process::id()
    )
}

const TEMP_PREFIX: &str = ".lock.json.";
const TEMP_SUFFIX: &str = ".tmp";

fn version_of(meta: &fs::Metadata, content: &[u8]) -> Version {
    // FNV-1a: stable across builds and processes, unlike std's hasher.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in content {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    Version {
        e_tag: Some(format!(
            "{:x}-{:x}.{:x}-{:x}-{h:016x}",
            meta.ino(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.size()
        )),
        version: None,
    }
}

#[async_trait]
impl LockStore for FileStore {
    async fn read(&self) -> Result<Option<Snapshot>> {
        if self.inline() {
            return self.files.read_sync();
        }
        self.blocking(Files::read_sync).await
    }

    async fn create(&self, body: Bytes) -> Result<Write> {
        if self.inline() {
            return self.files.create_sync(&body);
        }
        self.blocking(move |f| f.create_sync(&body)).await
    }

    async fn update(&self, body: Bytes, expected: &Version) -> Result<Write> {
        if self.inline() {
            if let Some(done) = self.files.try_update(&body, expected) {
                return done;
            }
        }
        let expected = expected.clone();
        self.blocking(move |f| f.update_sync(&body, &expected))
            .await
    }

    async fn overwrite(&self, body: Bytes) -> Result<Version> {
        if self.inline() {
            return self.files.replace(&body);
        }
        self.blocking(move |f| f.replace(&body)).await
    }

    fn uri(&self) -> &str {
        &self.files.uri
    }

    fn identity(&self) -> String {
        self.files.path.display().to_string()
    }

    async fn quiesced(&self) {
        loop {
            let idle = self.files.idle.notified();
            if self.files.running.load(Ordering::SeqCst) == 0 {
                return;
            }
            idle.await;
        }
    }

    async fn delete(&self) -> Result<()> {
        self.blocking(|f| {
            // Our replaced lockfiles still queued for removal would keep the folder.
            crate::sweeper::flush();
            for name in [f.path.clone(), f.dir().join(".lock.json.guard")] {
                match fs::remove_file(&name) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        return Err(f.error(e, "deleting"))
                    }
                    _ => {}
                }
            }
            let _ = fs::remove_dir(f.dir()); // only if empty: never anyone else's files
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path) -> FileStore {
        FileStore::new(
            dir.join("lock").join("lock.json"),
            "file://test".into(),
            Duration::from_secs(5),
        )
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn readers_see_one_whole_lockfile_or_another_while_it_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(store(dir.path()));
        let body =
            |i: usize| Bytes::from(format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(i % 300)));
        let Write::Done(mut version) = store.create(body(0)).await.unwrap() else {
            panic!("a new lockfile is created")
        };
        let reader = {
            let store = store.clone();
            tokio::spawn(async move {
                let mut reads = 0;
                loop {
                    let seen = store.read().await.unwrap().expect("never missing");
                    let text = String::from_utf8(seen.bytes.to_vec()).unwrap();
                    assert!(
                        text.starts_with("{\"n\":") && text.ends_with("\"}"),
                        "{text}"
                    );
                    reads += 1;
                    if text.starts_with("{\"n\":2000,") {
                        return reads;
                    }
                }
            })
        };
        for i in 1..=2000 {
            match store.update(body(i), &version).await.unwrap() {
                Write::Done(v) => version = v,
                Write::Conflict => panic!("update {i} conflicted with no other writer"),
            }
        }
        assert!(reader.await.unwrap() > 0);
        let last = store.read().await.unwrap().unwrap();
        assert_eq!(
            last.version, version,
            "the version a write returns is the one read back"
        );
        let stale = Version {
            e_tag: Some("0-0.0-0-0".into()),
            version: None,
        };
        assert!(matches!(
            store.update(body(1), &stale).await.unwrap(),
            Write::Conflict
        ));
        assert_eq!(
            store.overwrite(body(7)).await.unwrap(),
            store.read().await.unwrap().unwrap().version
        );
        // No temporary file is left behind once the replaced ones are removed: only the
        // lockfile and the guard.
        crate::sweeper::flush();
        assert_eq!(
            names(&dir.path().join("lock")),
            [".lock.json.guard", "lock.json"]
        );
    }

    /// Heartbeats update on the blocking pool; they remove the replaced lockfile themselves,
    /// at once, rather than queue it for the sweeper's one thread (which fell behind
    /// 10,000 locks renewing each second).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_update_on_the_pool_removes_the_replaced_file_itself() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let Write::Done(mut version) = store.create(Bytes::from_static(b"{}")).await.unwrap()
        else {
            panic!("a new lockfile is created")
        };
        for i in 0..20 {
            let body = Bytes::from(format!("{{\"n\":{i}}}"));
            let Write::Done(v) = store.update(body, &version).await.unwrap() else {
                panic!("no other writer")
            };
            version = v;
            assert_eq!(
                names(&dir.path().join("lock")),
                [".lock.json.guard", "lock.json"],
                "nothing left for the sweeper"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_first_write_removes_old_stray_temporary_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("lock");
        fs::create_dir_all(&folder).unwrap();
        let stray = |name: &str, age: Duration| {
            let file = File::create(folder.join(name)).unwrap();
            file.set_modified(std::time::SystemTime::now() - age)
                .unwrap();
        };
        stray(".lock.json.0123456789abcdef-1f-0.tmp", STRAY_AGE * 2); // left by a dead process
        stray(".lock.json.0123456789abcdef-1f-1.tmp", Duration::ZERO); // a write in flight
        stray("result.tmp", STRAY_AGE * 2); // not ours
        let store = store(dir.path());
        let Write::Done(_) = store.create(Bytes::from_static(b"{}")).await.unwrap() else {
            panic!("a new lockfile is created")
        };
        assert_eq!(
            names(&folder),
            [
                ".lock.json.0123456789abcdef-1f-1.tmp",
                "lock.json",
                "result.tmp"
            ]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_overwrite_makes_a_missing_lockfile_and_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let version = store.overwrite(Bytes::from_static(b"{}")).await.unwrap();
        assert_eq!(store.read().await.unwrap().unwrap().version, version);
        assert_eq!(names(&dir.path().join("lock")), ["lock.json"]);
    }

    /// How long [`another_updater`] holds the guard.
    const HOLD: Duration = Duration::from_millis(300);

    /// Another process in the middle of an update: it holds the guard (from before this
    /// returns) for [`HOLD`].
    fn another_updater(dir: &Path) -> std::thread::JoinHandle<()> {
        let guard = File::create(dir.join("lock").join(".lock.json.guard")).unwrap();
        let held = Flock::lock(guard, FlockArg::LockExclusive).unwrap();
        std::thread::spawn(move || {
            std::thread::sleep(HOLD);
            drop(held);
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_update_waits_for_another_updater_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let Write::Done(version) = store.create(Bytes::from_static(b"{}")).await.unwrap() else {
            panic!("a new lockfile is created")
        };
        let other = another_updater(dir.path());
        let started = Instant::now();
        let done = store
            .update(Bytes::from_static(b"{\"n\":1}"), &version)
            .await
            .unwrap();
        assert!(matches!(done, Write::Done(_)));
        assert!(
            started.elapsed() >= HOLD - Duration::from_millis(50),
            "it waited for the guard"
        );
        other.join().unwrap();
    }

    #[test]
    fn on_a_callers_own_thread_an_update_still_waits_for_another_updater() {
        use crate::runtime::drive;
        let dir = tempfile::tempdir().unwrap();
        let store = store(dir.path());
        let Write::Done(version) = drive(store.create(Bytes::from_static(b"{}"))).unwrap() else {
            panic!("a new lockfile is created")
        };
        // The first call looked at the file system; from now on calls driven here run here
        // if it is local, never on a runtime worker.
        let local = store.files.place.load(Ordering::Relaxed) == LOCAL;
        assert_eq!(drive(async { store.inline() }), local);
        assert!(
            !store.inline(),
            "not on a thread that drives a caller's wait"
        );
        let other = another_updater(dir.path());
        let started = Instant::now();
        let done = drive(store.update(Bytes::from_static(b"{\"n\":1}"), &version)).unwrap();
        assert!(matches!(done, Write::Done(_)));
        assert!(
            started.elapsed() >= HOLD - Duration::from_millis(50),
            "it waited for the guard"
        );
        other.join().unwrap();
    }

    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[test]
    fn calls_run_inline_only_on_file_systems_known_to_be_local() {
        let on = |dir: &str| Files {
            path: Path::new(dir).join("lock").join("lock.json"),
            uri: String::new(),
            guard_wait: Duration::ZERO,
            no_exchange: AtomicBool::new(false),
            place: AtomicU8::new(UNKNOWN),
            strays_removed: AtomicBool::new(false),
            running: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
        };
        assert_eq!(on("/dev/shm").where_to_run(), LOCAL, "tmpfs is local");
        // procfs stands for any file system not on the list (NFS, SMB, FUSE).
        assert_eq!(on("/proc/self").where_to_run(), REMOTE);
    }
}
