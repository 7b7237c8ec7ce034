//! `NativeCredentials`: a Python function that fetches credentials, as the core's
//! [`Credentials`]. The Python package (`blob_lock._credentials`) turns every source a user
//! has (botocore, azure-identity, google-auth, obstore-style providers, sync or async) into
//! one plain synchronous function returning a tuple; this file only calls it, on a thread
//! of ours that runs fetches only (`to_python`'s credentials lane), never on a runtime
//! thread, whose blocking pool runs the file store's renewals, nor behind a user's loss
//! callback, which may block while a renewal waits for the fetch.

use super::to_python::Lane;
use crate::store::{Cloud, Credentials, Fetch, Fetched};
use object_store::aws::AwsCredential;
use object_store::azure::{AzureAccessKey, AzureCredential};
use object_store::gcp::GcpCredential;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Credentials for one cloud, fetched by a Python function.
#[pyclass(frozen, module = "blob_lock._blob_lock")]
pub(crate) struct NativeCredentials {
    pub(crate) inner: Credentials,
}

#[pymethods]
impl NativeCredentials {
    /// `fetch()` returns, for `"s3"`: `(key_id, secret, token | None, expires | None)`; for
    /// `"azure"`: `(kind, value, expires | None)` with kind `"token"`, `"access_key"` or
    /// `"sas"`; for `"gcs"`: `(token, expires | None)`. `expires` is seconds since the
    /// epoch. They are fetched again `refresh` seconds before they expire (half their
    /// lifetime for short-lived ones). `source` names where they come from, never a secret.
    #[new]
    #[pyo3(signature = (cloud, fetch, *, source, refresh))]
    fn new(cloud: &str, fetch: Py<PyAny>, source: &str, refresh: f64) -> PyResult<Self> {
        let refresh = Duration::try_from_secs_f64(refresh).map_err(|_| {
            PyValueError::new_err(format!("refresh must be seconds, got {refresh}"))
        })?;
        let fetch = Arc::new(fetch);
        let inner = match Cloud::from_key(cloud).map_err(PyValueError::new_err)? {
            Cloud::S3 => Credentials::s3(source, refresh, fetcher(fetch, aws)),
            Cloud::Azure => Credentials::azure(source, refresh, fetcher(fetch, azure)),
            Cloud::Gcs => Credentials::gcs(source, refresh, fetcher(fetch, gcs)),
        };
        Ok(NativeCredentials { inner })
    }

    /// object_store's own chain for `cloud` (keys, web identity, container credentials,
    /// instance metadata), named `source`; when it finds nothing, the error says what was
    /// looked at before it (`tried`) and what to do (`fix`).
    #[staticmethod]
    #[pyo3(signature = (cloud, *, source, tried, fix))]
    fn object_store_chain(cloud: &str, source: &str, tried: &str, fix: &str) -> PyResult<Self> {
        let cloud = Cloud::from_key(cloud).map_err(PyValueError::new_err)?;
        let inner = Credentials::object_store_chain(cloud, source, tried, fix);
        Ok(NativeCredentials { inner })
    }

    /// Where the credentials come from.
    #[getter]
    fn source(&self) -> &str {
        self.inner.source()
    }

    fn __repr__(&self) -> String {
        format!(
            "<NativeCredentials {} from {}>",
            self.inner.cloud().name(),
            self.inner.source()
        )
    }
}

/// Set once the interpreter is past blob-lock's exit hook: a call into Python from a
/// runtime thread while it finalizes aborts the process, so fetches are refused from then
/// on (the credential in hand still serves until it expires).
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Fetches inside Python now.
static IN_PYTHON: AtomicUsize = AtomicUsize::new(0);

