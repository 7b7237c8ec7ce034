//! `NativeKeepAlive`, the native side of `blob_lock.keep_alive`: a remote's renewal of its
//! orchestrator's lock.

use super::args::{loss_hook, options};
use super::asyncio::awaitable;
use super::credentials::{access, NativeCredentials};
use super::driver::wait;
use super::errors::to_py;
use crate::lease::{self, Lease};
use pyo3::prelude::*;
use std::collections::HashMap;
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

/// Starts keeping `owner`'s lock at `uri` alive.
#[pyfunction]
#[pyo3(signature = (uri, owner, *, storage_options, credentials=None, protocol, on_lost))]
pub(crate) fn keep_alive(
    py: Python<'_>,
    uri: &str,
    owner: &str,
    storage_options: Option<HashMap<String, String>>,
    credentials: Option<Bound<'_, NativeCredentials>>,
    protocol: &str,
    on_lost: Option<Py<PyAny>>,
) -> PyResult<NativeKeepAlive> {
    // The lockfile's own expire_s governs the heartbeat; this expire only sizes the client.
    let store = access(storage_options, credentials.as_ref());
    let mut opts = options(30.0, None, protocol, store, None, None)?;
    opts.on_lost = loss_hook(on_lost);
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
#[pyo3(signature = (uri, owner, *, storage_options, credentials=None, protocol, on_lost))]
pub(crate) fn keep_alive_async<'py>(
    py: Python<'py>,
    uri: &str,
    owner: &str,
    storage_options: Option<HashMap<String, String>>,
    credentials: Option<Bound<'_, NativeCredentials>>,
    protocol: &str,
    on_lost: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let store = access(storage_options, credentials.as_ref());
    let mut opts = options(30.0, None, protocol, store, None, None)?;
    opts.on_lost = loss_hook(on_lost);
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
