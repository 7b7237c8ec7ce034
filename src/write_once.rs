//! [`write_once`]: publishing a result with a create-if-absent write. A remote that lost its
//! lock mid-run (its orchestrator's lease expired, another run took over) may still finish;
//! if results are published this way, its late write finds the other run's result there
//! and lands nothing, so a published result is never overwritten.

use crate::errors::{Error, Result};
use crate::store::Access;
use crate::store::{self, Write};
use crate::timing::Timing;
use bytes::Bytes;
use std::time::Duration;

/// Writes `data` to the object `uri` only if no object is there: `true` when this call
/// wrote it, `false` when one was already there (nothing written). The store must honour
/// create-if-absent, which is checked once per process and store as for a `cas` lock:
/// `Error::UnsafeForWriteOnce` where it does not (there, a second write would silently replace
/// the first). After an error the write may have landed all the same: calling again then
/// returns `false`. So may a call whose first attempt landed but was answered with a server
/// error, which the store client retries: compare the content if that matters. On a file
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
    Ok(match target.create(data).await? {
        Write::Done(_) => true,
        Write::Conflict => false,
    })
}
