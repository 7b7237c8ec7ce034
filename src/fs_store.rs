//! Lockfiles on a local or NFS file system, with the two conditional writes the cas protocol
//! needs. object_store's local store creates with a hard link but has no update-if-match, so
//! this module does both itself:
//!
//! - create-if-absent: write a unique temporary file, then `link(2)` it to `lock.json`. A link
//!   fails if the name exists, atomically, also over NFS (the primitive of flufl.lock).
//! - update-if-match: under an exclusive lock on a guard file beside the lockfile (flock,
//!   which Linux maps to fcntl locks on NFS), compare the current version with the expected
//!   one, then `rename(2)` a temporary file over the lockfile.
//!
//! Every write makes a new file (a new inode), so readers never see a torn lockfile. The
//! version is a digest of inode, mtime, size and content: any write changes it.

use crate::errors::{Error, Result, StoreErrorKind};
use crate::lockfile::MAX_LOCKFILE_BYTES;
use crate::store::{LockStore, Snapshot, Version, Write};
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
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A lockfile on a file system.
#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
    uri: String,
    /// How long an update waits for the guard file's lock before it fails (transiently):
    /// a process frozen while holding it (SIGSTOP, a VM pause) must not stall everyone.
    guard_wait: Duration,
}

impl FileStore {
    /// The lockfile at `path`; `uri` names it in messages. An update waits at most
    /// `guard_wait` for another process's update to finish.
    pub fn new(path: PathBuf, uri: String, guard_wait: Duration) -> Self {
        FileStore {
            path,
            uri,
            guard_wait,
        }
    }

    fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("/"))
    }

    fn error(&self, e: io::Error, during: &str) -> Error {
        let kind = match e.kind() {
            io::ErrorKind::PermissionDenied
            | io::ErrorKind::ReadOnlyFilesystem
            | io::ErrorKind::NotADirectory
            | io::ErrorKind::IsADirectory => StoreErrorKind::Permanent,
            _ => StoreErrorKind::Transient,
        };
        Error::Store {
            uri: self.uri.clone(),
            message: format!("{during} {} failed: {e}", self.path.display()),
            kind,
        }
    }

    fn read_sync(&self) -> Result<Option<Snapshot>> {
        let file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.error(e, "reading")),
        };
        let mut bytes = Vec::new();
        // One byte past the limit is enough for the decoder to refuse it.
        (&file)
            .take(MAX_LOCKFILE_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| self.error(e, "reading"))?;
        let meta = file.metadata().map_err(|e| self.error(e, "reading"))?;
        Ok(Some(Snapshot {
            version: version_of(&meta, &bytes),
            last_modified: meta
                .modified()
                .map(DateTime::<Utc>::from)
                .unwrap_or_else(|_| Utc::now()),
            bytes: Bytes::from(bytes),
        }))
    }

    /// Writes `body` to a fresh temporary file beside the lockfile.
    fn stage(&self, body: &[u8]) -> Result<(PathBuf, Version)> {
        let dir = self.dir();
        fs::create_dir_all(dir).map_err(|e| self.error(e, "creating the folder of"))?;
        let tmp = dir.join(format!(".lock.json.{}.tmp", uuid::Uuid::new_v4().simple()));
        let written = (|| {
            let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
            // Blocks allocated before the write: ext4 flushes a file with delayed-allocation
            // blocks when it is renamed over another (auto_da_alloc), which made each update
            // cost a millisecond. Stores without fallocate (some NFS) just skip it.
            let _ = nix::fcntl::fallocate(
                &f,
                nix::fcntl::FallocateFlags::empty(),
                0,
                body.len() as i64,
            );
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
        fs::rename(&tmp, &self.path).map_err(|e| {
            let _ = fs::remove_file(&tmp);
            self.error(e, "replacing")
        })?;
        Ok(version)
    }

    fn update_sync(&self, body: &[u8], expected: &Version) -> Result<Write> {
        // Excludes other updaters of this lockfile: threads of this process through a mutex
        // (flock alone does not promise that over NFS), other processes and hosts through
        // flock on `.lock.json.guard`. Locals drop in reverse order: flock first.
        let local = in_process_mutex(&self.path);
        let _local = local.lock().unwrap_or_else(|e| e.into_inner());
        let _flock = self.flock_guard()?;
        match self.read_sync()? {
            Some(current) if &current.version == expected => Ok(Write::Done(self.replace(body)?)),
            _ => Ok(Write::Conflict),
        }
    }

    fn flock_guard(&self) -> Result<Flock<File>> {
        let guard_path = self.dir().join(".lock.json.guard");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&guard_path)
            .map_err(|e| self.error(e, "opening the guard file beside"))?;
        // Polled, not blocking: flock has no timeout of its own.
        let give_up = Instant::now() + self.guard_wait;
        let mut file = file;
        let mut pause = Duration::from_millis(1);
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(guard) => return Ok(guard),
                Err((back, Errno::EWOULDBLOCK)) if Instant::now() < give_up => {
                    file = back;
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err((_, Errno::EWOULDBLOCK)) => {
                    return Err(Error::Store {
                        uri: self.uri.clone(),
                        message: format!(
                            "the guard file beside {} stayed locked for {:.1}s (another process is updating it, or is frozen while doing so)",
                            self.path.display(),
                            self.guard_wait.as_secs_f64()
                        ),
                        kind: StoreErrorKind::Transient,
                    })
                }
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
        let me = self.clone_light();
        blocking(move || me.read_sync()).await
    }

    async fn create(&self, body: Bytes) -> Result<Write> {
        let me = self.clone_light();
        blocking(move || me.create_sync(&body)).await
    }

    async fn update(&self, body: Bytes, expected: &Version) -> Result<Write> {
        let me = self.clone_light();
        let expected = expected.clone();
        blocking(move || me.update_sync(&body, &expected)).await
    }

    async fn overwrite(&self, body: Bytes) -> Result<Version> {
        let me = self.clone_light();
        blocking(move || me.replace(&body)).await
    }

    fn uri(&self) -> &str {
        &self.uri
    }

    async fn delete(&self) -> Result<()> {
        let me = self.clone_light();
        blocking(move || {
            for name in [me.path.clone(), me.dir().join(".lock.json.guard")] {
                match fs::remove_file(&name) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        return Err(me.error(e, "deleting"))
                    }
                    _ => {}
                }
            }
            let _ = fs::remove_dir(me.dir()); // only if empty: never anyone else's files
            Ok(())
        })
        .await
    }
}

impl FileStore {
    fn clone_light(&self) -> FileStore {
        FileStore {
            path: self.path.clone(),
            uri: self.uri.clone(),
            guard_wait: self.guard_wait,
        }
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}
