//! One client per cloud store and process, built on first use and shared by every lock,
//! keep-alive, inspection and probe on that store. A store is its scheme, bucket or
//! container, and effective configuration: the storage options given, the credentials, and
//! the environment variables that object_store and its HTTP client read (`AWS_*`,
//! `AZURE_*`, `GOOGLE_*`, proxies, certificates). Building a client costs milliseconds of
//! CPU and a connection pool of its own, so it is built once; a lock on a store already in
//! use only looks it up.

use super::build;
use crate::errors::Result;
use crate::per_process::PerProcess;
use crate::store::config::credentials::Credentials;
use crate::store::config::options::Options;
use crate::store::config::Cloud;
use crate::store::request::client::{Client, Facts};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, TryLockError};

/// The client of the cloud store `scheme://authority` with `options`: this process's
/// shared one, built on first use.
pub(crate) fn client(
    cloud: Cloud,
    scheme: &str,
    authority: &str,
    options: &Options,
) -> Result<Arc<Client>> {
    let key = registry_key(scheme, authority, options);
    get_or_build(&key, |facts| {
        let built = build(cloud, scheme, authority, options)?;
        let facts = facts.unwrap_or_default();
        Ok(Client::cloud(built, cloud, options.trust, facts))
    })
}

/// A client of its own, shared with nothing (`doctor --race` races independent clients).
pub(crate) fn private_client(
    cloud: Cloud,
    scheme: &str,
    authority: &str,
    options: &Options,
) -> Result<Client> {
    let built = build(cloud, scheme, authority, options)?;
    Ok(Client::cloud(
        built,
        cloud,
        options.trust,
        Default::default(),
    ))
}

fn registry_key(scheme: &str, authority: &str, options: &Options) -> String {
    let credentials = options.credentials.as_ref().map_or(0, Credentials::id);
    let mut key = format!(
        "{scheme}://{authority}\n{}\n{credentials:x}\n",
        options.trust
    );
    for (k, v) in &options.store {
        key.push_str(k);
        key.push('=');
        key.push_str(v);
        key.push('\n');
    }
    // A change of the environment makes a new client, as building one then would see it.
    key.push_str(&format!("{:x}", options.environment.digest()));
    key
}

type Clients = Mutex<HashMap<String, Arc<Client>>>;

/// The process's clients by key. A child made by fork builds its own (the parent's
/// connections belong to the parent's runtime, see [`PerProcess`]), looking in its parent's
/// map, when it can, only for what the parent learnt about each store.
static REGISTRY: PerProcess<Clients> = PerProcess::new(Default::default);

/// Clients kept beyond this many are dropped once no lock uses them.
const KEEP: usize = 256;

fn get_or_build(
    key: &str,
    build: impl FnOnce(Option<Arc<Facts>>) -> Result<Client>,
) -> Result<Arc<Client>> {
    let (mine, parents) = REGISTRY.with_parent();
    let lock = || mine.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = lock().get(key) {
        return Ok(c.clone());
    }
    // A thread of the parent may have held its map at the fork: then nothing is inherited.
    let inherited = parents.and_then(|p| match p.try_lock() {
        Ok(map) => map.get(key).map(|c| c.shared_facts()),
        Err(TryLockError::Poisoned(e)) => e.into_inner().get(key).map(|c| c.shared_facts()),
        Err(TryLockError::WouldBlock) => None,
    });
    // Built outside the lock: it takes milliseconds.
    let fresh = Arc::new(build(inherited)?);
    let mut clients = lock();
    if let Some(c) = clients.get(key) {
        return Ok(c.clone()); // another thread built it meanwhile
    }
    if clients.len() >= KEEP {
        clients.retain(|_, c| Arc::strong_count(c) > 1);
    }
    clients.insert(key.to_string(), fresh.clone());
    Ok(fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_per_store_and_configuration() {
        use crate::store::config::options::tests::options;
        let o = options(&[
            ("aws_region", "us-east-1"),
            ("aws_endpoint", "http://127.0.0.1:9"),
        ]);
        let a = client(Cloud::S3, "s3", "registry-one", &o).unwrap();
        let b = client(Cloud::S3, "s3", "registry-one", &o).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "the same store shares a client");
        let other = client(Cloud::S3, "s3", "registry-two", &o).unwrap();
        assert!(!Arc::ptr_eq(&a, &other), "another bucket has its own");
        let p = options(&[
            ("aws_region", "us-west-2"),
            ("aws_endpoint", "http://127.0.0.1:9"),
        ]);
        let c = client(Cloud::S3, "s3", "registry-one", &p).unwrap();
        assert!(!Arc::ptr_eq(&a, &c), "other options make another client");
        assert_eq!(a.name(), "s3://registry-one at http://127.0.0.1:9");
    }
}
