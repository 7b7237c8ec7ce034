//! The cloud stores' clients: object_store's S3 ([`aws`]), Azure ([`azure`]) and GCS
//! ([`gcp`]) clients, each cloud in a folder of its own behind one [`builder::Builder`], and
//! the one configuration of them all: from the environment, the lock URI's bucket and the
//! storage options, with blob-lock's retry and timeout settings. Every value that
//! object_store would put into a request URL or header (endpoints, regions, account names,
//! credentials) is checked here first: object_store panics on a URL or header it cannot
//! build. What signs the requests ([`signing`]) and sends `prune`'s conditional delete
//! ([`conditional_delete`]) is what a cloud client adds to object_store's
//! ([`CloudParts`]); [`registry`] keeps one client per store and process.

mod aws;
mod azure;
pub(crate) mod builder;
pub(crate) mod conditional_delete;
mod gcp;
mod option_names;
pub(crate) mod registry;
pub(crate) mod signing;
mod tls;

use crate::errors::{Error, Result};
use crate::store::config::credentials::{failure_in, Credentials};
use crate::store::config::options::Options;
use crate::store::config::{Cloud, Environment};
use crate::store::lock_store::Version;
use crate::store::request::client::{Built, CloudParts, Deleted};
use async_trait::async_trait;
use builder::{truthy, Builder};
use conditional_delete::Deleter;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::path::Path;
use object_store::{BackoffConfig, ClientConfigKey, RetryConfig};
use signing::{Chain, Signing};
use std::time::Duration;

/// Builds the object_store client of `scheme://authority` and what goes with it.
pub(crate) fn build(cloud: Cloud, scheme: &str, authority: &str, given: &Options) -> Result<Built> {
    tls::install_provider();
    let (options, credentials, env) = (
        &given.store,
        given.credentials.as_ref(),
        &*given.environment,
    );
    let url = format!("{scheme}://{authority}");
    if let Some(c) = credentials.filter(|c| c.cloud() != cloud) {
        return Err(Error::InvalidArgument(format!(
            "credentials for {} ({}) given for {url}, a {} store; give the credentials of {}",
            c.cloud().name(),
            c.source(),
            cloud.name(),
            cloud.name()
        )));
    }
    let given = match options.is_empty() {
        true => "none".to_string(),
        false => options
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    };
    let sources = format!("storage options given: {given}");
    // The one place a cloud is picked by name: its folder's builder does the rest.
    match cloud {
        Cloud::S3 => configure::<AmazonS3Builder>(&url, options, credentials, env, sources),
        Cloud::Azure => {
            configure::<MicrosoftAzureBuilder>(&url, options, credentials, env, sources)
        }
        Cloud::Gcs => {
            configure::<GoogleCloudStorageBuilder>(&url, options, credentials, env, sources)
        }
    }
}

/// What a cloud client adds to object_store's.
struct Parts {
    signing: Signing,
    deleter: Deleter,
}

#[async_trait]
impl CloudParts for Parts {
    fn credentials_source(&self) -> String {
        self.signing.source()
    }

    async fn ready(&self) -> std::result::Result<(), String> {
        self.signing.ready().await
    }

    fn credentials_failure(&self, e: &object_store::Error) -> Option<String> {
        failure_in(e)
    }

    async fn delete_if(
        &self,
        path: &Path,
        expected: &Version,
        valid_for: Duration,
    ) -> object_store::Result<Deleted> {
        self.deleter.delete_if(path, expected, valid_for).await
    }
}

/// The client settings of every store: no retries inside object_store. Each request goes
/// through the store's gate ([`crate::store::request::gate`]), which sees every answer (a throttling one
/// slows the whole process down, [`crate::store::load`]) and tries a request whose connection
/// closed under it once more; the callers retry the rest with their deadlines in view
/// (a lease's, an acquisition's). Retries hidden inside a request would spend the store's
/// capacity where the process cannot see it.
fn retry() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: 0,
        retry_timeout: Duration::from_secs(30),
    }
}

