//! What differs between the S3, Azure and GCS clients, behind one trait so that one function
//! configures them all (`super::configure`): the environment each reads, its keys, which of
//! them become URLs or host names, its endpoint, and what its own credential chain uses.

use super::check_url;
use crate::store::credentials::Credentials;
use crate::store::environment::Environment;
use crate::store::signing::ChainProvider;
use crate::store::uri::Cloud;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as S3Key};
use object_store::azure::{AzureConfigKey as AzKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey as GcsKey};
use object_store::signer::Signer;
use object_store::{ClientConfigKey, ObjectStore, RetryConfig};
use std::sync::Arc;

/// What the three builders have in common, so that one function configures them all.
pub(super) trait Builder: Sized {
    type Key: std::str::FromStr + AsRef<str> + Clone;
    const CLOUD: Cloud;
    /// The environment variables object_store reads for it.
    const ENV_PREFIX: &'static str;
    /// The builder configured from the environment, as object_store's `from_env` would
    /// from the process's.
    fn from_env(env: &Environment) -> Self;
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
    fn endpoint(&self, env: &Environment) -> Option<String>;
    /// The keys whose values are the endpoint of the store's requests.
    fn endpoints() -> Vec<Self::Key>;
    /// What object_store's own chain takes credentials from, as configured; None when
    /// requests are not signed.
    fn chain_uses(&self) -> Option<String>;
    /// The client, the credential provider object_store gave it, and the same client as
    /// the signer of URLs (prune's conditional deletes).
    fn finish(self, env: &Environment) -> object_store::Result<Finished>;
}

/// What a builder makes: the client, its credential provider, its signer.
pub(super) type Finished = (Arc<dyn ObjectStore>, ChainProvider, Arc<dyn Signer>);

/// True for a configuration value that object_store reads as true.
pub(super) fn truthy(value: Option<String>) -> bool {
    value.is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "on" | "yes" | "y"
        )
    })
}

/// `builder` with every variable of `env` under `prefix` that is one of its keys, as
/// object_store's `from_env` sets them.
fn keys_from<B: Builder>(mut builder: B, env: &Environment, prefix: &str) -> B {
    for (name, value) in env.starting_with(prefix) {
        if let Ok(key) = name.to_ascii_lowercase().parse::<B::Key>() {
            builder = builder.with_config(key, value);
        }
    }
    builder
}

