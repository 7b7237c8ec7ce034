//! Retries of store calls: the one backoff every retry loop uses (acquisition and release
//! steps here, the heartbeat's renewals in `held/heartbeat.rs`), capped and jittered.

use crate::errors::Result;
use crate::protocol::{Engine, OurWrite, ReleaseStatus};
use crate::timing::Timing;
use std::time::Duration;
use tokio::time::Instant;

/// The first pause after a failure.
const FIRST: Duration = Duration::from_millis(50);

/// Capped exponential backoff: 50 ms, doubling, at most half a heartbeat rounded down to the
/// millisecond (a renewal retried later than that could miss the lease's deadline). Each
/// pause is jittered by the clock's factor, so that holders cut off together do not retry
/// in step.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    /// In milliseconds: every held lease keeps one between beats (a cap of at most a
    /// quarter of the longest expiry fits in 32 bits).
    next_ms: u32,
    cap_ms: u32,
}

impl Backoff {
    pub(crate) fn new(timing: &Timing) -> Self {
        let cap = (timing.heartbeat / 2)
            .as_millis()
            .clamp(1, u32::MAX as u128) as u32;
        Backoff {
            next_ms: FIRST.as_millis() as u32,
            cap_ms: cap,
        }
    }

    /// The next pause before jitter.
    pub(super) fn peek(&self) -> Duration {
        Duration::from_millis(self.next_ms.into())
    }

    /// The next pause, jittered by `jitter`; the one after grows.
    pub(crate) fn pause(&mut self, jitter: f64) -> Duration {
        let pause = self.peek().mul_f64(jitter);
        self.next_ms = self.next_ms.saturating_mul(2).min(self.cap_ms);
        pause
    }

    /// After a success: the next failure starts again from the first pause.
    pub(super) fn reset(&mut self) {
        self.next_ms = FIRST.as_millis() as u32;
    }
}

/// What a release's retries are called ([`with_retries`]'s `what`).
pub(super) const RELEASE: &str = "release";

/// Retries failing together (an outage) warn once in a while, not once each.
static RETRYING: super::warnings::Warning = super::warnings::Warning::new();

/// Runs `op` until it succeeds, fails for good, or `until` passes, retrying transient store
/// errors after the pauses of a [`Backoff`]. Also says whether an attempt failed
/// first: its write may have landed all the same.
pub(super) async fn with_retries<T, F, Fut>(
    engine: &Engine,
    what: &str,
    until: Instant,
    mut op: F,
) -> (Result<T>, bool)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut backoff = Backoff::new(&engine.timing);
    let mut retried = false;
    loop {
        match op().await {
            Err(e) if e.is_transient() && engine.clock.now() + backoff.peek() < until => {
                // A release's outcome is told once it ends (its error, or the best-effort
                // warning at the end of a block): its retries say nothing more above debug.
                if what == RELEASE {
                    log::debug!("{}: {what} failed, retrying: {e}", engine.uri());
                } else {
                    RETRYING.warn(|| format!("{}: {what} failed, retrying: {e}", engine.uri()));
                }
                retried = true;
                engine
                    .clock
                    .sleep(backoff.pause(engine.clock.jitter()))
                    .await;
            }
            other => return (other, retried),
        }
    }
}

/// Releases with retries until `until`. After a write of the release that may have landed
/// (an attempt failed, or the store's gate sent it twice), finding our own acquisition
/// released (not broken) means it did. Finding a later acquisition means it did too, or
/// that the lock expired after the release began: when it was called `in_time` (before our
/// lease's deadline), the block the lease guarded ran under the lock throughout either way (only
/// an operator's `break` could have taken it earlier, and its write would have refused the
/// release's first send, not left it unknown).
pub(super) async fn release_retrying(
    engine: &Engine,
    owner: &str,
    ours: Option<&OurWrite>,
    until: Instant,
    in_time: bool,
) -> Result<ReleaseStatus> {
    let token = ours.map(|h| h.token());
    let released = with_retries(engine, RELEASE, until, || {
        engine.release_seeing(owner, ours)
    });
    let (seen, retried) = released.await;
    let seen = seen?;
    // Retried by us, or resent by the store's gate: either way an earlier write may have
    // landed.
    if !(retried || seen.maybe_landed) {
        return Ok(seen.status);
    }
    match (&seen.status, &seen.found) {
        (ReleaseStatus::AlreadyReleased, Some(lf))
            if *lf.writer_id == *owner
                && token.is_none_or(|t| t == lf.token)
                && lf.broken_by.is_none() =>
        {
            Ok(ReleaseStatus::Released)
        }
        (_, Some(lf)) if in_time && token.is_some_and(|t| lf.token > t) => {
            Ok(ReleaseStatus::Released)
        }
        // Gone: an earlier write of this release may have landed, and prune (which deletes
        // only released or expired lockfiles) deleted it since.
        (ReleaseStatus::NoLockfile, None) if in_time => Ok(ReleaseStatus::Released),
        _ => Ok(seen.status),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LockOptions;

    fn pauses(expire: f64, n: usize) -> Vec<Duration> {
        let mut b = Backoff::new(&LockOptions::new(expire).unwrap().timing);
        (0..n).map(|_| b.pause(1.0)).collect()
    }

    #[test]
    fn backoff_doubles_from_50_ms_to_half_a_heartbeat_and_starts_again_after_a_reset() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|m| Duration::from_millis(*m))
                .collect::<Vec<_>>()
        };
        // expire 30 s: heartbeat 10 s, cap 5 s.
        assert_eq!(
            pauses(30.0, 9),
            ms(&[50, 100, 200, 400, 800, 1600, 3200, 5000, 5000])
        );
        let timing = LockOptions::new(30.0).unwrap().timing;
        let mut b = Backoff::new(&timing);
        b.pause(1.0);
        b.pause(1.0);
        b.reset();
        assert_eq!(b.peek(), Duration::from_millis(50));
        assert_eq!(b.pause(0.5), Duration::from_millis(25), "jittered");
    }

    #[test]
    fn backoff_never_exceeds_half_a_heartbeat_at_any_expiry() {
        // expire 20 s: heartbeat 6.67 s, half of it not a whole number of milliseconds.
        for expire in [0.5, 1.0, 20.0, 3600.0, 7.0 * 86_400.0] {
            let timing = LockOptions::new(expire).unwrap().timing;
            let last = *pauses(expire, 40).last().unwrap();
            assert!(last <= timing.heartbeat / 2, "{expire}: {last:?}");
            assert!(
                timing.heartbeat / 2 - last < Duration::from_millis(1),
                "{expire}: capped at half a heartbeat, not below: {last:?}"
            );
        }
    }
}
