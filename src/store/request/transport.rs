//! What an HTTP transport failure was (object_store's client): no answer at all, a
//! connection dropped under a request, a request never sent. Only cloud stores have an
//! HTTP client: in a build without the `cloud` feature no error is a transport failure.

#[cfg(feature = "cloud")]
use object_store::client::{HttpError, HttpErrorKind};

#[cfg(not(feature = "cloud"))]
pub(crate) fn failed(_: &object_store::Error) -> bool {
    false
}

#[cfg(not(feature = "cloud"))]
pub(crate) fn dropped_connection(_: &object_store::Error) -> bool {
    false
}

#[cfg(not(feature = "cloud"))]
pub(crate) fn resendable(_: &object_store::Error) -> bool {
    false
}

/// True when `e` is a transport failure: nothing came back from the store.
#[cfg(feature = "cloud")]
pub(crate) fn failed(e: &object_store::Error) -> bool {
    transport_failure(e).is_some()
}

/// The kind of the transport failure in `e`, if it is one.
#[cfg(feature = "cloud")]
fn transport_failure(e: &object_store::Error) -> Option<HttpErrorKind> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(http) = s.downcast_ref::<HttpError>() {
            return Some(http.kind());
        }
        source = s.source();
    }
    None
}

/// True if `e` is a connection that was made and then reset or closed before an answer,
/// even while it was being made (something listens there), not one refused, unresolved or
/// timed out (a wrong endpoint).
#[cfg(feature = "cloud")]
pub(crate) fn dropped_connection(e: &object_store::Error) -> bool {
    match transport_failure(e) {
        Some(HttpErrorKind::Request | HttpErrorKind::Interrupted) => true,
        Some(HttpErrorKind::Unknown) => cancelled_unsent(e),
        Some(HttpErrorKind::Connect) => {
            use std::io::ErrorKind as K;
            let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
            while let Some(s) = source {
                if let Some(io) = s.downcast_ref::<std::io::Error>() {
                    return matches!(
                        io.kind(),
                        K::ConnectionReset
                            | K::ConnectionAborted
                            | K::BrokenPipe
                            | K::UnexpectedEof
                    );
                }
                source = s.source();
            }
            false
        }
        _ => false,
    }
}

/// True if hyper cancelled the request because its connection closed before the request
/// was sent (a reset that raced the request onto the connection): nothing reached the store.
#[cfg(feature = "cloud")]
fn cancelled_unsent(e: &object_store::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            return h.is_canceled();
        }
        source = s.source();
    }
    false
}

/// True for a transport failure worth one more try at once: the request was not sent, or
/// its connection was closed under it.
#[cfg(feature = "cloud")]
pub(crate) fn resendable(e: &object_store::Error) -> bool {
    match transport_failure(e) {
        Some(HttpErrorKind::Connect | HttpErrorKind::Request | HttpErrorKind::Interrupted) => true,
        Some(HttpErrorKind::Unknown) => cancelled_unsent(e),
        _ => false,
    }
}
