//! [`open`]: from a lock URI and its options to the store of its lockfile; [`open_object`]:
//! to the store of one object (a result that `write_once` publishes).

use super::config::options::Options;
use super::config::{Access, Cloud, Location};
use super::file::FileStore;
use super::lock_store::LockStore;
use super::object::ObjectLockStore;
use super::request::client::Client;
use super::request::gate::Timeouts;
use crate::errors::{Error, Result};
use crate::lockfile::LOCKFILE_NAME;
use crate::per_process::PerProcess;
use crate::timing::Timing;
use object_store::memory::InMemory;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where a URI's lockfiles are, reached: a folder on this machine, or a client of an object
/// store and the key under it. The one match from a URI's scheme to a store: opening a
/// lock, an object, a private client and a listing all start here.
pub(super) enum Place {
    /// A folder (or file) on this machine.
    Folder(PathBuf),
    /// Objects under `key` in `client`'s store (memory or a cloud).
    Objects { client: Arc<Client>, key: String },
}

/// Whose client a [`Place`] reaches its objects with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Sharing {
    /// The process's one client for the store.
    Shared,
    /// A client of its own (independent connections), for `doctor --race`.
    Private,
}

impl Place {
    /// The place `uri` names, with `options`: storage options and credentials are refused
    /// for stores that take none. Makes no request.
    pub(super) fn of(uri: &str, options: &Access, sharing: Sharing) -> Result<Place> {
        let location = Location::parse(uri)?;
        let options = Options::split(options)?;
        Ok(match location {
            Location::Memory { name, key } => {
                refuse_options(uri, "memory://", &options)?;
                Place::Objects {
                    client: memory(&name),
                    key,
                }
            }
            Location::File(path) => {
                refuse_options(uri, "file://", &options)?;
                Place::Folder(path)
            }
            Location::Cloud {
                kind,
                scheme,
                authority,
                key,
            } => {
                let client = cloud_client(kind, &scheme, &authority, &options, sharing)?;
                Place::Objects { client, key }
            }
        })
    }
}

/// The client of a cloud store: the process's shared one, or one of its own.
#[cfg(feature = "cloud")]
fn cloud_client(
    cloud: Cloud,
    scheme: &str,
    authority: &str,
    options: &Options,
    sharing: Sharing,
) -> Result<Arc<Client>> {
    use super::cloud::registry;
    Ok(match sharing {
        Sharing::Shared => registry::client(cloud, scheme, authority, options)?,
        Sharing::Private => Arc::new(registry::private_client(cloud, scheme, authority, options)?),
    })
}

/// A build without the `cloud` feature (the simulation's and the model check's, which
/// bring their own store) has no cloud client: opening a cloud URI says what is missing.
#[cfg(not(feature = "cloud"))]
fn cloud_client(
    cloud: Cloud,
    scheme: &str,
    authority: &str,
    _options: &Options,
    _sharing: Sharing,
) -> Result<Arc<Client>> {
    Err(Error::InvalidArgument(format!(
        "{scheme}://{authority}: this build of blob-lock has no {} client; build it with the `cloud` feature (on by default)",
        cloud.name()
    )))
}

/// Opens the store that holds `<uri>/lock.json`. `options` are object_store configuration
/// keys (`aws_endpoint`, `azure_storage_account_name`, ...) on top of the environment, and
/// blob-lock's own `blob_lock_conditional_writes`. Makes no request: a store already in use
/// in this process is only looked up.
pub fn open(uri: &str, options: &Access, timing: &Timing) -> Result<Arc<dyn LockStore>> {
    let lock_uri = format!("{}/{LOCKFILE_NAME}", uri.trim_end_matches('/'));
    let timeout = timing.request_timeout();
    Ok(match Place::of(uri, options, Sharing::Shared)? {
        Place::Folder(dir) => Arc::new(FileStore::new(dir.join(LOCKFILE_NAME), lock_uri, timeout)),
        Place::Objects { client, key } => Arc::new(ObjectLockStore::new(
            client,
            &key,
            lock_uri,
            Timeouts::of(timing),
        )?),
    })
}

