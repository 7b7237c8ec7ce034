//! The gate every request to an object_store store goes through: at most
//! [`super::client::MAX_IN_FLIGHT`] in flight per store (renewals ahead of the rest), each
//! bounded by the lock's request timeout once it is sent, a panic inside object_store turned
//! into an error, and the store's answers noted, so that a store that has never answered
//! this process fails at once instead of being waited for.

use super::client::Client;
use super::{Version, Write};
use crate::errors::{Error, Result, StoreErrorKind};
use bytes::Bytes;
use object_store::client::HttpError;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// Requests to one store on behalf of one lock.
#[derive(Clone)]
pub struct Gate {
    pub(crate) client: Arc<Client>,
    /// The lockfile's URI, for messages (shared with the lock as its identity, where equal).
    pub(crate) uri: Arc<str>,
    request_timeout: Duration,
}

/// Why a call failed: an object_store error for the caller to read (a conflict, a missing
/// object), or one of ours already decided.
pub(crate) enum Failure {
    Store(object_store::Error),
    Ours(Error),
}

impl Gate {
    /// Requests to `client`'s store for the lockfile `uri`, each taking at most
    /// `request_timeout` once sent.
    pub fn new(client: Arc<Client>, uri: String, request_timeout: Duration) -> Gate {
        Gate {
            client,
            uri: uri.into(),
            request_timeout,
        }
    }

    /// The lock's URI (without `/lock.json`), for messages.
    pub(crate) fn lock_uri(&self) -> String {
        let suffix = format!("/{}", crate::lockfile::LOCKFILE_NAME);
        self.uri
            .strip_suffix(&suffix)
            .unwrap_or(&self.uri)
            .to_string()
    }

    /// Runs one request through the gate (see the module doc).
    pub(crate) async fn call<T>(
        &self,
        during: &str,
        request: impl Future<Output = object_store::Result<T>> + Send,
    ) -> std::result::Result<T, Failure> {
        if self.client.cloud.is_none() {
            return request.await.map_err(Failure::Store); // memory: no network to guard
        }
        let facts = &self.client.facts;
        // Credentials first, under their own bound: a slow token endpoint is not a store
        // that does not answer, and what failed is named as such.
        if let Some(credentials) = &self.client.credentials {
            if let Err(message) = credentials.ready().await {
                return Err(Failure::Ours(Error::Credentials {
                    uri: self.uri.to_string(),
                    message,
                }));
            }
        }
        // The wait for a slot is this process's own queue, not the store's answer: it is
        // bounded by the callers' deadlines (an acquisition's timeout, a lease's), and only
        // the request itself by the request timeout.
        let _bulk = match URGENT.try_with(|_| ()) {
            Ok(()) => None,
            Err(_) => Some(self.client.bulk.acquire().await),
        };
        let _slot = self.client.slots.acquire().await;
        let bounded = tokio::time::timeout(self.request_timeout, Guarded(Box::pin(request)));
        match bounded.await {
            Ok(Ok(Ok(value))) => {
                facts.mark_answered();
                Ok(value)
            }
            Ok(Ok(Err(e))) if super::credentials::failure_in(&e).is_some() => {
                let message = super::credentials::failure_in(&e).unwrap_or_default();
                Err(Failure::Ours(Error::Credentials {
                    uri: self.uri.to_string(),
                    message,
                }))
            }
            Ok(Ok(Err(e))) if answered_by_store(&e) => {
                facts.mark_answered();
                Err(Failure::Store(e))
            }
            Ok(Ok(Err(e))) if !facts.answered() => {
                // A connection accepted and then dropped: something listens, perhaps behind a
                // flaky path. Retried a few times (as transient) before failing fast.
                let dropped = dropped_connection(&e);
                let known = store_error(&self.uri, e, during);
                if dropped && facts.forgive_drop() {
                    return Err(Failure::Ours(known));
                }
                Err(Failure::Ours(self.unreachable(known)))
            }
            Ok(Ok(Err(e))) => Err(Failure::Store(e)),
            Ok(Err(panic)) => Err(Failure::Ours(Error::Store {
                uri: self.uri.to_string(),
                message: format!(
                    "{during} failed: object_store could not make the request ({panic}); check the endpoint and the storage options of {}",
                    self.client.name
                ),
                kind: StoreErrorKind::Permanent,
            })),
            Err(_elapsed) => {
                let what = format!(
                    "no answer within {:.1}s",
                    self.request_timeout.as_secs_f64()
                );
                let timed_out = Error::Store {
                    uri: self.uri.to_string(),
                    message: format!("{during} failed: {what}"),
                    kind: StoreErrorKind::Transient,
                };
                Err(Failure::Ours(if facts.answered() {
                    timed_out
                } else {
                    self.unreachable(timed_out)
                }))
            }
        }
    }