/// Refuses every later fetch and waits (up to `bound`) for those inside Python to return
/// (at interpreter exit, `exit::close_python_calls`, with the GIL released).
pub(crate) fn close(bound: Duration) {
    CLOSED.store(true, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + bound;
    while IN_PYTHON.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Counts a fetch inside Python while it lives.
struct InPython;

impl InPython {
    /// None once closed: counted first, then checked, so that `close` waits for it.
    fn enter() -> Option<InPython> {
        IN_PYTHON.fetch_add(1, Ordering::SeqCst);
        let entered = InPython;
        (!CLOSED.load(Ordering::SeqCst)).then_some(entered)
    }
}

impl Drop for InPython {
    fn drop(&mut self) {
        IN_PYTHON.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A [`Fetch`] that calls `fetch` and reads its tuple with `read`.
fn fetcher<C: Send + 'static>(
    fetch: Arc<Py<PyAny>>,
    read: fn(&Bound<'_, PyAny>) -> PyResult<Fetched<C>>,
) -> Fetch<C> {
    Arc::new(move || {
        let fetch = fetch.clone();
        Box::pin(async move {
            if CLOSED.load(Ordering::SeqCst) {
                return Err("the Python interpreter is exiting".to_string());
            }
            let (answer, called) = tokio::sync::oneshot::channel();
            super::to_python::leave_call(
                Lane::Credentials,
                Box::new(move |py| {
                    let Some(_inside) = InPython::enter() else {
                        let _ = answer.send(Err("the Python interpreter is exiting".to_string()));
                        return;
                    };
                    let got = fetch
                        .call0(py)
                        .and_then(|got| read(got.bind(py)))
                        .map_err(|e| message(py, &e));
                    let _ = answer.send(got);
                }),
            );
            match called.await {
                Ok(result) => result,
                Err(_) => Err(
                    "fetching the credentials stopped: the Python interpreter is exiting"
                        .to_string(),
                ),
            }
        })
    })
}

/// An exception's message, with its type where it is not ours (the Python layer already
/// words its own errors for the reader).
fn message(py: Python<'_>, e: &PyErr) -> String {
    let text = e.value(py).to_string();
    let name = e
        .get_type(py)
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_default();
    if name == "CredentialsError" || name.is_empty() {
        text
    } else {
        format!("{name}: {text}")
    }
}

fn expiry(value: Option<f64>) -> Option<SystemTime> {
    value.map(|secs| UNIX_EPOCH + Duration::from_secs_f64(secs.max(0.0)))
}

fn aws(got: &Bound<'_, PyAny>) -> PyResult<Fetched<AwsCredential>> {
    let (key_id, secret_key, token, expires): (String, String, Option<String>, Option<f64>) =
        got.extract()?;
    Ok(Fetched {
        credential: AwsCredential {
            key_id,
            secret_key,
            token,
        },
        expires_at: expiry(expires),
    })
}

fn azure(got: &Bound<'_, PyAny>) -> PyResult<Fetched<AzureCredential>> {
    let (kind, value, expires): (String, String, Option<f64>) = got.extract()?;
    let credential = match kind.as_str() {
        "token" => AzureCredential::BearerToken(value),
        "access_key" => AzureCredential::AccessKey(
            AzureAccessKey::try_new(&value)
                .map_err(|_| PyValueError::new_err("the Azure account key is not valid base64"))?,
        ),
        "sas" => AzureCredential::SASToken(
            object_store::azure::split_sas(value.trim_start_matches('?'))
                .map_err(|_| PyValueError::new_err("the SAS token is not a query string"))?,
        ),
        other => {
            return Err(PyValueError::new_err(format!(
                "an Azure credential kind is \"token\", \"access_key\" or \"sas\", got {other:?}"
            )))
        }
    };
    Ok(Fetched {
        credential,
        expires_at: expiry(expires),
    })
}

fn gcs(got: &Bound<'_, PyAny>) -> PyResult<Fetched<GcpCredential>> {
    let (bearer, expires): (String, Option<f64>) = got.extract()?;
    Ok(Fetched {
        credential: GcpCredential { bearer },
        expires_at: expiry(expires),
    })
}

/// What a store is opened with: storage options, credentials if given, and the
/// environment, read here while the caller holds the GIL (Python's `os.environ` writes
/// hold it too), so that no thread of ours reads it while Python writes it.
pub(crate) fn access(
    storage_options: Option<std::collections::HashMap<String, String>>,
    credentials: Option<&Bound<'_, NativeCredentials>>,
) -> crate::store::Access {
    crate::store::Access {
        options: storage_options.unwrap_or_default(),
        credentials: credentials.map(|c| c.get().inner.clone()),
        environment: Some(std::sync::Arc::new(crate::store::Environment::read())),
    }
}
