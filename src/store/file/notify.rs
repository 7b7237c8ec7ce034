//! Waiters on a lockfile on a local file system wake when another process writes it, from the
//! kernel's change notification (inotify on Linux), instead of at their next poll: a release
//! in another process is taken up within a millisecond. Polling stays as the fallback (NFS,
//! whose remote writers the kernel does not see; other platforms; inotify refused).
//!
//! One inotify instance and one thread per process (for the life of the process, from its
//! first wait on a local lockfile); one watch per folder that has waiters, removed when its
//! last waiter stops waiting.

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

use crate::per_process::PerProcess;

/// The name whose changes wake waiters (the lockfile; its folder holds one).
const WATCHED_NAME: &str = crate::lockfile::LOCKFILE_NAME;

struct Folder {
    /// One per waiter: spellings of one folder may have wakers of their own.
    wakes: Vec<Arc<Notify>>,
    wd: WatchDescriptor,
    /// Which watch of this folder this is: a folder removed and watched again is another.
    generation: u64,
}

struct Watcher {
    inotify: Inotify,
    folders: Mutex<HashMap<PathBuf, Folder>>,
    /// False once the thread stopped reading: new waiters poll.
    alive: AtomicBool,
}

/// This process's watcher; `None` where inotify cannot be had (too many instances, a
/// sandbox), and waiters poll.
static WATCHER: PerProcess<Option<Arc<Watcher>>> = PerProcess::new(start);

static GENERATIONS: AtomicU64 = AtomicU64::new(0);

fn start() -> Option<Arc<Watcher>> {
    let inotify = Inotify::init(InitFlags::IN_CLOEXEC)
        .map_err(|e| log::debug!("no file change notification (inotify: {e}); waiters poll"))
        .ok()?;
    let watcher = Arc::new(Watcher {
        inotify,
        folders: Mutex::new(HashMap::new()),
        alive: AtomicBool::new(true),
    });
    let reader = watcher.clone();
    crate::thread_signals::spawn("blob-lock-notify", move || reader.run())
        .map_err(|e| log::debug!("no file change notification thread ({e}); waiters poll"))
        .ok()?;
    Some(watcher)
}

impl Watcher {
    fn run(&self) {
        loop {
            let events = match self.inotify.read_events() {
                Ok(events) => events,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    // Waiters still poll; nothing else depends on this thread.
                    self.alive.store(false, Ordering::SeqCst);
                    log::warn!("file change notification stopped ({e}); waiters poll");
                    return;
                }
            };
            let mut folders = self.folders.lock().unwrap_or_else(|e| e.into_inner());
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    // Events were lost: wake everyone to look again.
                    folders.values().for_each(Folder::wake);
                    continue;
                }
                if event.mask.contains(AddWatchFlags::IN_IGNORED) {
                    // The folder is gone (or its file system unmounted): its waiters look
                    // again, and watch it anew if they wait on.
                    folders.retain(|_, f| {
                        let gone = f.wd == event.wd;
                        if gone {
                            f.wake();
                        }
                        !gone
                    });
                    continue;
                }
                if event.name.as_deref() != Some(WATCHED_NAME.as_ref()) {
                    continue;
                }
                // Two spellings of one folder (links, bind mounts) share its watch.
                for f in folders.values().filter(|f| f.wd == event.wd) {
                    f.wake();
                }
            }
        }
    }
}

impl Folder {
    fn wake(&self) {
        self.wakes.iter().for_each(|w| w.notify_waiters());
    }
}

/// A waiter's interest in a folder; dropping it ends that interest.
pub(super) struct Watch {
    watcher: Arc<Watcher>,
    dir: PathBuf,
    wake: Arc<Notify>,
    generation: u64,
    /// The process that watches: in a child made by fork, dropping it leaves the parent's
    /// watch (and its possibly held mutex) alone.
    pid: u32,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.pid != crate::per_process::pid() {
            return;
        }
        let mut folders = self
            .watcher
            .folders
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let Some(folder) = folders.get_mut(&self.dir) else {
            return;
        };
        if folder.generation != self.generation {
            return; // its watch ended with the folder; this is a newer one
        }
        if let Some(i) = folder.wakes.iter().position(|w| Arc::ptr_eq(w, &self.wake)) {
            folder.wakes.swap_remove(i);
        }
        if folder.wakes.is_empty() {
            let wd = folder.wd;
            folders.remove(&self.dir);
            if !folders.values().any(|f| f.wd == wd) {
                // Fails only when the folder is gone, which removed the watch already.
                let _ = self.watcher.inotify.rm_watch(wd);
            }
        }
    }
}

/// Wakes `wake`'s waiters whenever the lockfile in `dir` is written, removed or replaced,
/// until the returned watch is dropped. `None` where that cannot be had: waiters poll.
pub(super) fn watch(dir: &Path, wake: &Arc<Notify>) -> Option<Watch> {
    let watcher = WATCHER.get().clone()?;
    if !watcher.alive.load(Ordering::SeqCst) {
        return None;
    }
    let mut folders = watcher.folders.lock().unwrap_or_else(|e| e.into_inner());
    let generation = if let Some(folder) = folders.get_mut(dir) {
        folder.wakes.push(wake.clone());
        folder.generation
    } else {
        let mask = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_MOVED_FROM
            | AddWatchFlags::IN_DELETE
            | AddWatchFlags::IN_CLOSE_WRITE;
        let wd = watcher
            .inotify
            .add_watch(dir, mask)
            .map_err(|e| log::debug!("{}: no change notification ({e}); polling", dir.display()))
            .ok()?;
        let generation = GENERATIONS.fetch_add(1, Ordering::Relaxed);
        let wakes = vec![wake.clone()];
        folders.insert(
            dir.to_path_buf(),
            Folder {
                wakes,
                wd,
                generation,
            },
        );
        generation
    };
    drop(folders);
    Some(Watch {
        watcher,
        dir: dir.to_path_buf(),
        wake: wake.clone(),
        generation,
        pid: crate::per_process::pid(),
    })
}
