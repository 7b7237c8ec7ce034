//! `NativeKeepAlive`, the native side of `blob_lock.keep_alive`: a remote's renewal of its
//! orchestrator's lock.

use super::asyncio::awaitable;
use super::driver::wait;
use super::errors::to_py;
use super::options;
use crate::lease::{self, Lease};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

/// The native handle behind `blob_lock.keep_alive`.
#[pyclass(frozen, module = "blob_lock._blob_lock")]
pub(crate) struct NativeKeepAlive {
    lease: Arc<Lease>,
    uri: String,
}

#[pymethods]
impl NativeKeepAlive {
    /// Leaks this object in a child made by fork (see `NativeLock::for_child`).
    fn leak_in_child(slf: &Bound<'_, Self>) {
        std::mem::forget(slf.clone().unbind());
    }

    /// Stops heartbeating (never releases).
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let lease = self.lease.clone();
        wait(
            py,
            async move {
                lease.stop().await;
                Ok(())
            },
            None,
        )
    }

    /// `stop` as an awaitable.
    fn stop_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lease = self.lease.clone();
        awaitable(py, async move {
            lease.stop().await;
            Ok(())
        })
    }

    #[getter]
    fn owner(&self) -> &str {
        self.lease.owner()
    }

    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    #[getter]
    fn token(&self) -> u64 {
        self.lease.token()
    }

    #[getter]
    fn lost(&self) -> bool {
        self.lease.is_lost()
    }

    #[getter]
    fn lost_reason(&self) -> Option<String> {
        self.lease.lost_reason()
    }
}

/// The options a remote gives: the lockfile's own `expire_s` governs the heartbeat, so the
/// timing options are the orchestrator's, not the remote's.
pub(crate) const KEEP_ALIVE_TAKES: &[&str] = &[
    "protocol",
    "storage_options",
    "credential_provider",
    "on_lost",
];

/// `keep_alive`'s options, parsed and checked before anything starts.
#[pyclass(frozen, module = "blob_lock._blob_lock")]
pub(crate) struct KeepAliveOptions(crate::lease::LockOptions);

/// Parses `keep_alive`'s keyword arguments for the lock at `uri`.
#[pyfunction]
#[pyo3(signature = (uri, options=None))]
pub(crate) fn keep_alive_options(
    py: Python<'_>,
    uri: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<KeepAliveOptions> {
    let parsed = options::parse(py, uri, options, "keep_alive", Some(KEEP_ALIVE_TAKES))?;
    Ok(KeepAliveOptions(parsed.lock_options()?))
}

/// Starts keeping `owner`'s lock at `uri` alive.
#[pyfunction]
pub(crate) fn keep_alive(
    py: Python<'_>,
    uri: &str,
    owner: &str,
    options: &KeepAliveOptions,
) -> PyResult<NativeKeepAlive> {
    let opts = options.0.clone();
    let (uri_owned, owner) = (uri.to_string(), owner.to_string());
    let lease = wait(
        py,
        async move { lease::keep_alive(&uri_owned, &owner, &opts).await },
        None,
    )?;
    Ok(NativeKeepAlive {
        lease: Arc::new(lease),
        uri: uri.to_string(),
    })
}

/// `keep_alive` as an awaitable.
#[pyfunction]
pub(crate) fn keep_alive_async<'py>(
    py: Python<'py>,
    uri: &str,
    owner: &str,
    options: &KeepAliveOptions,
) -> PyResult<Bound<'py, PyAny>> {
    let opts = options.0.clone();
    let (uri, owner) = (uri.to_string(), owner.to_string());
    awaitable(py, async move {
        let lease = lease::keep_alive(&uri, &owner, &opts)
            .await
            .map_err(to_py)?;
        Ok(NativeKeepAlive {
            lease: Arc::new(lease),
            uri,
        })
    })
}
