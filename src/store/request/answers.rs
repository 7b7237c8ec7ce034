//! What a store's answer (or its absence) means: an answer at all or a transport failure,
//! a throttling answer, a missing bucket, and whether a retry can help. object_store keeps
//! the HTTP status private; its messages carry it.

use super::transport;
use crate::errors::{Error, StoreErrorKind};

/// True when `e` is the store's own answer (an HTTP status), false when no answer came
/// (connection refused, DNS, TLS, a reset) or the request never left (credentials).
pub(crate) fn answered_by_store(e: &object_store::Error) -> bool {
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
    if transport::failed(e) {
        return false; // the transport failed: nothing came back
    }
    e.to_string().contains("Server returned")
}

/// True if the store answered that it is overloaded and asks its clients to slow down:
/// S3's 503 SlowDown (also inside a 200), Azure's 503 ServerBusy and 500
/// OperationTimedOut, GCS's 429 and 503, and any 429 or 503.
pub(crate) fn throttling(e: &object_store::Error) -> bool {
    let msg = e.to_string();
    match status_in(&msg) {
        Some(429 | 503) => true,
        Some(500) => msg.contains("OperationTimedOut"),
        _ => ["SlowDown", "ServerBusy", "Please reduce your request rate"]
            .iter()
            .any(|code| msg.contains(code)),
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
        message: format!(
            "{what} ({}); create it first or fix the URI or endpoint",
            summary(uri, msg)
        ),
        kind: StoreErrorKind::Permanent,
    }
}

/// An object_store message in one sentence: the store's error document (S3's and Azure's
/// XML, `<Error><Code>..</Code><Message>..</Message>..`) becomes its code and the first
/// line of its message; the whole answer is logged at DEBUG.
pub(crate) fn summary(uri: &str, msg: &str) -> String {
    let Some(start) = msg.find("<?xml").or_else(|| msg.find("<Error>")) else {
        return one_line(msg);
    };
    log::debug!(target: "blob_lock::store", "{uri}: the store's answer in full: {msg}");
    let element = |name: &str| {
        let open = format!("<{name}>");
        let from = msg.find(&open)? + open.len();
        let to = msg[from..].find(&format!("</{name}>"))? + from;
        Some(
            msg[from..to]
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string(),
        )
    };
    let before = msg[..start].trim_end().trim_end_matches(':');
    match (element("Code"), element("Message")) {
        (Some(code), Some(text)) if !text.is_empty() => {
            format!("{}: {code}: {text}", one_line(before))
        }
        (Some(code), _) => format!("{}: {code}", one_line(before)),
        _ => one_line(before),
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Maps an object_store error to ours, deciding whether a retry can help; `credentials`
/// names where the credentials sent came from, for the answer that refuses them.
pub(crate) fn store_error(
    uri: &str,
    e: object_store::Error,
    during: &str,
    credentials: &str,
) -> Error {
    use object_store::Error as E;
    let refused;
    let status = status_in(&e.to_string());
    let (kind, hint) = match &e {
        // A listing's refusal comes as a generic error with its status.
        E::PermissionDenied { .. } | E::Unauthenticated { .. } | E::Generic { .. }
            if !matches!(e, E::Generic { .. }) || matches!(status, Some(401 | 403)) =>
        {
            refused = format!(
                "; the store refused the credentials, which came from {credentials}: check that they are the ones meant and that they may read and write here"
            );
            (StoreErrorKind::Permanent, refused.as_str())
        }
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
        _ if throttling(&e) => (
            StoreErrorKind::Transient,
            "; the store asks its clients to slow down (throttling): blob-lock backs off",
        ),
        _ => (classify_message(&e.to_string()), ""),
    };
    Error::Store {
        uri: uri.to_string(),
        message: format!("{during} failed: {}{hint}", summary(uri, &e.to_string())),
        kind,
    }
}

/// A 4xx other than 408 and 429 is the caller's fault and will not change on retry.
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

    #[test]
    fn knows_the_clouds_throttling_answers() {
        let generic = |msg: &str| object_store::Error::Generic {
            store: "S3",
            source: msg.to_string().into(),
        };
        for throttled in [
            "Server returned non-2xx status code: 503 Service Unavailable: <Code>SlowDown</Code>",
            "Server returned non-2xx status code: 503 Service Unavailable: ServerBusy",
            "Server returned non-2xx status code: 500 Internal Server Error: <Code>OperationTimedOut</Code>",
            "Server returned non-2xx status code: 429 Too Many Requests",
            "Server returned error response: <Error><Code>SlowDown</Code></Error>",
        ] {
            assert!(throttling(&generic(throttled)), "{throttled}");
        }
        for not in [
            "Server returned non-2xx status code: 500 Internal Server Error: InternalError",
            "Server returned non-2xx status code: 412 Precondition Failed",
        ] {
            assert!(!throttling(&generic(not)), "{not}");
        }
    }
}
