//! `NativeLockfile`: a lock seen from outside, by someone who does not hold it (`inspect`,
//! `wait_free`, `break_lock` and the CLI). It has no owner of its own and no options but the
//! store's: expiry is judged as a `BlobLock` with the default options would judge it.

use super::args::{outside_options, timeout};
use super::asyncio::awaitable;
use super::credentials::{access, NativeCredentials};
use super::driver::wait;
use super::errors::to_py;
use super::results::{self, NativeInspection, NativeLockfileFacts};
use crate::lease::Lock;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

#[pyclass(frozen, module = "blob_lock._blob_lock")]
pub(crate) struct NativeLockfile {
    lock: Arc<Lock>,
}

#[pymethods]
impl NativeLockfile {
    #[new]
    #[pyo3(signature = (uri, *, storage_options, credentials=None))]
    fn new(
        uri: &str,
        storage_options: Option<HashMap<String, String>>,
        credentials: Option<Bound<'_, NativeCredentials>>,
    ) -> PyResult<Self> {
        let opts = outside_options(access(storage_options, credentials.as_ref()))?;
        Ok(NativeLockfile {
            lock: Arc::new(Lock::new(uri, &opts).map_err(to_py)?),
        })
    }

    #[getter]
    fn uri(&self) -> &str {
        self.lock.uri()
    }

    /// Reads the lockfile once: what it shows.
    fn inspect(&self, py: Python<'_>) -> PyResult<NativeInspection> {
        let lock = self.lock.clone();
        let seen = wait(py, async move { lock.inspect().await }, None)?;
        Ok(NativeInspection::of(&seen))
    }

    /// `inspect` as an awaitable.
    fn inspect_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        awaitable(py, async move {
            let seen = lock.inspect().await.map_err(to_py)?;
            Ok(NativeInspection::of(&seen))
        })
    }

    /// Waits until the lock is free to take (takes nothing): what was seen last.
    /// LockTimeout, naming the holder, when `timeout` passes first.
    #[pyo3(signature = (timeout))]
    fn wait_free(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<NativeInspection> {
        let t = self::timeout(timeout)?;
        let lock = self.lock.clone();
        let seen = wait(py, async move { lock.wait_free(t).await }, None)?;
        Ok(NativeInspection::of(&seen))
    }

    /// `wait_free` as an awaitable.
    #[pyo3(signature = (timeout))]
    fn wait_free_async<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = self::timeout(timeout)?;
        let lock = self.lock.clone();
        awaitable(py, async move {
            let seen = lock.wait_free(t).await.map_err(to_py)?;
            Ok(NativeInspection::of(&seen))
        })
    }

    /// Marks the lock released whoever holds it, or only the acquisition that `owner` and
    /// `token` name (both or neither): `(outcome, the lockfile as found, or None)`.
    #[pyo3(signature = (owner=None, token=None))]
    fn break_lock(
        &self,
        py: Python<'_>,
        owner: Option<String>,
        token: Option<u64>,
    ) -> PyResult<(&'static str, Option<NativeLockfileFacts>)> {
        if owner.is_some() != token.is_some() {
            return Err(PyValueError::new_err(
                "break_lock: pass both owner and token (to break only that acquisition) or neither",
            ));
        }
        let lock = self.lock.clone();
        let broken = wait(
            py,
            async move {
                let expect = owner.as_deref().zip(token);
                lock.break_lock(expect).await
            },
            None,
        )?;
        Ok(results::broken(&broken))
    }
}
