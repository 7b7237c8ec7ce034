//! The one tokio runtime of the process: every heartbeat of every lock runs on it, and
//! blocking calls from other threads (the Python bindings, the CLI) drive their own futures
//! on its timers and I/O ([`drive`]).
//!
//! One per *process*: a child made by fork inherits the parent's runtime object but none of
//! its worker threads, so a task spawned there would never run. The child leaks the
//! parent's runtime (dropping it would wait for threads that do not exist) and starts its
//! own on first use.

use crate::per_process::PerProcess;
use tokio::runtime::Runtime;

/// Threads for blocking calls (file calls, DNS lookups). Enough that a few calls hung on
/// an absent NFS server do not hold up the rest.
const BLOCKING_THREADS: usize = 32;

/// The shared runtime of this process, started on first use with two worker threads:
/// heartbeats are a few requests a minute each, so two threads carry thousands of locks.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: PerProcess<Runtime> = PerProcess::new(start);
    RUNTIME.get()
}

fn start() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        // File calls run on the blocking pool. With tokio's default of 512 threads, thousands
        // of locks on files heartbeating at once would grow it to the limit, and the threads'
        // stacks would outweigh the locks.
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_name("blob-lock")
        .on_thread_start(|| {
            crate::thread_signals::leave_to_other_threads();
            ON_RUNTIME.with(|on| on.set(true));
        })
        .enable_all()
        .build()
        .expect("cannot start the blob-lock runtime threads")
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

/// True on the shared runtime's own threads (workers and blocking pool), which renew every
/// held lock: nothing there may wait for anything slow (in Python, for the GIL).
pub fn on_runtime_thread() -> bool {
    ON_RUNTIME.with(|on| on.get())
}

/// True where futures run on the shared runtime: its own threads, and a thread inside
/// [`drive`]. (Not in a caller's own runtime, such as a test's with paused time.)
pub fn on_shared_runtime() -> bool {
    driving() || ON_RUNTIME.with(|on| on.get())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use crate::thread_signals::tests::{bit, blocked};

    #[test]
    fn the_runtimes_threads_leave_signals_to_the_caller() {
        let runtime = super::runtime();
        let worker = runtime
            .block_on(runtime.spawn(async { blocked() }))
            .unwrap();
        assert_ne!(
            worker & bit(libc::SIGTERM),
            0,
            "a runtime worker takes SIGTERM: {worker:x}"
        );
        let pool = runtime.block_on(runtime.spawn_blocking(blocked)).unwrap();
        assert_ne!(
            pool & bit(libc::SIGINT),
            0,
            "a blocking-pool thread takes SIGINT: {pool:x}"
        );
    }
}
