//! The one tokio runtime of the process: every heartbeat of every lock runs on it, and
//! blocking calls from other threads (the Python bindings, the CLI) wait on it.
//!
//! One per *process*: a child made by fork inherits the parent's runtime object but none of
//! its worker threads, so a task spawned there would never run. The child leaks the
//! parent's runtime (dropping it would wait for threads that do not exist) and starts its
//! own on first use.

use std::sync::Mutex;
use tokio::runtime::Runtime;

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
                    .thread_name("blob-lock")
                    .enable_all()
                    .build()
                    .expect("cannot start the blob-lock runtime threads"),
            ));
            *slot = Some((pid, rt));
            rt
        }
    }
}
