//! A lockfile in an object_store store (S3, Azure, GCS, memory), on its store's shared
//! [`Client`], every request through the store's [`Gate`].

use super::lock_store::{LockStore, Snapshot, Version, Write};
use super::probe;
use super::request::answers::{missing_bucket, names_a_missing_bucket};
use super::request::client::Client;
use super::request::gate::{self, Gate, Timeouts};
use crate::errors::{Error, Result, StoreErrorKind};
use crate::lockfile::{LOCKFILE_NAME, MAX_LOCKFILE_BYTES};
use async_trait::async_trait;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, PutMode, UpdateVersion};
use std::sync::Arc;

/// A lockfile in an object_store store with conditional writes.
pub struct ObjectLockStore {
    gate: Gate,
    /// `<folder>/lock.json` (the folder, where the store is probed, is its parent: not kept,
    /// as thousands of locks are held).
    path: Path,
}

impl std::fmt::Debug for ObjectLockStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ObjectLockStore({})", self.gate.uri)
    }
}

impl ObjectLockStore {
    /// The lockfile `<key>/lock.json` on `client`'s store; `uri` names it in messages, and
    /// each request's timeout is bounded by `timeouts`.
    pub fn new(client: Arc<Client>, key: &str, uri: String, timeouts: Timeouts) -> Result<Self> {
        let dir = Path::parse(key).map_err(|e| {
            Error::InvalidArgument(format!("invalid lock path {key:?} in {uri}: {e}"))
        })?;
        Ok(ObjectLockStore {
            path: dir.join(LOCKFILE_NAME),
            gate: Gate::new(client, uri, timeouts),
        })
    }

    /// The object `key` itself, not a lock's folder (a result that `write_once` publishes);
    /// `uri` names it in messages.
    pub fn object(client: Arc<Client>, key: &str, uri: String, timeouts: Timeouts) -> Result<Self> {
        let path = Path::parse(key).map_err(|e| {
            Error::InvalidArgument(format!("invalid object path {key:?} in {uri}: {e}"))
        })?;
        Ok(ObjectLockStore {
            path,
            gate: Gate::new(client, uri, timeouts),
        })
    }
}

#[async_trait]
impl LockStore for ObjectLockStore {
    async fn read(&self) -> Result<Option<Snapshot>> {
        let get = || async {
            let got = self
                .gate
                .client
                .store()
                .get_opts(&self.path, GetOptions::default())
                .await?;
            let meta = got.meta.clone();
            if meta.size > MAX_LOCKFILE_BYTES as u64 {
                // Refused before downloading: the decoder reports the size.
                return Ok((meta, Bytes::from(vec![b' '; MAX_LOCKFILE_BYTES + 1])));
            }
            Ok((meta, got.bytes().await?))
        };
        let (meta, bytes) = match self.gate.call("reading", get).await {
            Ok(got) => got,
            Err(gate::Failure::Store(object_store::Error::NotFound { source, .. })) => {
                let msg = source.to_string();
                // A missing bucket answers 404 too; tell it apart by the store's error code.
                if let Some(what) = names_a_missing_bucket(&msg) {
                    return Err(missing_bucket(&self.gate.uri, what, &msg));
                }
                return Ok(None);
            }
            Err(failure) => return Err(self.gate.error(failure, "reading")),
        };
        Ok(Some(Snapshot {
            bytes,
            version: Version {
                e_tag: meta.e_tag,
                version: meta.version,
            },
            last_modified: meta.last_modified,
        }))
    }

    async fn create(&self, body: Bytes) -> Result<Write> {
        self.gate.put_at(&self.path, body, PutMode::Create).await
    }

    async fn reserve(&self) -> Result<()> {
        self.gate.reserve().await
    }

    async fn update(&self, body: Bytes, expected: &Version) -> Result<Write> {
        let version = UpdateVersion {
            e_tag: expected.e_tag.clone(),
            version: expected.version.clone(),
        };
        self.gate
            .put_at(&self.path, body, PutMode::Update(version))
            .await
    }

    async fn overwrite(&self, body: Bytes) -> Result<Version> {
        match self
            .gate
            .put_at(&self.path, body, PutMode::Overwrite)
            .await?
        {
            Write::Done(v) => Ok(v),
            Write::Conflict { .. } => Err(Error::Store {
                uri: self.gate.uri.to_string(),
                message: "the store refused an unconditional write with a conflict".into(),
                kind: StoreErrorKind::Transient,
            }),
        }
    }

    fn uri(&self) -> &str {
        &self.gate.uri
    }

    async fn delete(&self) -> Result<()> {
        self.gate.delete_at(&self.path).await
    }

    async fn delete_if(&self, expected: &Version) -> Result<bool> {
        if self.gate.client.in_memory() {
            // In this process (memory): compared, then deleted, within the caller's lease;
            // no request can be held up on the way.
            return match self.read().await? {
                Some(now) if now.version == *expected => self.delete().await.map(|()| true),
                _ => Ok(false),
            };
        }
        match self.conditional_deletes().await {
            Ok(()) => self.gate.delete_at_if(&self.path, expected).await,
            Err(_) => self.delete().await.map(|()| true),
        }
    }

    async fn conditional_deletes(&self) -> std::result::Result<(), String> {
        if self.gate.client.in_memory() {
            return Ok(());
        }
        probe::conditional_deletes(&self.gate, &self.path).await
    }

    async fn conditional_writes(&self, required: bool) -> Result<bool> {
        probe::conditional_writes(&self.gate, &self.path, required).await
    }

    fn known_conditional_writes(&self) -> Option<bool> {
        probe::known_conditional_writes(&self.gate)
    }

    fn admit(&self) -> std::result::Result<(), String> {
        match self.gate.client.load() {
            Some(load) => load.admit(),
            None => Ok(()),
        }
    }

    fn renewing(&self, heartbeat: std::time::Duration, renews: bool) {
        if let Some(load) = self.gate.client.load() {
            load.renewing(heartbeat, renews);
        }
    }

    fn identity(&self) -> Arc<str> {
        let identity = format!("{}/{}", self.gate.client.name(), self.path);
        // Most URIs are spelled as the store names them: one copy for both.
        if *identity == *self.gate.uri {
            return self.gate.uri.clone();
        }
        identity.into()
    }
}
