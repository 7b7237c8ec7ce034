//! The files that lockfile exchanges leave behind, removed on a thread of their own.
//!
//! An update of a lockfile on a local file system exchanges a new file with the lockfile,
//! which leaves the previous lockfile under the new file's temporary name
//! ([`super`]). Removing it frees an inode, a fair part of an update's cost on
//! ext4, and an acquire+release does two updates.
//! The caller of a lock need not wait for it: the name goes on a queue here, and a thread
//! removes what gathered every few milliseconds, so that one wake-up serves a batch.
//! (Heartbeats, on the blocking pool, remove their own: one thread cannot keep up with
//! thousands of file locks renewing at once. So do callers on ext4 without a journal, where
//! removals in batches slow every later file creation: `place`.)
//!
//! A process that ends before its batch is removed leaves those files behind: names
//! `.lock.json.*.tmp` beside the lockfile, each holding an earlier lockfile, read by
//! nobody. [`flush`] removes what is queued at once: the Python package calls it at exit,
//! and a Rust program should before it exits. What is left all the same (a process killed,
//! or ended by `os._exit`) the next process to write that lockfile removes once it is a
//! minute old ([`super`]).

use crate::per_process::PerProcess;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// How long the thread gathers names after the first one before it removes them.
const GATHER: Duration = Duration::from_millis(2);

/// How long [`flush`] waits for a batch the thread is removing: at exit, a hung file system
/// must not hang the process.
const FLUSH_PATIENCE: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Queue {
    names: Vec<PathBuf>,
    /// The thread waits for a first name, and must be woken for it.
    waiting: bool,
    /// Names the thread took off the queue and has not removed yet.
    in_hand: usize,
}

#[derive(Default)]
struct Sweeper {
    queue: Mutex<Queue>,
    /// A first name for a waiting thread.
    work: Condvar,
    /// A batch removed, for [`flush`].
    done: Condvar,
}

impl Sweeper {
    fn queue(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn run(&self) {
        let mut queue = self.queue();
        loop {
            while queue.names.is_empty() {
                queue.waiting = true;
                queue = self.work.wait(queue).unwrap_or_else(|e| e.into_inner());
            }
            queue.waiting = false;
            drop(queue);
            std::thread::sleep(GATHER);
            queue = self.queue();
            let batch = std::mem::take(&mut queue.names);
            queue.in_hand = batch.len();
            drop(queue);
            remove(&batch);
            queue = self.queue();
            queue.in_hand = 0;
            self.done.notify_all();
        }
    }
}

fn remove(names: &[PathBuf]) {
    for name in names {
        // Gone already is fine; anything else leaves a stray file and nothing worse.
        if let Err(e) = std::fs::remove_file(name) {
            if e.kind() != std::io::ErrorKind::NotFound {
                log::debug!("cannot remove {}: {e}", name.display());
            }
        }
    }
}

/// This process's sweeper, made on first use. A child made by fork makes its own: it
/// inherits the parent's queue (the parent's thread removes those names) but not the thread.
static SWEEPER: PerProcess<Option<Arc<Sweeper>>> = PerProcess::new(start_sweeper);

/// A sweeper with its thread running; `None` if the thread cannot start.
fn start_sweeper() -> Option<Arc<Sweeper>> {
    let sweeper = Arc::<Sweeper>::default();
    let thread = sweeper.clone();
    crate::thread_signals::spawn("blob-lock-sweep", move || thread.run()).ok()?;
    Some(sweeper)
}

/// Removes `name` soon, on the sweeper's thread (at once on this one if that thread cannot
/// start).
pub(crate) fn remove_later(name: PathBuf) {
    let Some(sweeper) = SWEEPER.get() else {
        remove(&[name]);
        return;
    };
    let mut queue = sweeper.queue();
    queue.names.push(name);
    if queue.waiting {
        queue.waiting = false;
        sweeper.work.notify_one();
    }
}

/// Removes now every file still queued for removal, and waits (a few seconds at most) for
/// those the sweeper's thread is removing. Call it before a process exits, or before a test
/// counts the files beside a lockfile.
pub fn flush() {
    let Some(sweeper) = SWEEPER.made().and_then(Option::as_ref) else {
        return;
    };
    let batch = std::mem::take(&mut sweeper.queue().names);
    remove(&batch);
    let queue = sweeper.queue();
    let _ = sweeper
        .done
        .wait_timeout_while(queue, FLUSH_PATIENCE, |q| q.in_hand > 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn count(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    #[test]
    fn queued_files_are_removed_by_the_thread_and_by_flush() {
        let dir = tempfile::tempdir().unwrap();
        let make = |i: usize| {
            let name = dir.path().join(format!("f{i}"));
            std::fs::write(&name, b"x").unwrap();
            name
        };
        for i in 0..100 {
            remove_later(make(i));
        }
        // The thread removes them without being asked (a generous liveness bound).
        let until = Instant::now() + Duration::from_secs(10);
        while count(dir.path()) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(count(dir.path()), 0, "the sweeper's thread removed them");

        // And flush removes at once what is queued or in the thread's hands.
        for i in 0..100 {
            remove_later(make(i));
        }
        flush();
        assert_eq!(count(dir.path()), 0, "flush left none");
    }
}
