//! The names of object_store's configuration keys, for the "did you mean" of an unknown
//! storage option (`aws_secret_acces_key`). object_store parses its keys but cannot list
//! them; a test checks that every name each cloud's folder lists still parses, so a renamed
//! key is noticed.

use super::builder::Builder;
use crate::store::config::options::CONDITIONAL_WRITES;

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

/// The known storage option of `B`'s cloud nearest to `given`.
pub(crate) fn nearest<B: Builder>(given: &str) -> Option<String> {
    let prefix = B::ENV_PREFIX.to_ascii_lowercase();
    let prefixed: Vec<String> = CLIENT.iter().map(|k| format!("{prefix}{k}")).collect();
    let mut names: Vec<&str> = B::OPTION_NAMES.iter().chain(CLIENT).copied().collect();
    names.extend(prefixed.iter().map(String::as_str));
    names.push(CONDITIONAL_WRITES);
    crate::nearest::nearest(given, names).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::aws::AmazonS3Builder;
    use object_store::azure::MicrosoftAzureBuilder;
    use object_store::gcp::GoogleCloudStorageBuilder;

    fn every_name_parses<B: Builder>() {
        let own = B::OPTION_NAMES
            .iter()
            .filter(|n| !B::OPTIONS_OF_OURS.contains(n));
        for name in own.chain(CLIENT) {
            assert!(name.parse::<B::Key>().is_ok(), "{name}");
        }
        for name in B::OPTIONS_OF_OURS {
            assert!(B::OPTION_NAMES.contains(name), "{name}");
        }
    }

    #[test]
    fn every_name_is_a_key_object_store_knows() {
        every_name_parses::<AmazonS3Builder>();
        every_name_parses::<MicrosoftAzureBuilder>();
        every_name_parses::<GoogleCloudStorageBuilder>();
    }

    #[test]
    fn a_typo_gets_the_key_meant() {
        assert_eq!(
            nearest::<AmazonS3Builder>("aws_secret_acces_key").as_deref(),
            Some("aws_secret_access_key")
        );
        assert_eq!(
            nearest::<AmazonS3Builder>("aws_profil").as_deref(),
            Some("aws_profile")
        );
        assert_eq!(
            nearest::<MicrosoftAzureBuilder>("azure_storage_acount_name").as_deref(),
            Some("azure_storage_account_name")
        );
        assert_eq!(nearest::<GoogleCloudStorageBuilder>("colour"), None);
    }
}