impl Builder for AmazonS3Builder {
    type Key = S3Key;
    const CLOUD: Cloud = Cloud::S3;
    const ENV_PREFIX: &'static str = "AWS_";
    fn from_env(env: &Environment) -> Self {
        keys_from(AmazonS3Builder::new(), env, Self::ENV_PREFIX)
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
    fn endpoint(&self, _: &Environment) -> Option<String> {
        self.get_config_value(&S3Key::Endpoint)
            .or_else(|| self.get_config_value(&S3Key::S3Endpoint))
    }
    fn endpoints() -> Vec<S3Key> {
        vec![S3Key::Endpoint, S3Key::S3Endpoint]
    }
    fn chain_uses(&self) -> Option<String> {
        // In object_store's order (AmazonS3Builder::build).
        let get = |k: S3Key| self.get_config_value(&k).filter(|v| !v.is_empty());
        if truthy(get(S3Key::SkipSignature)) {
            return None;
        }
        if get(S3Key::AccessKeyId).is_some() || get(S3Key::SecretAccessKey).is_some() {
            return Some("the keys given".into());
        }
        if let (Some(file), Some(role)) = (get(S3Key::WebIdentityTokenFile), get(S3Key::RoleArn)) {
            return Some(format!(
                "web identity (the role {role} with the token in {file}) at STS"
            ));
        }
        if let Some(uri) = get(S3Key::ContainerCredentialsRelativeUri) {
            return Some(format!(
                "the container credentials endpoint (ECS) http://169.254.170.2{uri}"
            ));
        }
        if let (Some(uri), Some(_)) = (
            get(S3Key::ContainerCredentialsFullUri),
            get(S3Key::ContainerAuthorizationTokenFile),
        ) {
            return Some(format!("EKS Pod Identity at {uri}"));
        }
        let endpoint =
            get(S3Key::MetadataEndpoint).unwrap_or_else(|| "http://169.254.169.254".into());
        Some(format!("the instance metadata service at {endpoint}"))
    }
    fn finish(self, _: &Environment) -> object_store::Result<Finished> {
        let store = Arc::new(self.build()?);
        let provider = ChainProvider::S3(store.credentials().clone());
        Ok((store.clone(), provider, store))
    }
}

impl Builder for MicrosoftAzureBuilder {
    type Key = AzKey;
    const CLOUD: Cloud = Cloud::Azure;
    const ENV_PREFIX: &'static str = "AZURE_";
    fn from_env(env: &Environment) -> Self {
        let builder = keys_from(MicrosoftAzureBuilder::new(), env, Self::ENV_PREFIX);
        match env.get("MSI_ENDPOINT") {
            Some(msi) => builder.with_msi_endpoint(msi),
            None => builder,
        }
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
    fn endpoint(&self, env: &Environment) -> Option<String> {
        let emulator = self.get_config_value(&AzKey::UseEmulator).is_some_and(|v| {
            matches!(
                v.to_ascii_lowercase().as_str(),
                "1" | "true" | "on" | "yes" | "y"
            )
        });
        if emulator {
            // object_store reads the emulator's address from here only.
            return Some(
                env.get("AZURITE_BLOB_STORAGE_URL")
                    .unwrap_or("http://127.0.0.1:10000")
                    .to_string(),
            );
        }
        self.get_config_value(&AzKey::Endpoint)
    }
    fn endpoints() -> Vec<AzKey> {
        vec![AzKey::Endpoint]
    }
    fn chain_uses(&self) -> Option<String> {
        // In object_store's order (MicrosoftAzureBuilder::build).
        let get = |k: AzKey| self.get_config_value(&k).filter(|v| !v.is_empty());
        if truthy(get(AzKey::SkipSignature)) {
            return None;
        }
        if truthy(get(AzKey::UseEmulator)) {
            return Some("the emulator's account key".into());
        }
        if get(AzKey::AccessKey).is_some()
            || get(AzKey::Token).is_some()
            || get(AzKey::SasKey).is_some()
        {
            return Some("the key, token or SAS given".into());
        }
        if let (Some(_), Some(_), Some(file)) = (
            get(AzKey::ClientId),
            get(AzKey::AuthorityId),
            get(AzKey::FederatedTokenFile),
        ) {
            return Some(format!("workload identity (the token in {file})"));
        }
        if let (Some(id), Some(_), Some(_)) = (
            get(AzKey::ClientId),
            get(AzKey::ClientSecret),
            get(AzKey::AuthorityId),
        ) {
            return Some(format!("the service principal {id}"));
        }
        if truthy(get(AzKey::UseAzureCli)) {
            return Some("the Azure CLI (az account get-access-token)".into());
        }
        let endpoint = get(AzKey::MsiEndpoint)
            .unwrap_or_else(|| "http://169.254.169.254/metadata/identity/oauth2/token".into());
        Some(format!("managed identity at {endpoint}"))
    }
    fn finish(self, env: &Environment) -> object_store::Result<Finished> {
        if let Some(emulator) = env.get("AZURITE_BLOB_STORAGE_URL") {
            if let Err(why) = check_url(emulator) {
                return Err(object_store::Error::Generic {
                    store: "MicrosoftAzure",
                    source: format!("AZURITE_BLOB_STORAGE_URL {emulator:?} {why}").into(),
                });
            }
        }
        let store = Arc::new(self.build()?);
        let provider = ChainProvider::Azure(store.credentials().clone());
        Ok((store.clone(), provider, store))
    }
}

impl Builder for GoogleCloudStorageBuilder {
    type Key = GcsKey;
    const CLOUD: Cloud = Cloud::Gcs;
    const ENV_PREFIX: &'static str = "GOOGLE_";
    fn from_env(env: &Environment) -> Self {
        let builder = match env.get("SERVICE_ACCOUNT") {
            Some(path) => GoogleCloudStorageBuilder::new().with_service_account_path(path),
            None => GoogleCloudStorageBuilder::new(),
        };
        keys_from(builder, env, Self::ENV_PREFIX)
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
    fn endpoint(&self, _: &Environment) -> Option<String> {
        self.get_config_value(&GcsKey::BaseUrl)
    }
    fn endpoints() -> Vec<GcsKey> {
        vec![GcsKey::BaseUrl]
    }
    fn chain_uses(&self) -> Option<String> {
        // In object_store's order (GoogleCloudStorageBuilder::build).
        let get = |k: GcsKey| self.get_config_value(&k).filter(|v| !v.is_empty());
        if truthy(get(GcsKey::SkipSignature)) {
            return None;
        }
        if let Some(path) = get(GcsKey::ServiceAccount) {
            return Some(format!("the service account key in {path}"));
        }
        if get(GcsKey::ServiceAccountKey).is_some() {
            return Some("the service account key given".into());
        }
        if let Some(path) = get(GcsKey::ApplicationCredentials) {
            return Some(format!("the application credentials in {path}"));
        }
        Some("gcloud's application-default file, then the metadata server".into())
    }
    fn finish(self, _: &Environment) -> object_store::Result<Finished> {
        let builder = match emulator_signing(&self) {
            Some(signing) => self.with_signing_credentials(signing),
            None => self,
        };
        let store = Arc::new(builder.build()?);
        let provider = ChainProvider::Gcs(store.credentials().clone());
        Ok((store.clone(), provider, store))
    }
}

/// object_store signs URLs through the signBlob API when a service-account key says
/// `disable_oauth` (an emulator's key), which no emulator serves; a private key in that key
/// signs them here instead, as a real key's does (prune's conditional delete on the GCS
/// test server).
fn emulator_signing(
    builder: &GoogleCloudStorageBuilder,
) -> Option<object_store::gcp::GcpSigningCredentialProvider> {
    let text = builder.get(&GcsKey::ServiceAccountKey)?;
    let key: serde_json::Value = serde_json::from_str(&text).ok()?;
    if key.get("disable_oauth")?.as_bool() != Some(true) {
        return None;
    }
    let pem = key.get("private_key")?.as_str().filter(|k| !k.is_empty())?;
    let private_key = object_store::gcp::ServiceAccountKey::from_pem(pem.as_bytes()).ok()?;
    let email = key.get("client_email")?.as_str()?.to_string();
    Some(Arc::new(object_store::StaticCredentialProvider::new(
        object_store::gcp::GcpSigningCredential {
            email,
            private_key: Some(private_key),
        },
    )))
}