/// Opens the store of exactly the object `uri` names (not a lock's folder): where
/// [`crate::write_once()`] publishes a result, each request bounded by `timeout`. The URI
/// must name an object: not a bucket, a store or a folder. Makes no request. On a file
/// system its writes are durable (flushed to disk before they are published).
pub fn open_object(uri: &str, options: &Access, timeout: Duration) -> Result<Arc<dyn LockStore>> {
    let not_an_object = |what: &str| {
        Error::InvalidArgument(format!(
            "{uri} names {what}, not an object: pass the URI of the result itself (such as s3://bucket/memo/abc/result)"
        ))
    };
    if uri.ends_with('/') {
        return Err(not_an_object("a folder (it ends with /)"));
    }
    Ok(match Place::of(uri, options, Sharing::Shared)? {
        Place::Folder(path) => {
            if path.is_dir() {
                return Err(not_an_object("a folder"));
            }
            Arc::new(FileStore::durable(path, uri.to_string(), timeout))
        }
        Place::Objects { client, key } => {
            if key.is_empty() {
                let what = if client.in_memory() {
                    "a store"
                } else {
                    "a bucket or container"
                };
                return Err(not_an_object(what));
            }
            Arc::new(ObjectLockStore::object(
                client,
                &key,
                uri.to_string(),
                Timeouts::at_least(timeout),
            )?)
        }
    })
}

/// Opens locks under one URI on a client of its own, shared with nothing else in the
/// process: `doctor --race` races several of these as independent clients would.
pub struct Private {
    uri: String,
    place: Place,
    timing: Timing,
}

impl Private {
    /// A private client for the store of `uri`.
    pub fn new(uri: &str, options: &Access, timing: &Timing) -> Result<Private> {
        Ok(Private {
            uri: uri.trim_end_matches('/').to_string(),
            place: Place::of(uri, options, Sharing::Private)?,
            timing: *timing,
        })
    }

    /// The lock `<uri>/<sub>` on this client.
    pub fn open(&self, sub: &str) -> Result<Arc<dyn LockStore>> {
        let lock_uri = format!("{}/{sub}/{LOCKFILE_NAME}", self.uri);
        let timeout = self.timing.request_timeout();
        Ok(match &self.place {
            Place::Folder(dir) => Arc::new(FileStore::new(
                dir.join(sub).join(LOCKFILE_NAME),
                lock_uri,
                timeout,
            )),
            Place::Objects { client, key } => {
                let key = if key.is_empty() {
                    sub.to_string()
                } else {
                    format!("{key}/{sub}")
                };
                Arc::new(ObjectLockStore::new(
                    client.clone(),
                    &key,
                    lock_uri,
                    Timeouts::of(&self.timing),
                )?)
            }
        })
    }
}

fn refuse_options(uri: &str, scheme: &str, options: &Options) -> Result<()> {
    if let Some((key, _)) = options.store.first() {
        return Err(Error::InvalidArgument(format!(
            "storage option {key:?} given for {uri}, but {scheme} stores take no object_store options"
        )));
    }
    #[cfg(feature = "cloud")]
    if let Some(c) = &options.credentials {
        return Err(Error::InvalidArgument(format!(
            "credentials ({}) given for {uri}, but {scheme} stores take none",
            c.source()
        )));
    }
    Ok(())
}

/// One in-memory store per name, shared by the whole process. A child made by fork starts
/// with copies of its parent's stores as they were at the fork (if the parent's map was
/// free then; otherwise with none).
pub(super) fn memory(name: &str) -> Arc<Client> {
    type Stores = Mutex<HashMap<String, Arc<Client>>>;
    static STORES: PerProcess<Stores> = PerProcess::new(Default::default);
    let (mine, parents) = STORES.with_parent();
    let mut stores = mine.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = stores.get(name) {
        return c.clone();
    }
    let copied = parents
        .and_then(|p| p.try_lock().ok()?.get(name).map(|c| c.store().clone()))
        .unwrap_or_else(|| Arc::new(InMemory::new()));
    let client = Arc::new(Client::memory(name, copied));
    stores.insert(name.to_string(), client.clone());
    client
}

#[cfg(all(test, not(feature = "cloud")))]
mod tests {
    use super::open;
    use crate::store::Access;
    use crate::timing::{Timing, TimingSpec};

    #[test]
    fn a_cloud_uri_names_the_missing_feature() {
        let timing = Timing::new(TimingSpec {
            expire: 30.0,
            heartbeat: None,
            settle: None,
            clock_skew: None,
        })
        .unwrap();
        for uri in [
            "s3://bucket/lock",
            "az://container/lock",
            "gs://bucket/lock",
        ] {
            let e = open(uri, &Access::default(), &timing).unwrap_err();
            assert!(e.to_string().contains("the `cloud` feature"), "{uri}: {e}");
        }
    }
}
