//! Core errors as Python exceptions: each `Error` becomes one class of
//! `blob_lock.exceptions`, and a panic inside a store request stays quiet.

use crate::errors::{Error, StoreErrorKind};
use pyo3::exceptions::PyValueError;
use pyo3::PyErr;

pyo3::import_exception!(blob_lock.exceptions, LockError);
pyo3::import_exception!(blob_lock.exceptions, LockTimeout);
pyo3::import_exception!(blob_lock.exceptions, LockLost);
pyo3::import_exception!(blob_lock.exceptions, LockStolen);
pyo3::import_exception!(blob_lock.exceptions, LockNotFound);
pyo3::import_exception!(blob_lock.exceptions, InvalidLockFile);
pyo3::import_exception!(blob_lock.exceptions, StoreError);
pyo3::import_exception!(blob_lock.exceptions, UnsafeStore);
pyo3::import_exception!(blob_lock.exceptions, CredentialsError);
pyo3::import_exception!(blob_lock.exceptions, StoreSaturated);

/// The exception for `e`.
pub(crate) fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::InvalidArgument(_) => PyValueError::new_err(msg),
        Error::Timeout { uri, saturated, .. } => {
            let timeout = LockTimeout::new_err((msg, uri.clone()));
            // Its reason, where the store was saturated: `LockTimeout.saturated`.
            if let Some(why) = saturated {
                pyo3::Python::attach(|py| {
                    timeout.set_cause(py, Some(StoreSaturated::new_err((why, uri, true))));
                });
            }
            timeout
        }
        Error::Lost { uri, .. } => LockLost::new_err((msg, uri)),
        Error::Stolen { uri, .. } => LockStolen::new_err((msg, uri)),
        Error::NotFound { uri } => LockNotFound::new_err((msg, uri)),
        Error::InvalidLockFile { uri, .. } => InvalidLockFile::new_err((msg, uri)),
        Error::UnsafeStore { uri, .. } | Error::UnsafeForWriteOnce { uri, .. } => {
            UnsafeStore::new_err((msg, uri))
        }
        Error::Credentials { uri, .. } => CredentialsError::new_err((msg, uri)),
        Error::Store { uri, kind, .. } => {
            StoreError::new_err((msg, uri, kind == StoreErrorKind::Transient))
        }
        Error::Saturated { uri, .. } => StoreSaturated::new_err((msg, uri, true)),
    }
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        to_py(e)
    }
}

/// A panic inside an object_store request becomes a `StoreError` (`store::request::gate`); the
/// default hook would still print it, with a backtrace, over the user's terminal.
pub(crate) fn quiet_guarded_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !crate::store::request::guarded::in_guarded_request() {
            previous(info);
        }
    }));
}