fn configure<B: Builder>(
    url: &str,
    options: &[(String, String)],
    credentials: Option<&Credentials>,
    env: &Environment,
    mut sources: String,
) -> Result<Built> {
    let store = B::CLOUD.name();
    let options = &B::expand(options, env, &mut sources)?;
    // Set as configuration keys, not with `with_client_options`, which would replace the
    // client options read from the environment (AWS_ALLOW_HTTP, proxies, CA bundles).
    let mut b = B::from_env(env)
        .with_url(url)
        .with_retry(retry())
        .with_config(B::client_key(ClientConfigKey::Timeout), "30s")
        .with_config(B::client_key(ClientConfigKey::ConnectTimeout), "5s");
    for (k, v) in options {
        check_text(k, v)?;
        if B::OPTIONS_OF_OURS.contains(&k.as_str()) {
            return Err(Error::InvalidArgument(format!(
                "storage option {k:?} is read by blob-lock's Python package, which turns it into {store}'s own keys before a store is opened; from Rust, give those keys or credentials of your own (store::Credentials)"
            )));
        }
        let key: B::Key = k.parse().map_err(|_| {
            let hint = match option_names::nearest::<B>(k) {
                Some(near) => format!("did you mean {near:?}? "),
                None => String::new(),
            };
            Error::InvalidArgument(format!(
                "unknown storage option {k:?} for {store}: {hint}see object_store's configuration keys for {store}"
            ))
        })?;
        if B::is_bucket(&key) {
            return Err(Error::InvalidArgument(format!(
                "storage option {k:?} names the bucket or container, which the lock URI {url} names already; leave it out"
            )));
        }
        b = b.with_config(key, v);
    }
    if let Some(c) = credentials {
        b = b.with_credentials(c);
    }
    b = plain_http::<B>(b, options, env)?;
    for (key, where_) in B::urls() {
        if let Some(value) = b.get(&key) {
            check_url(&value).map_err(|why| {
                Error::InvalidArgument(format!(
                    "invalid {store} {where_}: {value:?} {why} ({} in storage_options, or its variable in the environment)",
                    key.as_ref()
                ))
            })?;
        }
    }
    for (key, what) in B::host_parts() {
        if let Some(value) = b.get(&key) {
            let ok = !value.is_empty()
                && value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !ok {
                return Err(Error::InvalidArgument(format!(
                    "invalid {store} {what} {value:?} ({} in storage_options, or its variable in the environment): it becomes part of host names and signatures, so only letters, digits, '-', '_' and '.' are allowed",
                    key.as_ref()
                )));
            }
        }
    }
    let name = match b.endpoint(env) {
        Some(endpoint) => format!("{url} at {endpoint}"),
        None => url.to_string(),
    };
    let chain_uses = match credentials {
        Some(c) if c.chain_note().is_none() => None, // given: signed with them
        _ => b.chain_uses(),
    };
    let deleter_options = conditional_delete::client_options(|k| b.get(&B::client_key(k)));
    let built = b.finish(env).map_err(|e| match B::credentials_problem(&e) {
        Some(message) => Error::Credentials {
            uri: url.to_string(),
            message,
        },
        None => Error::InvalidArgument(format!(
            "cannot configure the store for {url}: {e} ({sources}; the rest comes from the environment)"
        )),
    })?;
    let (store, ask, signer) = built;
    let signing = match (credentials, chain_uses) {
        (Some(c), _) if c.chain_note().is_none() => Signing::Given(c.clone()),
        (_, None) => Signing::Unsigned,
        (c, Some(what)) => Signing::Chain(Chain {
            ask,
            store: B::CLOUD.name(),
            fix: B::NO_CREDENTIALS_FIX,
            what,
            note: c.and_then(|c| c.chain_note().cloned()),
            source: c.map(|c| c.source().to_string()),
        }),
    };
    let deleter = Deleter::new(
        B::CLOUD.name(),
        B::DELETE_CONDITION,
        signer,
        deleter_options,
    );
    Ok(Built {
        store,
        name,
        parts: Box::new(Parts { signing, deleter }),
    })
}

