//! Google Cloud Storage: object_store's GCS client as blob-lock configures it (its
//! environment, keys, base URL, credential chain, an emulator's key made to sign), its
//! options' names, and its conditional delete (`x-goog-if-generation-match`, signed).

use super::builder::{keys_from, truthy, Builder, Finished};
use super::conditional_delete::Condition;
use super::signing::ask;
use crate::store::config::credentials::Credentials;
use crate::store::config::{Cloud, Environment};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey as GcsKey};
use object_store::{ClientConfigKey, RetryConfig};
use std::sync::Arc;

/// GCS's own storage options.
const OPTION_NAMES: &[&str] = &[
    "google_service_account",
    "google_service_account_key",
    "google_base_url",
    "google_application_credentials",
    "google_bearer_token",
    "google_skip_signature",
];

impl Builder for GoogleCloudStorageBuilder {
    type Key = GcsKey;
    const CLOUD: Cloud = Cloud::Gcs;
    const OPTION_NAMES: &'static [&'static str] = OPTION_NAMES;
    const NO_CREDENTIALS_FIX: &'static str =
        "give a service account key (GOOGLE_SERVICE_ACCOUNT or GOOGLE_APPLICATION_CREDENTIALS), or credentials of your own (store::Credentials)";
    const DELETE_CONDITION: Condition = Condition {
        header: "x-goog-if-generation-match",
        value: |v| v.version.clone(),
        signed: true,
    };
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
        let provider = ask(store.credentials().clone());
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
