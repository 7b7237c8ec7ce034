//! What the protocol sees of one lockfile: [`LockStore`], read with its version, create if
//! absent, update if its version still matches, or overwrite; and what each request's result
//! counts as in the metrics.

use crate::errors::{Error, Result};
use crate::metrics::{Outcome, Outcomes};
use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use std::any::Any;
use std::fmt;
use std::sync::Arc;
use tokio::sync::Notify;

/// An opaque version of the lockfile: changes at every write.
#[derive(Debug, PartialEq, Eq)]
pub struct Version {
    /// The ETag (or our own digest for local files).
    pub e_tag: Option<String>,
    /// The store's version id, where it has one (GCS generation, S3 version).
    pub version: Option<String>,
}

impl Clone for Version {
    fn clone(&self) -> Self {
        Version {
            e_tag: self.e_tag.clone(),
            version: self.version.clone(),
        }
    }

    /// Into the strings already there (see `LockFile::clone_from`).
    fn clone_from(&mut self, source: &Self) {
        self.e_tag.clone_from(&source.e_tag);
        self.version.clone_from(&source.version);
    }
}

/// The lockfile as read.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Its bytes.
    pub bytes: Bytes,
    /// Its version.
    pub version: Version,
    /// When the store says it was last written, by the store's clock.
    pub last_modified: DateTime<Utc>,
}

/// The outcome of a conditional write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// It landed; this is the new version.
    Done(Version),
    /// The condition failed: the lockfile exists (create) or changed (update). The caller
    /// reads to find out by whom.
    Conflict {
        /// The request was sent more than once (a connection failed under it, or the store
        /// throttled it): an earlier send may have landed, and the condition then failed on
        /// our own write, which others may already have written over.
        resent: bool,
    },
}

/// One lockfile in one store.
#[async_trait]
pub trait LockStore: Send + Sync + fmt::Debug + 'static {
    /// Reads the lockfile; `None` when there is none.
    async fn read(&self) -> Result<Option<Snapshot>>;
    /// Writes `body` only if there is no lockfile yet.
    async fn create(&self, body: Bytes) -> Result<Write>;
    /// Writes `body` only if the lockfile is still at `expected`.
    async fn update(&self, body: Bytes, expected: &Version) -> Result<Write>;
    /// Writes `body` unconditionally (the lww protocol).
    async fn overwrite(&self, body: Bytes) -> Result<Version>;
    /// Waits until the next write can leave at once, so that the time the caller stamps
    /// into it is when it leaves (stores over HTTP wait for a pass of their load here).
    async fn reserve(&self) -> Result<()> {
        Ok(())
    }
    /// The lockfile's URI, for messages.
    fn uri(&self) -> &str;
    /// Deletes the lockfile (and what the store keeps beside it). Locks never do this (a
    /// release keeps the token); only `doctor` cleans up its scratch lockfile with it.
    async fn delete(&self) -> Result<()> {
        Err(Error::InvalidArgument(format!(
            "{} cannot be deleted through this store",
            self.uri()
        )))
    }

    /// Deletes the lockfile if it is still at `expected`: true if it did. Only `prune` calls
    /// it, while it holds the lock. Where the store has no conditional delete
    /// ([`LockStore::conditional_deletes`] says why), it deletes unconditionally: the
    /// caller's lease is then what excludes other writers.
    async fn delete_if(&self, expected: &Version) -> Result<bool> {
        let _ = expected;
        self.delete().await.map(|()| true)
    }

    /// Whether [`LockStore::delete_if`] is conditional on this store: `Err` says why not.
    /// Stores over HTTP are probed once per client (a store may ignore the condition).
    async fn conditional_deletes(&self) -> std::result::Result<(), String> {
        Err(format!("{} has no conditional delete", self.uri()))
    }

    /// Whether this store honours conditional writes (create-if-absent, update-if-match),
    /// which the `cas` protocol needs. Stores that have them by construction (memory, files)
    /// answer at once; stores over HTTP are probed once per process ([`super::probe`]). Where they
    /// are not honoured: `Error::UnsafeStore` when `required`, else `false` (and the store
    /// says why, once). No default: a store that forgot to say would claim to be safe.
    async fn conditional_writes(&self, required: bool) -> Result<bool>;

    /// What [`LockStore::conditional_writes`] answers, if that is known without a request.
    fn known_conditional_writes(&self) -> Option<bool>;

    /// Returns once no call this store object began is still running after its caller
    /// stopped waiting for it: the release of a cancelled acquisition must come after the
    /// write it abandoned, or that write would land after it and hold the lock. (A file call
    /// on the blocking pool runs to its end; an HTTP request is dropped with its future.)
    async fn quiesced(&self) {}

    /// Whether a new acquisition may try now: `Err(why)` while the store is saturated
    /// ([`super::load::Load::admit`]); always where the store has no such limit (memory, files).
    fn admit(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    /// Counts a lease renewing this lockfile every `heartbeat` in what the store can take
    /// (`renews`), or no longer (`!renews`, once per count) ([`super::load::Load::renewing`]);
    /// nothing where the store has no such limit (memory, files).
    fn renewing(&self, heartbeat: std::time::Duration, renews: bool) {
        let _ = (heartbeat, renews);
    }

    /// Wakes `wake`'s waiters when another process writes the lockfile, where the store
    /// hears of writes (local files); until the returned value is dropped. `None`: waiters
    /// poll, as they do anyway as a fallback.
    fn watch(&self, wake: &Arc<Notify>) -> Option<Box<dyn Any + Send + Sync>> {
        let _ = wake;
        None
    }

    /// A name of this lockfile that every spelling of its URI shares in this process (the
    /// key of the process-wide tables: receipts, wakers). Shared: a lock keeps it.
    fn identity(&self) -> Arc<str> {
        self.uri().into()
    }
}

// What each request's result counts as in the metrics: here, beside the results, so that
// the metrics know nothing of stores.

impl Outcomes for Result<Write> {
    fn outcome(&self) -> Outcome {
        match self {
            Ok(Write::Done(_)) => Outcome::Ok,
            Ok(Write::Conflict { .. }) => Outcome::Conflict,
            Err(_) => Outcome::Error,
        }
    }
}

impl Outcomes for Result<Option<Snapshot>> {
    fn outcome(&self) -> Outcome {
        match self {
            Ok(Some(_)) => Outcome::Ok,
            Ok(None) => Outcome::NotFound,
            Err(_) => Outcome::Error,
        }
    }
}

impl Outcomes for Result<Version> {
    fn outcome(&self) -> Outcome {
        match self {
            Ok(_) => Outcome::Ok,
            Err(_) => Outcome::Error,
        }
    }
}