/// One rule for plain HTTP, wherever the endpoint came from (storage options, the
/// environment, an AWS profile): an `http://` endpoint is the caller's choice and is
/// allowed; an `http://` endpoint with plain HTTP explicitly refused is an error now, not
/// a request that object_store's client refuses later (which would read as a store that
/// never answered).
fn plain_http<B: Builder>(b: B, options: &[(String, String)], env: &Environment) -> Result<B> {
    let allow = B::client_key(ClientConfigKey::AllowHttp);
    let Some(endpoint) = B::endpoints()
        .iter()
        .filter_map(|k| b.get(k))
        .find(|v| v.len() > 7 && v[..7].eq_ignore_ascii_case("http://"))
    else {
        return Ok(b);
    };
    let given = options
        .iter()
        .find(|(k, _)| {
            k.parse::<B::Key>()
                .is_ok_and(|k| k.as_ref() == allow.as_ref())
        })
        .map(|(k, v)| (format!("the storage option {k}"), v.clone()))
        .or_else(|| {
            env.starting_with(B::ENV_PREFIX)
                .find(|(name, _)| {
                    name.to_ascii_lowercase()
                        .parse::<B::Key>()
                        .is_ok_and(|k| k.as_ref() == allow.as_ref())
                })
                .map(|(name, v)| (name.to_string(), v.to_string()))
        });
    match given {
        None => Ok(b.with_config(allow, "true")),
        Some((_, v)) if truthy(Some(v.clone())) => Ok(b),
        Some((what, v)) => Err(Error::InvalidArgument(format!(
            "the {} endpoint {endpoint} is plain HTTP, but {what} is {v:?}, which refuses it: use an https:// endpoint, or leave {what} out (an http:// endpoint is allowed by itself)",
            B::CLOUD.name()
        ))),
    }
}

/// A value that becomes a request header or a URL must be one line: object_store panics on
/// a header value with a line break (a pasted key with its newline). Keys that hold whole
/// documents (a service account key, a PEM certificate) may span lines.
fn check_text(key: &str, value: &str) -> Result<()> {
    let document = key.contains("service_account_key") || key.contains("certificate");
    let bad = value
        .chars()
        .find(|c| *c == '\0' || (!document && c.is_control()));
    match bad {
        Some(c) => Err(Error::InvalidArgument(format!(
            "storage option {key:?} contains the control character {c:?}; a copied value may have taken a line break with it"
        ))),
        None => Ok(()),
    }
}

/// Checks a URL that object_store will put in front of object paths.
pub(crate) fn check_url(value: &str) -> std::result::Result<(), String> {
    if value.is_empty() {
        return Err("is empty; give an http:// or https:// URL".into());
    }
    if let Some(c) = value
        .chars()
        .find(|c| !c.is_ascii() || c.is_ascii_whitespace() || c.is_ascii_control())
    {
        return Err(format!(
            "contains {c:?}; a URL here is ASCII without spaces (punycode for international host names)"
        ));
    }
    let url = url::Url::parse(value).map_err(|e| {
        format!(
            "is not a URL ({e}); write it with its scheme, as http://{value} or https://{value}"
        )
    })?;
    if !matches!(url.scheme(), "http" | "https" | "socks5" | "socks5h") {
        return Err(format!(
            "has no http:// or https:// scheme; write it as http://{value} or https://{value}"
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("has no host".into());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("has a query or a fragment, which object paths would be appended to".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::config::options::tests::options;

    #[test]
    fn values_that_become_urls_are_checked_first() {
        for (opts, why) in [
            (
                vec![("aws_endpoint", "localhost:9000")],
                "http://localhost:9000",
            ),
            (
                vec![("aws_endpoint", "http://127.0.0.1:99999")],
                "not a URL",
            ),
            (
                vec![("aws_endpoint", "http://exa mple.com")],
                "without spaces",
            ),
            (vec![("aws_endpoint", "")], "is empty"),
            (vec![("aws_endpoint", "http://h/?x=1")], "query"),
            (vec![("aws_region", "us east")], "host name"),
            (vec![("aws_bucket", "other")], "names the bucket"),
            (vec![("aws_no_such_key", "1")], "unknown storage option"),
            (
                vec![("aws_profile", "dev")],
                "read by blob-lock's Python package",
            ),
            (vec![("aws_access_key_id", "key\n")], "control character"),
        ] {
            let e = build(Cloud::S3, "s3", "checked", &options(&opts))
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains(why), "{opts:?}: {e} should say {why}");
        }
        let account = options(&[("azure_storage_account_name", "my account")]);
        let e = build(Cloud::Azure, "az", "c", &account)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("account name"), "{e}");
    }
}
