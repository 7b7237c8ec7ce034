//! [`open`]: from a lock URI and its options to the store of its lockfile; [`open_object`]:
//! to the store of one object (a result that `write_once` publishes).

use super::client::{self, Client, Options};
use super::file::FileStore;
use super::object::ObjectLockStore;
use super::uri::Location;
use super::{Access, LockStore};
use crate::errors::{Error, Result};
use crate::lockfile::LOCKFILE_NAME;
use crate::per_process::PerProcess;
use crate::timing::Timing;
use object_store::memory::InMemory;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Opens the store that holds `<uri>/lock.json`. `options` are object_store configuration
/// keys (`aws_endpoint`, `azure_storage_account_name`, ...) on top of the environment, and
/// blob-lock's own `blob_lock_conditional_writes`. Makes no request: a store already in use
/// in this process is only looked up.
pub fn open(uri: &str, options: &Access, timing: &Timing) -> Result<Arc<dyn LockStore>> {
    let location = Location::parse(uri)?;
    let options = Options::split(options)?;
    let lock_uri = format!("{}/{LOCKFILE_NAME}", uri.trim_end_matches('/'));
    let timeout = timing.request_timeout();
    Ok(match location {
        Location::Memory { name, key } => {
            refuse_options(uri, "memory://", &options)?;
            Arc::new(ObjectLockStore::new(
                memory(&name),
                &key,
                lock_uri,
                timeout,
            )?)
        }
        Location::File(dir) => {
            refuse_options(uri, "file://", &options)?;
            Arc::new(FileStore::new(dir.join(LOCKFILE_NAME), lock_uri, timeout))
        }
        Location::Cloud {
            kind,
            scheme,
            authority,
            key,
        } => {
            let client = client::client(kind, &scheme, &authority, &options)?;
            Arc::new(ObjectLockStore::new(client, &key, lock_uri, timeout)?)
        }
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
    let location = Location::parse(uri)?;
    let options = Options::split(options)?;
    Ok(match location {
        Location::Memory { name, key } => {
            refuse_options(uri, "memory://", &options)?;
            if key.is_empty() {
                return Err(not_an_object("a store"));
            }
            Arc::new(ObjectLockStore::object(
                memory(&name),
                &key,
                uri.to_string(),
                timeout,
            )?)
        }
        Location::File(path) => {
            refuse_options(uri, "file://", &options)?;
            if path.is_dir() {
                return Err(not_an_object("a folder"));
            }
            Arc::new(FileStore::durable(path, uri.to_string(), timeout))
        }
        Location::Cloud {
            kind,
            scheme,
            authority,
            key,
        } => {
            if key.is_empty() {
                return Err(not_an_object("a bucket or container"));
            }
            let client = client::client(kind, &scheme, &authority, &options)?;
            Arc::new(ObjectLockStore::object(
                client,
                &key,
                uri.to_string(),
                timeout,
            )?)
        }
    })
}

/// Opens locks under one URI on a client of its own, shared with nothing else in the
/// process: `doctor --race` races several of these as independent clients would.
pub struct Private {
    uri: String,
    location: Location,
    client: Option<Arc<Client>>,
    timing: Timing,
}

impl Private {
    /// A private client for the store of `uri`.
    pub fn new(uri: &str, options: &Access, timing: &Timing) -> Result<Private> {
        let location = Location::parse(uri)?;
        let options = Options::split(options)?;
        let client = match &location {
            Location::Memory { name, .. } => {
                refuse_options(uri, "memory://", &options)?;
                Some(memory(name))
            }
            Location::File(_) => {
                refuse_options(uri, "file://", &options)?;
                None
            }
            Location::Cloud {
                kind,
                scheme,
                authority,
                ..
            } => Some(Arc::new(client::private_client(
                *kind, scheme, authority, &options,
            )?)),
        };
        Ok(Private {
            uri: uri.trim_end_matches('/').to_string(),
            location,
            client,
            timing: *timing,
        })
    }

    /// The lock `<uri>/<sub>` on this client.
    pub fn open(&self, sub: &str) -> Result<Arc<dyn LockStore>> {
        let lock_uri = format!("{}/{sub}/{LOCKFILE_NAME}", self.uri);
        let timeout = self.timing.request_timeout();
        Ok(match (&self.location, &self.client) {
            (Location::File(dir), _) => Arc::new(FileStore::new(
                dir.join(sub).join(LOCKFILE_NAME),
                lock_uri,
                timeout,
            )),
            (Location::Memory { key, .. } | Location::Cloud { key, .. }, Some(client)) => {
                let key = if key.is_empty() {
                    sub.to_string()
                } else {
                    format!("{key}/{sub}")
                };
                Arc::new(ObjectLockStore::new(
                    client.clone(),
                    &key,
                    lock_uri,
                    timeout,
                )?)
            }
            _ => unreachable!("object stores have a client"),
        })
    }
}

pub(super) fn refuse_options(uri: &str, scheme: &str, options: &Options) -> Result<()> {
    if let Some((key, _)) = options.store.first() {
        return Err(Error::InvalidArgument(format!(
            "storage option {key:?} given for {uri}, but {scheme} stores take no object_store options"
        )));
    }
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
        .and_then(|p| p.try_lock().ok()?.get(name).map(|c| c.store.clone()))
        .unwrap_or_else(|| Arc::new(InMemory::new()));
    let client = Arc::new(Client::memory(name, copied));
    stores.insert(name.to_string(), client.clone());
    client
}