    /// `failed` as the failure of a store that has never answered this process: permanent,
    /// so that a typo in an endpoint fails at once instead of being waited for.
    fn unreachable(&self, failed: Error) -> Error {
        let message = match failed {
            Error::Store { message, .. } => message,
            other => other.to_string(),
        };
        Error::Store {
            uri: self.uri.to_string(),
            message: format!(
                "{message}; {} has not answered this process yet, so blob-lock does not wait for it: check the endpoint, the network and the credentials",
                self.client.name
            ),
            kind: StoreErrorKind::Permanent,
        }
    }

    /// Turns a failure into our error, deciding whether a retry can help.
    pub(crate) fn error(&self, failure: Failure, during: &str) -> Error {
        match failure {
            Failure::Ours(e) => e,
            Failure::Store(e) => store_error(&self.uri, e, during),
        }
    }

    pub(crate) async fn put_at(&self, path: &Path, body: Bytes, mode: PutMode) -> Result<Write> {
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        let put = self
            .client
            .store
            .put_opts(path, PutPayload::from(body), opts);
        match self.call("writing", put).await {
            Ok(r) => Ok(Write::Done(Version {
                e_tag: r.e_tag,
                version: r.version,
            })),
            Err(Failure::Store(object_store::Error::AlreadyExists { .. }))
            | Err(Failure::Store(object_store::Error::Precondition { .. })) => Ok(Write::Conflict),
            Err(Failure::Store(object_store::Error::NotFound { source, .. })) => {
                let msg = source.to_string();
                let what = names_a_missing_bucket(&msg)
                    .unwrap_or("the bucket or container does not exist");
                Err(missing_bucket(&self.uri, what, &msg))
            }
            Err(failure) => Err(self.error(failure, "writing")),
        }
    }

    pub(crate) async fn delete_at(&self, path: &Path) -> Result<()> {
        match self.call("deleting", self.client.store.delete(path)).await {
            Ok(()) | Err(Failure::Store(object_store::Error::NotFound { .. })) => Ok(()),
            Err(failure) => Err(self.error(failure, "deleting")),
        }
    }
}
/// When a store's 404 says that more than the object is missing (the bucket, the
/// container, the account: a missing object answers 404 too, and the store's error code
/// tells them apart), what to tell the user.
pub(crate) fn names_a_missing_bucket(msg: &str) -> Option<&'static str> {
    if ["NoSuchBucket", "ContainerNotFound", "bucket does not exist"]
        .iter()
        .any(|c| msg.contains(c))
    {
        return Some("the bucket or container does not exist");
    }
    // Azure's answer for a resource it does not know at all: most often an endpoint that
    // leaves out the account (Azurite's is http://HOST:PORT/ACCOUNT).
    if msg.contains("ResourceNotFound") {
        return Some(
            "the store does not know this account, container or path (ResourceNotFound): check the endpoint (for Azurite, http://HOST:PORT/ACCOUNT), the account and the container",
        );
    }
    None
}

/// The error of a request to a bucket or container that does not exist.
pub(crate) fn missing_bucket(uri: &str, what: &str, msg: &str) -> Error {
    Error::Store {
        uri: uri.to_string(),
        message: format!("{what} ({msg}); create it first or fix the URI or endpoint"),
        kind: StoreErrorKind::Permanent,
    }
}

