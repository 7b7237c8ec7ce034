//! Azure Blob Storage: object_store's Azure client as blob-lock configures it (its
//! environment, keys, endpoint or emulator, credential chain), connection strings
//! ([`connection_string`]), its options' names, a missing account told as a credentials
//! problem, and its conditional delete (`If-Match` beside the SAS, which signs no header).

mod connection_string;

use super::builder::{keys_from, truthy, Builder, Finished};
use super::check_url;
use super::conditional_delete::Condition;
use super::signing::ask;
use crate::errors::Result;
use crate::store::config::credentials::Credentials;
use crate::store::config::{Cloud, Environment};
use object_store::azure::{AzureConfigKey as AzKey, MicrosoftAzureBuilder};
use object_store::{ClientConfigKey, RetryConfig};
use std::sync::Arc;

/// Azure's own storage options.
const OPTION_NAMES: &[&str] = &[
    "azure_storage_account_name",
    "azure_storage_account_key",
    "azure_storage_client_id",
    "azure_storage_client_secret",
    "azure_storage_tenant_id",
    "azure_storage_authority_host",
    "azure_storage_sas_key",
    "azure_storage_token",
    "azure_storage_use_emulator",
    "azure_use_fabric_endpoint",
    "azure_storage_endpoint",
    "azure_msi_endpoint",
    "azure_object_id",
    "azure_msi_resource_id",
    "azure_federated_token_file",
    "azure_use_azure_cli",
    "azure_skip_signature",
    "azure_disable_tagging",
    "azure_credential_type",
    "azure_storage_connection_string",
];

impl Builder for MicrosoftAzureBuilder {
    type Key = AzKey;
    const CLOUD: Cloud = Cloud::Azure;
    const OPTION_NAMES: &'static [&'static str] = OPTION_NAMES;
    const OPTIONS_OF_OURS: &'static [&'static str] = &[connection_string::OPTION];
    const NO_CREDENTIALS_FIX: &'static str =
        "give an account key, a SAS or a connection string (AZURE_STORAGE_CONNECTION_STRING), or credentials of your own (store::Credentials)";
    const DELETE_CONDITION: Condition = Condition {
        header: "if-match",
        value: |v| v.e_tag.clone(),
        signed: false,
    };
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
        let provider = ask(store.credentials().clone());
        Ok((store.clone(), provider, store))
    }
    fn expand(
        options: &[(String, String)],
        env: &Environment,
        sources: &mut String,
    ) -> Result<Vec<(String, String)>> {
        let (options, origin) = connection_string::expand(options, env)?;
        if let Some(origin) = origin {
            let place = match origin {
                connection_string::VARIABLE => format!("the environment's {origin}"),
                _ => format!("the storage option {origin}"),
            };
            sources.push_str(&format!("; a connection string from {place}"));
        }
        Ok(options)
    }
    /// Where a storage account comes from, when object_store found none. (object_store
    /// names it only in words: its `MissingAccount` is private.)
    fn credentials_problem(e: &object_store::Error) -> Option<String> {
        e.to_string().contains("Account must be specified").then(|| {
            "no Azure storage account given: set AZURE_STORAGE_ACCOUNT_NAME (or the storage option azure_storage_account_name), or give a connection string in AZURE_STORAGE_CONNECTION_STRING (AccountName=...;AccountKey=...), or name it in the URL (abfs://container@ACCOUNT.dfs.core.windows.net/...); then sign in with `az login` (docs/credentials.md)".to_string()
        })
    }
}
