//! The arguments the Python classes pass down: the options of a look from outside, the loss
//! callback, timeouts.

use super::errors::{to_py, LockLost};
use super::to_python::Lane;
use crate::errors::Error;
use crate::lease::{LockOptions, LossHook, Settings};
use crate::store::Access;
use pyo3::prelude::*;
use std::sync::Arc;
use std::time::Duration;

/// The options of a look at locks from outside (inspect, wait_free, break_lock, ls,
/// prune): `BlobLock`'s defaults, by which expiry is judged, on the given store.
pub(crate) fn outside_options(store: Access) -> PyResult<LockOptions> {
    LockOptions::from_settings(&Settings::default(), store).map_err(to_py)
}

/// Calls `callback(LockLost(...))` once when a lease is lost, on one of the few threads of
/// ours that run loss callbacks only ([`super::to_python`]): the hook fires on a runtime
/// thread, whose heartbeats must not wait for the GIL or a slow callback, a callback that
/// blocks must hold up no asyncio result or credential fetch, and an outage that loses
/// thousands of locks at once must not start a thread each. An exception in the callback
/// goes to `sys.unraisablehook`, as in a `__del__`. An adapter's callback
/// (`blob_lock._loss_notice.LossNotice`) is two: its own notice, run on threads of notices
/// (a user's callback that blocks never holds it up), then the user's, on the callbacks'.
pub(crate) fn loss_hook(callback: &Bound<'_, PyAny>) -> LossHook {
    let split = callback.getattr("_blob_lock_notice").and_then(|notice| {
        Ok((
            notice.unbind(),
            callback.getattr("_blob_lock_user")?.unbind(),
        ))
    });
    let (notice, user) = match split {
        Ok((notice, user)) => (
            Some(Arc::new(notice)),
            Some(user).filter(|u| !u.is_none(callback.py())),
        ),
        Err(_) => (None, Some(callback.clone().unbind())),
    };
    let user = user.map(Arc::new);
    LossHook(Arc::new(move |lost: &Error| {
        let message = lost.to_string();
        let uri = match lost {
            Error::Lost { uri, .. } => uri.clone(),
            _ => String::new(),
        };
        for (lane, callback) in [(Lane::Notices, &notice), (Lane::Callbacks, &user)] {
            let Some(callback) = callback.clone() else {
                continue;
            };
            let (message, uri) = (message.clone(), uri.clone());
            super::to_python::leave_call(
                lane,
                Box::new(move |py| {
                    let exc = LockLost::new_err((message, uri));
                    if let Err(e) = callback.call1(py, (exc.value(py),)) {
                        e.write_unraisable(py, Some(callback.bind(py)));
                    }
                }),
            );
        }
    }))
}

pub(crate) fn timeout(t: Option<f64>) -> PyResult<Option<Duration>> {
    t.map(|t| crate::timing::timeout(t).map_err(to_py))
        .transpose()
}

/// Starts handing log records to Python again in a child made by fork (the parent's thread
/// that did it does not run there).
#[pyfunction]
pub(crate) fn after_fork_in_child() {
    super::to_python::start();
}

/// Checks a timeout as `acquire` would take it: ValueError if it is not one, naming
/// `name` (an adapter's argument of another name; `timeout` by default).
#[pyfunction]
#[pyo3(signature = (timeout, name="timeout"))]
pub(crate) fn check_timeout(timeout: f64, name: &str) -> PyResult<()> {
    crate::timing::timeout_named(name, timeout)
        .map(drop)
        .map_err(to_py)
}
