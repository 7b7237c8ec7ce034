//! The one tokio runtime of the process: every heartbeat of every lock runs on it, and
//! blocking calls from other threads (the Python bindings, the CLI) drive their own futures
//! on its timers and I/O ([`drive`]).
//!
//! One per *process*: a child made by fork inherits the parent's runtime object but none of
//! its worker threads, so a task spawned there would never run. The child leaks the
//! parent's runtime (dropping it would wait for threads that do not exist) and starts its
//! own on first use.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use tokio::runtime::Runtime;

/// Threads for blocking calls (file calls, DNS lookups). Enough that a few calls hung on
/// an absent NFS server do not hold up the rest.
const BLOCKING_THREADS: usize = 32;

/// The shared runtime of this process, started on first use with two worker threads:
/// heartbeats are a few requests a minute each, so two threads carry thousands of locks.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    match *slot {
        Some((owner, rt)) if owner == pid => rt,
        _ => {
            let rt: &'static Runtime = Box::leak(Box::new(
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    // File calls run on the blocking pool. Tokio's default of 512 threads
                    // let 10,000 locks on files heartbeating each second grow it to the
                    // limit (515 threads, 33 KB a lock, most of it the threads' stacks and
                    // heaps, 196 µs of CPU a heartbeat); 64 threads: 7.1 KB, 167 µs; 16:
                    // 4.3 KB, 106 µs (bench/worker.py scale, on 2 cores).
                    .max_blocking_threads(BLOCKING_THREADS)
                    .thread_name("blob-lock")
                    .on_thread_start(|| ON_RUNTIME.with(|on| on.set(true)))
                    .enable_all()
                    .build()
                    .expect("cannot start the blob-lock runtime threads"),
            ));
            *slot = Some((pid, rt));
            rt
        }
    }
}

thread_local! {
    /// Set while this thread drives a future for a caller who waits for it ([`drive`]).
    static DRIVING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Set on the shared runtime's own threads (workers and blocking pool).
    static ON_RUNTIME: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `fut` to its end on the calling thread (not a runtime worker), on the shared
/// runtime's timers and I/O: a blocking call waits here anyway, and a hop to a worker and
/// back costs more than an acquisition on memory:// takes. Inside, [`driving`] is true, so
/// that the file store may run its calls right here instead of on the blocking pool.
pub fn drive<F: std::future::Future>(fut: F) -> F::Output {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            DRIVING.with(|d| d.set(self.0));
        }
    }
    let _reset = Reset(DRIVING.with(|d| d.replace(true)));
    runtime().block_on(fut)
}

/// True on a thread inside [`drive`]: a slow call here delays only the caller who waits for
/// it, whereas on a runtime worker it would delay every lock's heartbeat.
pub fn driving() -> bool {
    DRIVING.with(|d| d.get())
}

/// True where futures run on the shared runtime: its own threads, and a thread inside
/// [`drive`]. (Not in a caller's own runtime, such as a test's with paused time.)
pub fn on_shared_runtime() -> bool {
    driving() || ON_RUNTIME.with(|on| on.get())
}

/// A value of this process, made on first use (the sweeper, the starter). A child made by
/// fork makes its own: it has none of the parent's threads, which the parent's value may
/// rely on. And it never waits for the slot's mutex, which a parent thread may have held at
/// the fork: the child would wait for ever.
pub(crate) struct PerProcess<T> {
    slot: Mutex<Option<Arc<T>>>,
    /// The pid the value in `slot` was made by.
    owner: AtomicU32,
}

impl<T> PerProcess<T> {
    pub(crate) const fn new() -> Self {
        PerProcess {
            slot: Mutex::new(None),
            owner: AtomicU32::new(0),
        }
    }

    /// This process's value, if it made one.
    pub(crate) fn get(&self) -> Option<Arc<T>> {
        self.find(None::<fn() -> Option<Arc<T>>>)
    }

    /// This process's value, made by `make` if there is none yet. `None` if `make` gives
    /// none, in a child whose slot a parent thread held at the fork, and for a moment at
    /// first use, to a thread that finds another one making it.
    pub(crate) fn get_or_make(&self, make: impl FnOnce() -> Option<Arc<T>>) -> Option<Arc<T>> {
        self.find(Some(make))
    }

    fn find(&self, make: Option<impl FnOnce() -> Option<Arc<T>>>) -> Option<Arc<T>> {
        let pid = std::process::id();
        let mine = self.owner.load(Ordering::Acquire) == pid;
        if !mine && make.is_none() {
            return None;
        }
        let mut slot = if mine {
            self.slot.lock().unwrap_or_else(|e| e.into_inner())
        } else {
            match self.slot.try_lock() {
                Ok(slot) => slot,
                Err(TryLockError::Poisoned(e)) => e.into_inner(),
                Err(TryLockError::WouldBlock) => return None,
            }
        };
        if self.owner.load(Ordering::Acquire) != pid {
            *slot = Some(make?()?);
            self.owner.store(pid, Ordering::Release);
        }
        slot.clone()
    }
}
