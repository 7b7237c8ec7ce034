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
