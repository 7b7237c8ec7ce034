//! The names of object_store's configuration keys, for the "did you mean" of an unknown
//! storage option (`aws_secret_acces_key`). object_store parses its keys but cannot list
//! them; a test checks that every name here still parses, so a renamed key is noticed.

use super::uri::Cloud;

const S3: &[&str] = &[
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
];

const AZURE: &[&str] = &[
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

const GCS: &[&str] = &[
    "google_service_account",
    "google_service_account_key",
    "google_base_url",
    "google_application_credentials",
    "google_bearer_token",
    "google_skip_signature",
];

/// The HTTP client's keys, taken with or without the cloud's prefix.
const CLIENT: &[&str] = &[
    "allow_http",
    "allow_invalid_certificates",
    "connect_timeout",
    "default_content_type",
    "http1_only",
    "http2_only",
    "pool_idle_timeout",
    "pool_max_idle_per_host",
    "proxy_url",
    "proxy_ca_certificate",
    "proxy_excludes",
    "timeout",
    "user_agent",
];

/// The known storage option nearest to `given`, for `cloud`.
pub(crate) fn nearest(cloud: Cloud, given: &str) -> Option<String> {
    let (own, prefix): (&[&str], &str) = match cloud {
        Cloud::S3 => (S3, "aws_"),
        Cloud::Azure => (AZURE, "azure_"),
        Cloud::Gcs => (GCS, "google_"),
    };
    let prefixed: Vec<String> = CLIENT.iter().map(|k| format!("{prefix}{k}")).collect();
    let mut names: Vec<&str> = own.iter().chain(CLIENT).copied().collect();
    names.extend(prefixed.iter().map(String::as_str));
    names.push(super::storage_options::CONDITIONAL_WRITES);
    if cloud == Cloud::S3 {
        names.push("aws_profile"); // the Python package's: the AWS profile to read
    }
    crate::nearest::nearest(given, names).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::aws::AmazonS3ConfigKey;
    use object_store::azure::AzureConfigKey;
    use object_store::gcp::GoogleConfigKey;

    #[test]
    fn every_name_is_a_key_object_store_knows() {
        for name in S3.iter().chain(CLIENT) {
            assert!(name.parse::<AmazonS3ConfigKey>().is_ok(), "{name}");
        }
        for name in AZURE.iter().filter(|n| !n.ends_with("connection_string")) {
            assert!(name.parse::<AzureConfigKey>().is_ok(), "{name}");
        }
        for name in GCS.iter().chain(CLIENT) {
            assert!(name.parse::<GoogleConfigKey>().is_ok(), "{name}");
        }
    }

    #[test]
    fn a_typo_gets_the_key_meant() {
        assert_eq!(
            nearest(Cloud::S3, "aws_secret_acces_key").as_deref(),
            Some("aws_secret_access_key")
        );
        assert_eq!(
            nearest(Cloud::Azure, "azure_storage_acount_name").as_deref(),
            Some("azure_storage_account_name")
        );
        assert_eq!(nearest(Cloud::Gcs, "colour"), None);
    }
}
