//! [`write_once`]: publishing a result with a create-if-absent write. A remote that lost its
//! lock mid-run (its orchestrator's lease expired, another run took over) may still finish;
//! if results are published this way, its late write finds the other run's result there
//! and lands nothing, so a published result is never overwritten.

use crate::errors::{Error, Result};
use crate::store::Access;
use crate::store::{self, LockStore, Write};
use crate::timing::Timing;
use bytes::Bytes;
use std::time::Duration;

/// Writes `data` to the object `uri` only if no object is there: `true` when this call
/// wrote it, `false` when one was already there (nothing written). The store must honour
/// create-if-absent, which is checked once per process and store as for a `cas` lock:
/// `Error::UnsafeForWriteOnce` where it does not (there, a second write would silently replace
/// the first). A write refused because an object is there is read back: when it holds
/// exactly `data` (this call's first attempt landed but was answered with a server error,
/// and the store client's retry found it), the answer is `true`. After an error the write
/// may have landed all the same: calling again then returns `true` as well. On a file
/// system the result is flushed to disk before it is published, so a power loss cannot
/// leave a published result empty.
pub async fn write_once(uri: &str, data: Bytes, options: &Access, timing: &Timing) -> Result<bool> {
    // A result may be large: each request may take a request timeout plus a second per MiB
    // (one PUT; S3 takes at most 5 GiB in one).
    let per_mib = Duration::from_secs_f64(data.len() as f64 / (1 << 20) as f64);
    let target = store::open_object(uri, options, timing.request_timeout() + per_mib)?;
    target.conditional_writes(true).await.map_err(|e| match e {
        Error::UnsafeStore { check, .. } => Error::UnsafeForWriteOnce {
            uri: uri.to_string(),
            check,
        },
        e => e,
    })?;
    publish(target.as_ref(), data).await
}

/// Creates `data` at `target` unless something else is there; a refusal over exactly these
/// bytes is our own write answered late.
async fn publish(target: &dyn LockStore, data: Bytes) -> Result<bool> {
    Ok(match target.create(data.clone()).await? {
        Write::Done(_) => true,
        Write::Conflict { .. } => target
            .read()
            .await?
            .is_some_and(|there| there.bytes == data),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Snapshot, Version};
    use async_trait::async_trait;
    use std::sync::Arc;

    /// A store whose create lands and is answered with an error, so that the client's retry
    /// meets its own write: what a 5xx after a landed PUT gives.
    #[derive(Debug)]
    struct AnsweredLate(Arc<dyn LockStore>);

    #[async_trait]
    impl LockStore for AnsweredLate {
        async fn read(&self) -> Result<Option<Snapshot>> {
            self.0.read().await
        }
        async fn create(&self, body: Bytes) -> Result<Write> {
            self.0.create(body.clone()).await?; // lands; the answer is lost
            self.0.create(body).await // the retry
        }
        async fn update(&self, body: Bytes, expected: &Version) -> Result<Write> {
            self.0.update(body, expected).await
        }
        async fn overwrite(&self, body: Bytes) -> Result<Version> {
            self.0.overwrite(body).await
        }
        fn uri(&self) -> &str {
            self.0.uri()
        }
        async fn conditional_writes(&self, required: bool) -> Result<bool> {
            self.0.conditional_writes(required).await
        }
        fn known_conditional_writes(&self) -> Option<bool> {
            self.0.known_conditional_writes()
        }
    }

    fn memory(name: &str) -> Arc<dyn LockStore> {
        let uri = format!("memory://write-once/{name}/result");
        store::open_object(&uri, &Access::default(), Duration::from_secs(5)).unwrap()
    }

    #[tokio::test]
    async fn its_own_write_answered_late_is_true_and_another_is_false() {
        let late = AnsweredLate(memory("late"));
        assert!(publish(&late, Bytes::from_static(b"ours")).await.unwrap());
        let taken = memory("taken");
        assert!(publish(taken.as_ref(), Bytes::from_static(b"first"))
            .await
            .unwrap());
        assert!(!publish(taken.as_ref(), Bytes::from_static(b"second"))
            .await
            .unwrap());
        assert_eq!(taken.read().await.unwrap().unwrap().bytes, &b"first"[..]);
    }
}
