//! A store that counts the requests made through it: the instrument of the request-count
//! tests and benchmarks.

use crate::errors::Result;
use crate::store::lock_store::{LockStore, Snapshot, Version, Write};
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Arc;

/// A store that counts the requests made through it, by kind: the instrument of the
/// request-count tests and benchmarks.
#[derive(Debug)]
pub struct Counted {
    inner: Arc<dyn LockStore>,
    counts: [std::sync::atomic::AtomicU64; 5],
}

/// Request counts of a [`Counted`] store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Requests {
    /// Reads.
    pub reads: u64,
    /// Create-if-absent writes.
    pub creates: u64,
    /// Update-if-match writes.
    pub updates: u64,
    /// Unconditional writes.
    pub overwrites: u64,
    /// Deletes.
    pub deletes: u64,
}

impl Requests {
    /// All requests.
    pub fn total(&self) -> u64 {
        self.reads + self.creates + self.updates + self.overwrites + self.deletes
    }
}

impl Counted {
    /// Counts the requests to `inner`.
    pub fn new(inner: Arc<dyn LockStore>) -> Self {
        Counted {
            inner,
            counts: Default::default(),
        }
    }

    fn count(&self, kind: usize) {
        self.counts[kind].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn requests(&self) -> Requests {
        let n = |i: usize| self.counts[i].load(std::sync::atomic::Ordering::Relaxed);
        Requests {
            reads: n(0),
            creates: n(1),
            updates: n(2),
            overwrites: n(3),
            deletes: n(4),
        }
    }
}

#[async_trait]
impl LockStore for Counted {
    async fn read(&self) -> Result<Option<Snapshot>> {
        self.count(0);
        self.inner.read().await
    }

    async fn create(&self, body: Bytes) -> Result<Write> {
        self.count(1);
        self.inner.create(body).await
    }

    async fn update(&self, body: Bytes, expected: &Version) -> Result<Write> {
        self.count(2);
        self.inner.update(body, expected).await
    }

    async fn overwrite(&self, body: Bytes) -> Result<Version> {
        self.count(3);
        self.inner.overwrite(body).await
    }

    async fn reserve(&self) -> Result<()> {
        self.inner.reserve().await
    }

    fn uri(&self) -> &str {
        self.inner.uri()
    }

    async fn delete(&self) -> Result<()> {
        self.count(4);
        self.inner.delete().await
    }

    async fn delete_if(&self, expected: &Version) -> Result<bool> {
        self.count(4);
        self.inner.delete_if(expected).await
    }

    async fn conditional_deletes(&self) -> std::result::Result<(), String> {
        self.inner.conditional_deletes().await
    }

    async fn conditional_writes(&self, required: bool) -> Result<bool> {
        self.inner.conditional_writes(required).await
    }

    fn known_conditional_writes(&self) -> Option<bool> {
        self.inner.known_conditional_writes()
    }

    fn watch(
        &self,
        wake: &std::sync::Arc<tokio::sync::Notify>,
    ) -> Option<Box<dyn std::any::Any + Send + Sync>> {
        self.inner.watch(wake)
    }

    fn identity(&self) -> std::sync::Arc<str> {
        self.inner.identity()
    }

    async fn quiesced(&self) {
        self.inner.quiesced().await
    }
}
