//! The one configuration of object_store's S3, Azure and GCS clients: from the environment,
//! the lock URI's bucket and the storage options, with blob-lock's retry and timeout
//! settings. Every value that object_store would put into a request URL or header
//! (endpoints, regions, account names, credentials) is checked here first: object_store
//! panics on a URL or header it cannot build.

use super::connection_string;
use super::credentials::Credentials;
use super::uri::Cloud;
use crate::errors::{Error, Result};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as S3Key};
use object_store::azure::{AzureConfigKey as AzKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey as GcsKey};
use object_store::{BackoffConfig, ClientConfigKey, ObjectStore, RetryConfig};
use std::sync::Arc;
use std::time::Duration;

/// Builds the object_store client: `(client, name for messages)`.
pub(crate) fn build(
    cloud: Cloud,
    scheme: &str,
    authority: &str,
    options: &[(String, String)],
    credentials: Option<&Credentials>,
) -> Result<(Arc<dyn ObjectStore>, String)> {
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
    match cloud {
        Cloud::S3 => configure::<AmazonS3Builder>(&url, options, credentials),
        Cloud::Azure => {
            let options = connection_string::expand(options)?;
            configure::<MicrosoftAzureBuilder>(&url, &options, credentials)
        }
        Cloud::Gcs => configure::<GoogleCloudStorageBuilder>(&url, options, credentials),
    }
}

/// The client settings of every store. Each call is bounded by the lock's own request
/// timeout ([`crate::timing::Timing::request_timeout`]); these only bound what object_store
/// does inside one call (its own retries of 5xx, 429 and dropped connections).
fn retry() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: 5,
        retry_timeout: Duration::from_secs(30),
    }
}

