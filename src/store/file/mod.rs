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
//! than half an update's cost on ext4, but a reader that opened it as the lockfile a moment
//! earlier, mops's among them, could read it half written.) A caller who waits leaves the
//! removal of the replaced file to [`sweeper`], except on ext4 without a journal (`place`).
//! The version is a digest of inode, mtime, size and content: any write changes it.

//!
//! Rooms: this file is the async face (which thread a call runs on); `dir` the
//! synchronous writes on one lockfile's folder; `place` what kind of file system a folder is
//! on; `folders` what the process learned of each folder; `notify` the wake-up of waiters
//! when another process writes; `guard` the exclusion of updaters; `version` what tells
//! one write from another, and temporary files' names; `errors` what an I/O error means;
//! [`sweeper`] the removal of replaced lockfiles.

mod dir;
mod errors;
mod folders;
mod guard;
#[cfg(any(target_os = "linux", target_os = "android"))]
mod notify;
mod place;
pub mod sweeper;
#[cfg(test)]
mod tests;
mod version;

use crate::errors::Result;
use crate::store::lock_store::{LockStore, Snapshot, Version, Write};
use async_trait::async_trait;
use bytes::Bytes;
use dir::LockDir;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use std::{fs, io};

/// A lockfile on a file system.
///
/// Calls run on tokio's blocking pool: a file call can hang (an NFS server away, a stalled
/// disk) and must not stall the heartbeats of other locks on the runtime's two threads.
/// Except on a thread that drives a caller's own wait ([`crate::runtime::driving`]), when
/// the file system is known to be local (ext4, xfs, btrfs, tmpfs, overlayfs, f2fs): there a
/// slow call delays only that caller, and the pool's two thread hops are a noticeable part
/// of a local call's cost. An update that would have to wait for another
/// updater goes to the pool all the same.
#[derive(Debug)]
pub struct FileStore {
    files: Arc<LockDir>,
}

impl FileStore {
    /// The lockfile at `path`; `uri` names it in messages. An update waits at most
    /// `guard_wait` for another process's update to finish.
    pub fn new(path: PathBuf, uri: String, guard_wait: Duration) -> Self {
        FileStore {
            files: Arc::new(LockDir::new(path, uri, guard_wait)),
        }
    }

    /// A file whose writes are flushed to disk before they are published, and its folder
    /// after: for results (`write_once`), which a power loss must not leave empty. Lockfiles
    /// do without: each costs milliseconds, and a lockfile is rewritten every heartbeat.
    pub fn durable(path: PathBuf, uri: String, guard_wait: Duration) -> Self {
        let mut dir = LockDir::new(path, uri, guard_wait);
        dir.durable = true;
        FileStore {
            files: Arc::new(dir),
        }
    }

    /// True where calls may run inline: on a caller's own thread, for a lockfile known to be
    /// on a local file system.
    fn inline(&self) -> bool {
        place::is_local(self.files.place.load(Ordering::Relaxed)) && crate::runtime::driving()
    }

    /// Runs `call` on the blocking pool with this store's files; the first call also finds
    /// out where later calls may run (statfs, which can hang on NFS too).
    async fn blocking<T: Send + 'static>(
        &self,
        call: impl FnOnce(&LockDir) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let files = self.files.clone();
        files.running.fetch_add(1, Ordering::SeqCst);
        tokio::task::spawn_blocking(move || {
            struct Ended<'a>(&'a LockDir);
            impl Drop for Ended<'_> {
                fn drop(&mut self) {
                    if self.0.running.fetch_sub(1, Ordering::SeqCst) == 1 {
                        self.0.idle.notify_waiters();
                    }
                }
            }
            let _ended = Ended(&files);
            if files.place.load(Ordering::Relaxed) == place::UNKNOWN {
                let place = place::of(files.dir());
                files.place.store(place, Ordering::Relaxed);
                folders::note_place(files.dir(), place);
            }
            call(&files)
        })
        .await
        .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }
}

#[async_trait]
impl LockStore for FileStore {
    /// Conditional by construction: creates are exclusive, updates compare under the guard.
    async fn conditional_writes(&self, _required: bool) -> Result<bool> {
        Ok(true)
    }

    fn known_conditional_writes(&self) -> Option<bool> {
        Some(true)
    }

    async fn read(&self) -> Result<Option<Snapshot>> {
        if self.inline() {
            return self.files.read_sync();
        }
        self.blocking(LockDir::read_sync).await
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

    fn identity(&self) -> Arc<str> {
        self.files.path.display().to_string().into()
    }

    /// On a local file system only: the kernel does not see an NFS server's other clients.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn watch(
        &self,
        wake: &Arc<tokio::sync::Notify>,
    ) -> Option<Box<dyn std::any::Any + Send + Sync>> {
        if !place::is_local(self.files.place.load(Ordering::Relaxed)) {
            return None;
        }
        let watch = notify::watch(self.files.dir(), wake)?;
        Some(Box::new(watch))
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

    async fn delete_if(&self, expected: &Version) -> Result<bool> {
        let expected = expected.clone();
        self.blocking(move |f| f.delete_if_sync(&expected)).await
    }

    async fn conditional_deletes(&self) -> std::result::Result<(), String> {
        Ok(()) // under the update guard
    }

    async fn delete(&self) -> Result<()> {
        self.blocking(|f| {
            // Our replaced lockfiles still queued for removal would keep the folder.
            sweeper::flush();
            for name in [&f.path, &f.guard] {
                match fs::remove_file(name) {
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
