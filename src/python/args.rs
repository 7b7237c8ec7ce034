//! The arguments the Python classes pass down: lock options, the loss callback, timeouts.

use super::errors::{to_py, LockLost};
use crate::errors::Error;
use crate::lease::{LockOptions, LossHook};
use crate::lockfile::Labels;
use crate::protocol::Protocol;
use crate::store::Access;
use crate::timing::Timing;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::Arc;
use std::time::Duration;

pub(crate) fn options(
    expire: f64,
    heartbeat: Option<f64>,
    protocol: &str,
    store: Access,
    settle: Option<f64>,
    clock_skew: Option<f64>,
) -> PyResult<LockOptions> {
    let protocol = match protocol {
        "auto" => None,
        "cas" => Some(Protocol::Cas),
        "lww" => Some(Protocol::Lww),
        other => {
            return Err(PyValueError::new_err(format!(
                "protocol must be \"auto\", \"cas\" or \"lww\", got {other:?}"
            )))
        }
    };
    Ok(LockOptions {
        protocol,
        timing: Timing::new(expire, heartbeat, settle, Some(clock_skew)).map_err(to_py)?,
        store,
        clock: crate::clock::system(),
        on_lost: None,
        labels: None,
    })
}

/// The options of a look at locks from outside (inspect, wait_free, break_lock, ls,
/// prune): `BlobLock`'s defaults, by which expiry is judged, on the given store.
pub(crate) fn outside_options(store: Access) -> PyResult<LockOptions> {
    options(30.0, None, "auto", store, None, Some(60.0))
}

/// Calls `callback(LockLost(...))` once when a lease is lost. On a thread of its own: the
/// hook fires on a runtime thread, whose heartbeats a slow callback must not hold up, and
/// taking the GIL there could wait on a thread that waits on the runtime. An exception in
/// the callback goes to `sys.unraisablehook`, as in a `__del__`.
pub(crate) fn loss_hook(callback: Option<Py<PyAny>>) -> Option<LossHook> {
    let callback = Arc::new(callback?);
    Some(LossHook(Arc::new(move |lost: &Error| {
        let (callback, message) = (callback.clone(), lost.to_string());
        let uri = match lost {
            Error::Lost { uri, .. } => uri.clone(),
            _ => String::new(),
        };
        std::thread::spawn(move || {
            Python::attach(|py| {
                let exc = LockLost::new_err((message, uri));
                if let Err(e) = callback.call1(py, (exc.value(py),)) {
                    e.write_unraisable(py, Some(callback.bind(py)));
                }
            })
        });
    })))
}

/// Labels as given, checked: ValueError naming the label and the bound it breaks.
pub(crate) fn labels(labels: Option<Vec<(String, String)>>) -> PyResult<Option<Labels>> {
    crate::lockfile::labels::check(labels.unwrap_or_default()).map_err(PyValueError::new_err)
}

pub(crate) fn timeout(t: Option<f64>) -> PyResult<Option<Duration>> {
    t.map(|t| crate::timing::timeout(t).map_err(to_py))
        .transpose()
}

/// Checks a timeout as `acquire` would take it: ValueError if it is not one.
#[pyfunction]
pub(crate) fn check_timeout(timeout: f64) -> PyResult<()> {
    self::timeout(Some(timeout)).map(drop)
}
