//! The release at the end of a block whose work is done: best effort, as the DynamoDB lock
//! client's `bestEffort` release is. The work ran under the lock; a store that does not
//! answer the release must neither fail that work nor hold its caller for the rest of the
//! lease. The lock then frees itself when its last write expires, as every lock nobody
//! renews does. A loss is not this: it is still reported, by the lease ([`Lease::lost_reason`]).

use super::{Lease, Lock};
use crate::protocol::ReleaseStatus;
use std::sync::Arc;
use std::time::Duration;

/// A release at the end of a block that did not end in time ([`Lock::release_best_effort`]).
#[derive(Debug)]
pub struct Unanswered {
    /// How long the release was waited for.
    pub waited: Duration,
    /// Why it failed, when it did; `None` when the store had not answered by then.
    pub error: Option<String>,
    /// How long until the lock frees itself, from now: its last write's expiry.
    pub frees_in: Duration,
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            Some(e) => write!(f, "the release failed ({e})")?,
            None if self.waited.is_zero() => write!(f, "the release goes on in the background")?,
            None => write!(
                f,
                "the store did not answer the release within {:.1}s; it goes on in the background",
                self.waited.as_secs_f64()
            )?,
        }
        write!(
            f,
            ". The work under the lock is done and is not failed for it; the lock frees itself when its last write expires, in {:.0}s at most",
            self.frees_in.as_secs_f64().ceil()
        )
    }
}

/// Each lock's end tells its own (when it frees itself), but an outage's thousands of ends
/// at once are counted after the first few.
static UNANSWERED: crate::lease::warnings::Warning = crate::lease::warnings::Warning::allowing(8);

impl Unanswered {
    /// Logs it at WARN level for the lock at `uri` (once in a while, when many are).
    pub fn warn(&self, uri: &str) {
        UNANSWERED.warn(|| format!("{uri}: {self}"));
    }
}

impl Lock {
    /// Releases `lease`, this lock's, at the end of a block whose work is done, waiting
    /// at most `patience` (the end of a `with`: [`crate::timing::Timing::release_patience`];
    /// zero, not at all). A release not answered by then goes on in the background, retried
    /// until the lease's deadline as [`Lease::release`] retries (the next acquisition through
    /// this lock waits for it); it, and one that failed, come back as [`Unanswered`], which
    /// the caller tells once ([`Unanswered::warn`]). One not waited for at all that then
    /// fails is logged when it does.
    pub async fn release_best_effort(
        &self,
        lease: Arc<Lease>,
        patience: Duration,
    ) -> std::result::Result<ReleaseStatus, Unanswered> {
        let clock = self.engine.clock.clone();
        let began = clock.now();
        let margin = self.engine.timing.margin;
        let (lock, releasing) = (self.clone(), lease.clone());
        // On the caller's task while it waits (its log records go out with its call), moved
        // to the background only if the patience runs out first.
        let mut release = Box::pin(async move {
            let released = releasing.release().await;
            if released.is_err() {
                lock.leave_unreleased(&releasing).await;
            }
            (released, releasing)
        });
        let error = tokio::select! {
            biased;
            (outcome, _) = &mut release => match outcome {
                Ok(status) => return Ok(status),
                Err(e) => Some(e.to_string()),
            },
            _ = clock.sleep(patience) => None,
        };
        if error.is_none() {
            // The next acquisition through this lock has our owner id: it waits for this debt.
            let (debt, uri, unwaited) = (self.cleanups.owe(), self.uri.clone(), patience.is_zero());
            crate::owed::spawn(async move {
                let (released, lease) = release.await;
                // Told to nobody yet: the caller did not wait (a caller that waited has
                // told its own).
                if let (Err(e), true) = (released, unwaited) {
                    Unanswered {
                        waited: Duration::ZERO,
                        error: Some(e.to_string()),
                        frees_in: lease.remaining() + margin,
                    }
                    .warn(&uri);
                }
                drop(debt);
            });
        }
        Err(Unanswered {
            waited: clock.now() - began,
            error,
            frees_in: lease.remaining() + margin,
        })
    }
}
