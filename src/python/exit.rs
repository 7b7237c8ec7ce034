//! What the package calls at interpreter exit: wait a moment for background releases, stop
//! awaitables, remove replaced lockfiles.

use super::asyncio;
use super::lock::NativeLock;
use pyo3::prelude::*;
use std::time::Duration;

/// Releases `locks` all at once, giving up after `within` seconds in all (called at
/// interpreter exit): in an outage, hundreds of held locks must not each wait their turn
/// for a store that does not answer. A lock not released by then expires by itself.
#[pyfunction]
pub(crate) fn release_all(py: Python<'_>, locks: Vec<PyRef<'_, NativeLock>>, within: f64) {
    let releases: Vec<_> = locks.iter().map(|lock| lock.releasing()).collect();
    drop(locks);
    let within = Duration::from_secs_f64(within.clamp(0.0, 60.0));
    let all = futures_util::future::join_all(releases);
    let ended = super::driver::wait(
        py,
        async move {
            let _ = tokio::time::timeout(within, all).await;
            Ok(())
        },
        None,
    );
    // An interrupt at exit (a second Ctrl-C) ends the wait: the rest expire by themselves.
    drop(ended);
}

/// Waits up to `timeout` seconds for the releases that interrupted acquisitions left running
/// in the background (called at interpreter exit).
#[pyfunction]
pub(crate) fn drain(py: Python<'_>, timeout: f64) {
    py.detach(|| crate::owed::drain(Duration::from_secs_f64(timeout.clamp(0.0, 60.0))));
}

/// From now on no blob-lock awaitable completes (called at interpreter exit).
#[pyfunction]
pub(crate) fn close_async() {
    asyncio::close();
}

/// Removes now the replaced lockfiles still queued for removal (called at interpreter exit,
/// after the releases).
#[pyfunction]
pub(crate) fn sweep(py: Python<'_>) {
    py.detach(crate::store::file::sweeper::flush);
}

/// From now on no runtime thread calls into Python: credential fetches are refused and log
/// records dropped (called last by blob-lock's exit hook: a call into Python from a thread
/// of ours while the interpreter finalizes aborts the process).
/// A credential fetch under way then has a few seconds to return.
/// What is queued for Python (log records, loss callbacks) is handed over here first.
#[pyfunction]
pub(crate) fn close_python_calls(py: Python<'_>) {
    super::to_python::close(py, Duration::from_secs(5));
    py.detach(|| super::credentials::close(Duration::from_secs(5)));
    super::logs::close();
}
