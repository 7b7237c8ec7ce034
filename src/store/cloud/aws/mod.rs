//! Amazon S3 and S3-compatible stores: object_store's S3 client as blob-lock configures it
//! (its environment, keys, endpoint, credential chain), its options' names, and its
//! conditional delete (`If-Match`, signed into the request).

use super::builder::{keys_from, truthy, Builder, Finished};
use super::conditional_delete::Condition;
use super::signing::ask;
use crate::store::config::credentials::Credentials;
use crate::store::config::{Cloud, Environment};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey as S3Key};
use object_store::{ClientConfigKey, RetryConfig};
use std::sync::Arc;

/// S3's own storage options.
const OPTION_NAMES: &[&str] = &[
    "aws_access_key_id",
    "aws_secret_access_key",
    "aws_session_token",
    "aws_region",
    "aws_default_region",
    "aws_endpoint",
    "aws_endpoint_url_s3",
    "aws_imdsv1_fallback",
    "aws_virtual_hosted_style_request",
    "aws_s3_express",
    "aws_metadata_endpoint",
    "aws_unsigned_payload",
    "aws_checksum_algorithm",
    "aws_container_credentials_relative_uri",
    "aws_container_credentials_full_uri",
    "aws_container_authorization_token_file",
    "aws_web_identity_token_file",
    "aws_role_arn",
    "aws_role_session_name",
    "aws_endpoint_url_sts",
    "aws_skip_signature",
    "aws_copy_if_not_exists",
    "aws_conditional_put",
    "aws_disable_tagging",
    "aws_request_payer",
    "aws_server_side_encryption",
    "aws_sse_kms_key_id",
    "aws_sse_bucket_key_enabled",
    "aws_sse_customer_key_base64",
    "aws_profile", // the Python package's: the AWS profile to read
];

impl Builder for AmazonS3Builder {
    type Key = S3Key;
    const CLOUD: Cloud = Cloud::S3;
    const OPTION_NAMES: &'static [&'static str] = OPTION_NAMES;
    const OPTIONS_OF_OURS: &'static [&'static str] = &["aws_profile"];
    const NO_CREDENTIALS_FIX: &'static str =
        "give aws_access_key_id and aws_secret_access_key in the storage options (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or credentials of your own (store::Credentials)";
    const DELETE_CONDITION: Condition = Condition {
        header: "if-match",
        value: |v| v.e_tag.clone(),
        signed: true,
    };
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
        let provider = ask(store.credentials().clone());
        Ok((store.clone(), provider, store))
    }
}
