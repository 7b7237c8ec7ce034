//! The delete `prune` sends on object stores: conditional on the version it wrote, so that a
//! request delayed in the network past prune's lease cannot delete a later holder's
//! lockfile (docs/guarantees.md). object_store 0.14 sends plain deletes only; the store's own
//! client signs a URL for this one (object_store's `Signer`: the same credentials and
//! signing code as every other request), with the store's condition ([`Condition`], in each
//! cloud's folder). An HTTP client from object_store's connector, with the store's client
//! options, sends it. Stores that ignore the condition (s3rver) are found by a probe, once
//! per client, and get no conditional delete.

use crate::store::lock_store::Version;
use crate::store::request::answers::summary;
use crate::store::request::client::Deleted;
use object_store::client::{
    ClientOptions, HttpClient, HttpConnector, HttpError, HttpErrorKind, ReqwestConnector,
};
use object_store::path::Path;
use object_store::signer::{HeaderName, HeaderValue, Method, SignedUrlOptions, Signer};
use object_store::ClientConfigKey;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// How a cloud makes a delete conditional on a version (each cloud's folder says).
#[derive(Clone, Copy)]
pub(crate) struct Condition {
    /// The request header.
    pub(crate) header: &'static str,
    /// Its value: the part of the version it names.
    pub(crate) value: fn(&Version) -> Option<String>,
    /// Whether the header is signed into the URL (a SAS signs no header: it rides beside).
    pub(crate) signed: bool,
}

/// What sends a store's conditional deletes.
pub(crate) struct Deleter {
    /// The store's kind, for messages.
    store: &'static str,
    condition: Condition,
    signer: Arc<dyn Signer>,
    options: ClientOptions,
    http: OnceLock<std::result::Result<HttpClient, String>>,
}

impl std::fmt::Debug for Deleter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Deleter({})", self.store)
    }
}

impl Deleter {
    pub(crate) fn new(
        store: &'static str,
        condition: Condition,
        signer: Arc<dyn Signer>,
        options: ClientOptions,
    ) -> Deleter {
        Deleter {
            store,
            condition,
            signer,
            options,
            http: OnceLock::new(),
        }
    }

    fn http(&self) -> object_store::Result<&HttpClient> {
        let made = self.http.get_or_init(|| {
            ReqwestConnector::default()
                .connect(&self.options)
                .map_err(|e| e.to_string())
        });
        made.as_ref().map_err(|e| generic(self.store, e.clone()))
    }

    /// Deletes `path` if it is still at `expected`. The signed URL is valid for `valid_for`
    /// only: a request held up longer is refused by the store's clock too.
    pub(crate) async fn delete_if(
        &self,
        path: &Path,
        expected: &Version,
        valid_for: Duration,
    ) -> object_store::Result<Deleted> {
        let (name, value) = self.condition(expected)?;
        let name = HeaderName::from_static(name);
        let value = HeaderValue::from_str(&value).map_err(|e| generic(self.store, e))?;
        let valid_for = valid_for.max(Duration::from_secs(1));
        let url = if self.condition.signed {
            let signed =
                SignedUrlOptions::default().with_signed_header(name.clone(), value.clone());
            (self.signer)
                .signed_url_opts(Method::DELETE, path, valid_for, &signed)
                .await?
        } else {
            self.signer
                .signed_url(Method::DELETE, path, valid_for)
                .await?
        };
        let request = http::Request::builder()
            .method(Method::DELETE)
            .uri(url.as_str())
            .header(name, value)
            .body(object_store::client::HttpRequestBody::empty())
            .map_err(|e| generic(self.store, e))?;
        let response =
            (self.http()?.execute(request).await).map_err(|e| send_failure(self.store, &e))?;
        let status = response.status();
        if status.is_success() {
            return Ok(Deleted::Yes);
        }
        // 412: another version. 404: gone already (S3 answers so for a missing key).
        if status == http::StatusCode::PRECONDITION_FAILED || status == http::StatusCode::NOT_FOUND
        {
            return Ok(Deleted::Changed);
        }
        let body = response.into_body().bytes().await.unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        let source = format!(
            "a conditional delete was answered {status}: {}",
            summary(path.as_ref(), &text)
        );
        Err(match status.as_u16() {
            401 => object_store::Error::Unauthenticated {
                path: path.to_string(),
                source: source.into(),
            },
            403 => object_store::Error::PermissionDenied {
                path: path.to_string(),
                source: source.into(),
            },
            _ => generic(self.store, source),
        })
    }

