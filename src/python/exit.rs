//! What the package calls at interpreter exit: wait a moment for background releases, stop
//! awaitables, remove replaced lockfiles.

use super::asyncio;
use pyo3::prelude::*;
use std::time::Duration;

/// Waits up to `timeout` seconds for the releases that interrupted acquisitions left running
/// in the background (called at interpreter exit).
#[pyfunction]
pub(crate) fn drain(py: Python<'_>, timeout: f64) {
    py.detach(|| crate::cleanup::drain(Duration::from_secs_f64(timeout.clamp(0.0, 60.0))));
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
#[pyfunction]
pub(crate) fn close_python_calls(py: Python<'_>) {
    py.detach(|| super::credentials::close(Duration::from_secs(5)));
    super::logs::close();
}
