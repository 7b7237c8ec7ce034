//! `write_once`: a result published with a create-if-absent write (see `crate::write_once`).

use super::args::outside_options;
use super::asyncio::awaitable;
use super::credentials::{access, NativeCredentials};
use super::driver::wait;
use super::errors::to_py;
use bytes::Bytes;
use pyo3::prelude::*;
use std::collections::HashMap;

/// Writes `data` to `uri` only if nothing is there: True if this call wrote it.
#[pyfunction]
#[pyo3(signature = (uri, data, *, storage_options, credentials=None))]
pub(crate) fn write_once(
    py: Python<'_>,
    uri: &str,
    data: &[u8],
    storage_options: Option<HashMap<String, String>>,
    credentials: Option<Bound<'_, NativeCredentials>>,
) -> PyResult<bool> {
    let opts = outside_options(access(storage_options, credentials.as_ref()))?;
    let (uri, data) = (uri.to_string(), Bytes::copy_from_slice(data));
    wait(
        py,
        async move { crate::write_once(&uri, data, &opts.store, &opts.timing).await },
        None,
    )
}

/// `write_once` as an awaitable.
#[pyfunction]
#[pyo3(signature = (uri, data, *, storage_options, credentials=None))]
pub(crate) fn write_once_async<'py>(
    py: Python<'py>,
    uri: &str,
    data: &[u8],
    storage_options: Option<HashMap<String, String>>,
    credentials: Option<Bound<'_, NativeCredentials>>,
) -> PyResult<Bound<'py, PyAny>> {
    let opts = outside_options(access(storage_options, credentials.as_ref()))?;
    let (uri, data) = (uri.to_string(), Bytes::copy_from_slice(data));
    awaitable(py, async move {
        crate::write_once(&uri, data, &opts.store, &opts.timing)
            .await
            .map_err(to_py)
    })
}