/// True when `e` is the store's own answer (an HTTP status), false when no answer came
/// (connection refused, DNS, TLS, a reset) or the request never left (credentials).
fn answered_by_store(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    if matches!(
        e,
        E::NotFound { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
            | E::NotModified { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
    ) {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.downcast_ref::<HttpError>().is_some() {
            return false; // the transport failed: nothing came back
        }
        source = s.source();
    }
    e.to_string().contains("Server returned")
}

/// True if `e` is a connection that was made and then reset or closed before an answer
/// (not one refused, unresolved or timed out: a wrong endpoint).
fn dropped_connection(e: &object_store::Error) -> bool {
    use object_store::client::HttpErrorKind;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(http) = s.downcast_ref::<HttpError>() {
            return matches!(
                http.kind(),
                HttpErrorKind::Request | HttpErrorKind::Interrupted
            );
        }
        source = s.source();
    }
    false
}

/// Maps an object_store error to ours, deciding whether a retry can help.
pub(crate) fn store_error(uri: &str, e: object_store::Error, during: &str) -> Error {
    use object_store::Error as E;
    let (kind, hint) = match &e {
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => (
            StoreErrorKind::Permanent,
            "; the store refused the credentials: check which ones are used (`blob-lock doctor` names their source) and that they may read and write here",
        ),
        E::NotSupported { .. } | E::NotImplemented { .. } | E::UnknownConfigurationKey { .. } => {
            (StoreErrorKind::Permanent, "")
        }
        E::InvalidPath { .. } => (StoreErrorKind::Permanent, ""),
        // The HTTP client refused to build the request: its configuration is wrong, and
        // every retry would fail alike. Most often an http:// endpoint without allow_http.
        _ if e.to_string().contains("builder error") => (
            StoreErrorKind::Permanent,
            "; the HTTP client cannot make this request: for an http:// endpoint set \
             aws_allow_http / azure_allow_http / google_allow_http (or ALLOW_HTTP) to true",
        ),
        _ => (classify_message(&e.to_string()), ""),
    };
    Error::Store {
        uri: uri.to_string(),
        message: format!("{during} failed: {e}{hint}"),
        kind,
    }
}

/// object_store keeps its HTTP status private; its message carries it. A 4xx other than
/// 408 and 429 is the caller's fault and will not change on retry.
pub(crate) fn classify_message(msg: &str) -> StoreErrorKind {
    match status_in(msg) {
        Some(code) if (400..500).contains(&code) && code != 408 && code != 429 => {
            StoreErrorKind::Permanent
        }
        _ => StoreErrorKind::Transient,
    }
}

/// The HTTP status in an object_store message, if there is one.
pub(crate) fn status_in(msg: &str) -> Option<u16> {
    let i = msg.find("status code: ")?;
    msg[i + 13..]
        .chars()
        .take(3)
        .collect::<String>()
        .parse()
        .ok()
}

tokio::task_local! {
    /// Set around a renewal: its requests skip the queue of the other requests to the store.
    static URGENT: ();
}

/// Runs `renewal` with its store requests ahead of acquisitions, releases and reads (see
/// [`super::client::FOR_RENEWALS`]).
pub async fn urgently<F: Future>(renewal: F) -> F::Output {
    URGENT.scope((), renewal).await
}

thread_local! {
    /// Set while this thread polls a request inside [`Guarded`].
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while this thread runs a store request whose panics become errors: a panic hook
/// may then stay quiet (the Python bindings install one).
pub fn in_guarded_request() -> bool {
    GUARDED.with(|g| g.get())
}

/// A request whose panic (object_store panics on a URL it cannot build) becomes an error.
struct Guarded<F>(Pin<Box<F>>);

impl<F: Future> Future for Guarded<F> {
    type Output = std::result::Result<F::Output, String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.get_mut().0;
        let was = GUARDED.with(|g| g.replace(true));
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.as_mut().poll(cx)));
        GUARDED.with(|g| g.set(was));
        match polled {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_status_codes() {
        assert_eq!(
            classify_message("Server returned non-2xx status code: 400 Bad Request"),
            StoreErrorKind::Permanent
        );
        assert_eq!(
            classify_message("Server returned non-2xx status code: 503 Slow Down"),
            StoreErrorKind::Transient
        );
        assert_eq!(
            classify_message("status code: 429 Too Many"),
            StoreErrorKind::Transient
        );
        assert_eq!(
            classify_message("connection refused"),
            StoreErrorKind::Transient
        );
    }

    #[tokio::test]
    async fn a_panic_in_a_request_becomes_an_error() {
        let panicking = async { panic!("request valid: InvalidUri") };
        let got: std::result::Result<(), String> = Guarded(Box::pin(panicking)).await;
        assert!(got.unwrap_err().contains("InvalidUri"));
        assert!(!in_guarded_request());
    }
}
