//! Azure storage connection strings (`AccountName=...;AccountKey=...`, the Azurite
//! development string, `BlobEndpoint=...;SharedAccessSignature=...`), as the Azure tools
//! read them from `AZURE_STORAGE_CONNECTION_STRING` or as the storage option
//! `azure_storage_connection_string`. object_store has no such key: the string is expanded
//! here into the keys it has. Its values are secrets: no message repeats them.

use crate::errors::{Error, Result};

/// The storage option that holds a connection string.
pub(crate) const OPTION: &str = "azure_storage_connection_string";
/// The environment variable the Azure tools read it from.
pub(crate) const VARIABLE: &str = "AZURE_STORAGE_CONNECTION_STRING";

/// Options that name the account: with one of these given, a connection string in the
/// environment (perhaps of another account) is not used.
const NAMES_ACCOUNT: [&str; 5] = [
    "azure_storage_account_name",
    "account_name",
    "azure_storage_endpoint",
    "azure_endpoint",
    "azure_storage_use_emulator",
];

/// Storage options: object_store's configuration keys and their values.
pub(crate) type Options = Vec<(String, String)>;

/// The storage options with a connection string (given as [`OPTION`], else read from
/// [`VARIABLE`] when the options name no account) replaced by the keys it stands for, and
/// where the string came from ([`OPTION`] or [`VARIABLE`]; None without one). Options given
/// explicitly win over the string's parts.
pub(crate) fn expand(
    options: &[(String, String)],
    env: &super::Environment,
) -> Result<(Options, Option<&'static str>)> {
    let given = options.iter().find(|(k, _)| k == OPTION).map(|(_, v)| v);
    let from_env;
    let (text, origin) = match given {
        Some(v) => (v.as_str(), OPTION),
        None => {
            let names = options
                .iter()
                .any(|(k, _)| NAMES_ACCOUNT.contains(&k.as_str()));
            from_env = env.get(VARIABLE).filter(|_| !names);
            match from_env {
                Some(v) => (v, VARIABLE),
                None => return Ok((options.to_vec(), None)),
            }
        }
    };
    let mut out: Vec<(String, String)> = options
        .iter()
        .filter(|(k, _)| k != OPTION)
        .cloned()
        .collect();
    for (key, value) in parse(text, origin)? {
        if !out.iter().any(|(k, _)| *k == key) {
            out.push((key, value));
        }
    }
    out.sort();
    Ok((out, Some(origin)))
}

/// The object_store keys a connection string stands for.
fn parse(text: &str, origin: &str) -> Result<Vec<(String, String)>> {
    let bad = |why: String| {
        Error::InvalidArgument(format!(
            "{origin} is not an Azure storage connection string: {why}; copy it whole from the portal's \"Access keys\" page or `az storage account show-connection-string` (or use UseDevelopmentStorage=true for Azurite)"
        ))
    };
    let mut parts = std::collections::HashMap::new();
    for (i, part) in text.split(';').map(str::trim).enumerate() {
        if part.is_empty() {
            continue;
        }
        // Values may hold '=' (base64 keys, SAS signatures): split at the first only.
        let Some((key, value)) = part.split_once('=') else {
            return Err(bad(format!("part {} has no '='", i + 1)));
        };
        parts.insert(key.trim().to_ascii_lowercase(), value.trim().to_string());
    }
    let get = |k: &str| parts.get(k).filter(|v| !v.is_empty()).cloned();
    let mut out = Vec::new();
    if get("usedevelopmentstorage").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        out.push(("azure_storage_use_emulator".into(), "true".into()));
        return Ok(out);
    }
    let account = get("accountname");
    let endpoint = match (get("blobendpoint"), &account) {
        (Some(e), _) => Some(e),
        (None, Some(name)) => get("endpointsuffix").map(|suffix| {
            let scheme = get("defaultendpointsprotocol").unwrap_or_else(|| "https".into());
            format!("{scheme}://{name}.blob.{suffix}")
        }),
        (None, None) => None,
    };
    if account.is_none() && endpoint.is_none() {
        return Err(bad("it names neither AccountName nor BlobEndpoint".into()));
    }
    if let Some(name) = account {
        out.push(("azure_storage_account_name".into(), name));
    }
    if let Some(e) = endpoint {
        if e.starts_with("http://") {
            out.push(("azure_allow_http".into(), "true".into()));
        }
        out.push(("azure_storage_endpoint".into(), e));
    }
    if let Some(key) = get("accountkey") {
        out.push(("azure_storage_account_key".into(), key));
    }
    if let Some(sas) = get("sharedaccesssignature") {
        out.push(("azure_storage_sas_key".into(), sas));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn account_key_strings_and_the_azurite_string() {
        let got = expand(&opts(&[(
            OPTION,
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5==;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;",
        )]), &Default::default())
        .unwrap();
        assert_eq!(got.1, Some(OPTION));
        let got = got.0;
        assert_eq!(
            got,
            opts(&[
                ("azure_allow_http", "true"),
                ("azure_storage_account_key", "a2V5=="),
                ("azure_storage_account_name", "devstoreaccount1"),
                (
                    "azure_storage_endpoint",
                    "http://127.0.0.1:10000/devstoreaccount1"
                ),
            ])
        );
        let dev = expand(
            &opts(&[(OPTION, "UseDevelopmentStorage=true")]),
            &Default::default(),
        )
        .unwrap()
        .0;
        assert_eq!(dev, opts(&[("azure_storage_use_emulator", "true")]));
        let suffix = expand(
            &opts(&[
                (
                    OPTION,
                    "AccountName=acct;AccountKey=k;EndpointSuffix=core.chinacloudapi.cn",
                ),
                ("azure_storage_account_key", "explicit"),
            ]),
            &Default::default(),
        )
        .unwrap()
        .0;
        assert!(suffix.contains(&(
            "azure_storage_endpoint".into(),
            "https://acct.blob.core.chinacloudapi.cn".into()
        )));
        assert!(
            suffix.contains(&("azure_storage_account_key".into(), "explicit".into())),
            "an explicit option wins: {suffix:?}"
        );
    }

    #[test]
    fn a_malformed_string_is_refused_without_repeating_it() {
        let e = expand(
            &opts(&[(OPTION, "AccountName=a;secretvalue")]),
            &Default::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("part 2 has no '='"), "{e}");
        assert!(!e.contains("secretvalue"), "{e}");
    }
}
