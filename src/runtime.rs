//! The one tokio runtime of the process: every heartbeat of every lock runs on it, and
//! blocking calls from other threads (the Python bindings, the CLI) wait on it.

use std::sync::OnceLock;
use tokio::runtime::Runtime;

/// The shared runtime, started on first use with two worker threads: heartbeats are a few
/// requests a minute each, so two threads carry thousands of locks.
pub fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("blob-lock")
            .enable_all()
            .build()
            .expect("cannot start the blob-lock runtime threads")
    })
}