/// What the three builders have in common, so that one function configures them all.
trait Builder: Sized {
    type Key: std::str::FromStr + AsRef<str> + Clone;
    const CLOUD: Cloud;
    fn from_env() -> Self;
    fn with_url(self, url: &str) -> Self;
    fn with_retry(self, retry: RetryConfig) -> Self;
    fn with_config(self, key: Self::Key, value: &str) -> Self;
    /// Credentials from outside object_store's own chain (of this builder's cloud).
    fn with_credentials(self, credentials: &Credentials) -> Self;
    fn get(&self, key: &Self::Key) -> Option<String>;
    fn client_key(key: ClientConfigKey) -> Self::Key;
    /// Keys that name the bucket or container, which only the URI may do.
    fn is_bucket(key: &Self::Key) -> bool;
    /// Keys whose values become URLs, with where a user sets them.
    fn urls() -> Vec<(Self::Key, &'static str)>;
    /// Keys whose values become part of a host name (when no endpoint is set) or a
    /// signature: names, never text.
    fn host_parts() -> Vec<(Self::Key, &'static str)>;
    /// The endpoint, for messages.
    fn endpoint(&self) -> Option<String>;
    fn finish(self) -> object_store::Result<Arc<dyn ObjectStore>>;
}

fn configure<B: Builder>(
    url: &str,
    options: &[(String, String)],
    credentials: Option<&Credentials>,
) -> Result<(Arc<dyn ObjectStore>, String)> {
    let store = B::CLOUD.name();
    // Set as configuration keys, not with `with_client_options`, which would replace the
    // client options read from the environment (AWS_ALLOW_HTTP, proxies, CA bundles).
    let mut b = B::from_env()
        .with_url(url)
        .with_retry(retry())
        .with_config(B::client_key(ClientConfigKey::Timeout), "30s")
        .with_config(B::client_key(ClientConfigKey::ConnectTimeout), "5s");
    for (k, v) in options {
        check_text(k, v)?;
        let key: B::Key = k.parse().map_err(|_| {
            Error::InvalidArgument(format!(
                "unknown storage option {k:?} for {store}; see object_store's configuration keys for {store}"
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
    let name = match b.endpoint() {
        Some(endpoint) => format!("{url} at {endpoint}"),
        None => url.to_string(),
    };
    let built = b.finish().map_err(|e| {
        let given: Vec<&str> = options.iter().map(|(k, _)| k.as_str()).collect();
        let given = match given.is_empty() {
            true => "none".to_string(),
            false => given.join(", "),
        };
        Error::InvalidArgument(format!(
            "cannot configure the store for {url}: {e} (storage options given: {given}; the rest comes from the environment)"
        ))
    })?;
    Ok((built, name))
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
fn check_url(value: &str) -> std::result::Result<(), String> {
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

impl Builder for AmazonS3Builder {
    type Key = S3Key;
    const CLOUD: Cloud = Cloud::S3;
    fn from_env() -> Self {
        AmazonS3Builder::from_env()
    }
    fn with_url(self, url: &str) -> Self {
        AmazonS3Builder::with_url(self, url)
    }
    fn with_retry(self, retry: RetryConfig) -> Self {
        AmazonS3Builder::with_retry(self, retry)
    }
    fn with_config(self, key: S3Key, value: &str) -> Self {
        AmazonS3Builder::with_config(self, key, value)
    }
    fn with_credentials(self, credentials: &Credentials) -> Self {
        match credentials.aws() {
            Some(p) => AmazonS3Builder::with_credentials(self, p),
            None => self,
        }
    }
    fn get(&self, key: &S3Key) -> Option<String> {
        self.get_config_value(key)
    }
    fn client_key(key: ClientConfigKey) -> S3Key {
        S3Key::Client(key)
    }
    fn is_bucket(key: &S3Key) -> bool {
        matches!(key, S3Key::Bucket)
    }
    fn urls() -> Vec<(S3Key, &'static str)> {
        vec![
            (S3Key::Endpoint, "endpoint"),
            (S3Key::S3Endpoint, "S3 endpoint"),
            (S3Key::MetadataEndpoint, "metadata endpoint"),
            (
                S3Key::ContainerCredentialsFullUri,
                "container credentials URI",
            ),
            (S3Key::StsEndpoint, "STS endpoint"),
            (S3Key::Client(ClientConfigKey::ProxyUrl), "proxy URL"),
        ]
    }
    fn host_parts() -> Vec<(S3Key, &'static str)> {
        vec![(S3Key::Region, "region"), (S3Key::DefaultRegion, "region")]
    }
    fn endpoint(&self) -> Option<String> {
        self.get_config_value(&S3Key::Endpoint)
            .or_else(|| self.get_config_value(&S3Key::S3Endpoint))
    }
    fn finish(self) -> object_store::Result<Arc<dyn ObjectStore>> {
        Ok(Arc::new(self.build()?))
    }
}

impl Builder for MicrosoftAzureBuilder {
    type Key = AzKey;
    const CLOUD: Cloud = Cloud::Azure;
    fn from_env() -> Self {
        MicrosoftAzureBuilder::from_env()
    }
    fn with_url(self, url: &str) -> Self {
        MicrosoftAzureBuilder::with_url(self, url)
    }
    fn with_retry(self, retry: RetryConfig) -> Self {
        MicrosoftAzureBuilder::with_retry(self, retry)
    }
    fn with_config(self, key: AzKey, value: &str) -> Self {
        MicrosoftAzureBuilder::with_config(self, key, value)
    }
    fn with_credentials(self, credentials: &Credentials) -> Self {
        match credentials.azure_provider() {
            Some(p) => MicrosoftAzureBuilder::with_credentials(self, p),
            None => self,
        }
    }
    fn get(&self, key: &AzKey) -> Option<String> {
        self.get_config_value(key)
    }
    fn client_key(key: ClientConfigKey) -> AzKey {
        AzKey::Client(key)
    }
    fn is_bucket(key: &AzKey) -> bool {
        matches!(key, AzKey::ContainerName)
    }
    fn urls() -> Vec<(AzKey, &'static str)> {
        vec![
            (AzKey::Endpoint, "endpoint"),
            (AzKey::MsiEndpoint, "MSI endpoint"),
            (AzKey::AuthorityHost, "authority host"),
            (AzKey::FabricTokenServiceUrl, "Fabric token service URL"),
            (AzKey::Client(ClientConfigKey::ProxyUrl), "proxy URL"),
        ]
    }
    fn host_parts() -> Vec<(AzKey, &'static str)> {
        vec![(AzKey::AccountName, "account name")]
    }
    fn endpoint(&self) -> Option<String> {
        let emulator = self.get_config_value(&AzKey::UseEmulator).is_some_and(|v| {
            matches!(
                v.to_ascii_lowercase().as_str(),
                "1" | "true" | "on" | "yes" | "y"
            )
        });
        if emulator {
            // object_store reads the emulator's address from here only.
            return Some(
                std::env::var("AZURITE_BLOB_STORAGE_URL")
                    .unwrap_or_else(|_| "http://127.0.0.1:10000".into()),
            );
        }
        self.get_config_value(&AzKey::Endpoint)
    }
    fn finish(self) -> object_store::Result<Arc<dyn ObjectStore>> {
        if let Ok(emulator) = std::env::var("AZURITE_BLOB_STORAGE_URL") {
            if let Err(why) = check_url(&emulator) {
                return Err(object_store::Error::Generic {
                    store: "MicrosoftAzure",
                    source: format!("AZURITE_BLOB_STORAGE_URL {emulator:?} {why}").into(),
                });
            }
        }
        Ok(Arc::new(self.build()?))
    }
}

impl Builder for GoogleCloudStorageBuilder {
    type Key = GcsKey;
    const CLOUD: Cloud = Cloud::Gcs;
    fn from_env() -> Self {
        GoogleCloudStorageBuilder::from_env()
    }
    fn with_url(self, url: &str) -> Self {
        GoogleCloudStorageBuilder::with_url(self, url)
    }
    fn with_retry(self, retry: RetryConfig) -> Self {
        GoogleCloudStorageBuilder::with_retry(self, retry)
    }
    fn with_config(self, key: GcsKey, value: &str) -> Self {
        GoogleCloudStorageBuilder::with_config(self, key, value)
    }
    fn with_credentials(self, credentials: &Credentials) -> Self {
        match credentials.gcp() {
            Some(p) => GoogleCloudStorageBuilder::with_credentials(self, p),
            None => self,
        }
    }
    fn get(&self, key: &GcsKey) -> Option<String> {
        self.get_config_value(key)
    }
    fn client_key(key: ClientConfigKey) -> GcsKey {
        GcsKey::Client(key)
    }
    fn is_bucket(key: &GcsKey) -> bool {
        matches!(key, GcsKey::Bucket)
    }
    fn urls() -> Vec<(GcsKey, &'static str)> {
        vec![
            (GcsKey::BaseUrl, "base URL"),
            (GcsKey::Client(ClientConfigKey::ProxyUrl), "proxy URL"),
        ]
    }
    fn host_parts() -> Vec<(GcsKey, &'static str)> {
        Vec::new()
    }
    fn endpoint(&self) -> Option<String> {
        self.get_config_value(&GcsKey::BaseUrl)
    }
    fn finish(self) -> object_store::Result<Arc<dyn ObjectStore>> {
        Ok(Arc::new(self.build()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::client::tests::options;

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
            (vec![("aws_access_key_id", "key\n")], "control character"),
        ] {
            let e = build(Cloud::S3, "s3", "checked", &options(&opts).store, None)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains(why), "{opts:?}: {e} should say {why}");
        }
        let account = options(&[("azure_storage_account_name", "my account")]);
        let e = build(Cloud::Azure, "az", "c", &account.store, None)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("account name"), "{e}");
    }
}
