//! Retries of store calls with capped exponential backoff and jitter.

use crate::errors::Result;
use crate::protocol::{Engine, Held, ReleaseStatus};
use std::time::Duration;
use tokio::time::Instant;

/// Runs `op` until it succeeds, fails for good, or `until` passes, retrying transient store
/// errors with capped exponential backoff and jitter. Also says whether an attempt failed
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
    let mut pause = Duration::from_millis(50);
    let mut retried = false;
    loop {
        match op().await {
            Err(e) if e.is_transient() && engine.clock.now() + pause < until => {
                log::warn!("{}: {what} failed, retrying: {e}", engine.uri());
                retried = true;
                engine
                    .clock
                    .sleep(pause.mul_f64(engine.clock.jitter()))
                    .await;
                pause = (pause * 2).min(engine.timing.heartbeat / 2);
            }
            other => return (other, retried),
        }
    }
}

/// Releases with retries until `until`. After an attempt failed (it may have landed all
/// the same), finding our own acquisition released means it did; and so does finding a
/// later acquisition before our lease `deadline`, since until then nobody can take the lock
/// over unless it was released.
pub(super) async fn release_retrying(
    engine: &Engine,
    owner: &str,
    held: Option<&Held>,
    until: Instant,
    deadline: Option<Instant>,
) -> Result<ReleaseStatus> {
    let token = held.map(|h| h.token);
    let released = with_retries(engine, "release", until, || {
        engine.release_seeing(owner, held)
    });
    match released.await {
        (Ok((ReleaseStatus::AlreadyReleased, Some(lf))), true)
            if lf.writer_id == owner && token.is_none_or(|t| t == lf.token) =>
        {
            Ok(ReleaseStatus::Released)
        }
        (Ok((_, Some(lf))), true)
            if token.is_some_and(|t| lf.token > t)
                && deadline.is_some_and(|d| engine.clock.now() < d) =>
        {
            Ok(ReleaseStatus::Released)
        }
        (result, _) => result.map(|(status, _)| status),
    }
}