    /// The header that makes a delete conditional on `expected`, with its value.
    fn condition(&self, expected: &Version) -> object_store::Result<(&'static str, String)> {
        let Condition { header, value, .. } = self.condition;
        let value = value(expected).ok_or_else(|| {
            generic(
                self.store,
                "the store gave no version to make the delete conditional on",
            )
        })?;
        Ok((header, value))
    }
}

/// `text` with the query of every URL in it left out (a signed URL's query carries its
/// signature and, with temporary credentials, the session token).
fn without_queries(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, url) = rest.split_at(at);
        out.push_str(before);
        let end = url
            .find(|c: char| c.is_whitespace() || c == ')' || c == '"')
            .unwrap_or(url.len());
        let query = url[..end].find('?').unwrap_or(end);
        out.push_str(&url[..query]);
        if query < end {
            out.push_str("?(signed)");
        }
        rest = &url[end..];
    }
    out.push_str(rest);
    out
}

/// A delete that got no answer, as the gate reads it to decide whether to send it again:
/// the HTTP error's kind and its I/O error's kind kept (a request hyper cancelled unsent
/// counts as a failed send); the message without the signed URL's query, a credential.
fn send_failure(store: &'static str, e: &HttpError) -> object_store::Error {
    let mut io_kind = std::io::ErrorKind::Other;
    let mut unsent = false;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            io_kind = io.kind();
        }
        unsent |= s
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_canceled);
        source = s.source();
    }
    let kind = if unsent {
        HttpErrorKind::Request
    } else {
        e.kind()
    };
    let text = without_queries(&e.to_string());
    let text = text.strip_prefix("HTTP error: ").unwrap_or(&text);
    let cleaned = std::io::Error::new(io_kind, format!("{:?}: {text}", e.kind()));
    generic(store, HttpError::new(kind, cleaned))
}

fn generic(
    store: &'static str,
    e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> object_store::Error {
    object_store::Error::Generic {
        store,
        source: e.into(),
    }
}

/// The client options of a store's conditional deletes: those of its other requests
/// (`allow_http`, proxies, certificates, timeouts), as `get` reads them from its builder.
pub(crate) fn client_options(get: impl Fn(ClientConfigKey) -> Option<String>) -> ClientOptions {
    // The store's own requests go to the same endpoint: an http:// one is allowed there
    // (an emulator's, which object_store allows without saying so), or refused before any
    // request (`super::plain_http`).
    let mut options = ClientOptions::new().with_allow_http(true);
    for key in [
        ClientConfigKey::AllowInvalidCertificates,
        ClientConfigKey::ConnectTimeout,
        ClientConfigKey::Timeout,
        ClientConfigKey::ProxyUrl,
        ClientConfigKey::ProxyCaCertificate,
        ClientConfigKey::ProxyExcludes,
        ClientConfigKey::Http1Only,
        ClientConfigKey::Http2Only,
        ClientConfigKey::UserAgent,
    ] {
        if let Some(value) = get(key) {
            options = options.with_config(key, value);
        }
    }
    options
}

#[cfg(test)]
mod tests {
    use super::without_queries;

    #[test]
    fn a_signed_urls_query_never_reaches_a_message() {
        let text = "error sending request for url (https://b.s3.amazonaws.com/k/lock.json?X-Amz-Credential=AKIA%2Fx&X-Amz-Security-Token=SECRET&X-Amz-Signature=abc): connection refused";
        let shown = without_queries(text);
        assert_eq!(
            shown,
            "error sending request for url (https://b.s3.amazonaws.com/k/lock.json?(signed)): connection refused"
        );
        assert!(!shown.contains("SECRET") && !shown.contains("AKIA"));
        assert_eq!(without_queries("no url here"), "no url here");
        assert_eq!(
            without_queries("http://h/p and https://h/q?sig=1"),
            "http://h/p and https://h/q?(signed)"
        );
    }
}
