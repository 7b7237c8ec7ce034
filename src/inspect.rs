//! Looking at a lock without taking it: its state as one read shows it ([`inspect`]), and
//! waiting until it is free ([`wait_free`]). Reads only: breaking a lock is a write, made by
//! the protocol ([`crate::protocol::Engine::break_lock`]). Used by the `status` and `wait`
//! commands and by `blob_lock.inspect`.

use crate::errors::{Error, Result};
use crate::lockfile::LockFile;
use crate::protocol::{Acquisition, Attempt, Engine};
use crate::timing::Polls;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// What one read of the lockfile shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockState {
    /// There is no lockfile.
    Unlocked,
    /// Someone holds it and its last write has not expired by the wall clock.
    Held,
    /// Nobody renewed it within `expire_s` of its last write, by this machine's wall clock.
    Expired,
    /// Its holder released it.
    Released,
}

impl LockState {
    /// The state's name, as Python and the CLI show it.
    pub fn as_str(self) -> &'static str {
        match self {
            LockState::Unlocked => "unlocked",
            LockState::Held => "held",
            LockState::Expired => "expired",
            LockState::Released => "released",
        }
    }
}

/// A lock as one read shows it.
#[derive(Debug, Clone)]
pub struct Inspection {
    /// The state.
    pub state: LockState,
    /// The lockfile, if there is one.
    pub lockfile: Option<LockFile>,
    /// When the store says the lockfile was last written (the store's clock).
    pub last_modified: Option<DateTime<Utc>>,
    /// Seconds until the last write expires by this machine's wall clock, negative once it
    /// has; `None` when there is no lockfile or it is released.
    pub expires_in: Option<f64>,
}

impl Inspection {
    fn of(
        lockfile: Option<LockFile>,
        last_modified: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Self {
        let Some(lf) = lockfile else {
            return Inspection {
                state: LockState::Unlocked,
                lockfile: None,
                last_modified,
                expires_in: None,
            };
        };
        if lf.is_released() {
            return Inspection {
                state: LockState::Released,
                lockfile: Some(lf),
                last_modified,
                expires_in: None,
            };
        }
        // The writer's clock, as mops's read_lease judges it; the store's if it has none.
        let last = lf.last_write_time().or(last_modified).unwrap_or(now);
        let expires_in = (last - now).as_seconds_f64() + lf.lifetime().as_secs_f64();
        Inspection {
            state: if expires_in > 0.0 {
                LockState::Held
            } else {
                LockState::Expired
            },
            lockfile: Some(lf),
            last_modified,
            expires_in: Some(expires_in),
        }
    }
}

/// Reads the lock once and says what it shows. Never writes. `Expired` is judged by the wall
/// clock (a lockfile written by a machine whose clock is ahead looks alive for longer);
/// [`wait_free`] judges expiry as waiters do, on the monotonic clock.
pub async fn inspect(engine: &Engine) -> Result<Inspection> {
    let read = engine.look().await?;
    let now = engine.clock.wall();
    Ok(match read {
        None => Inspection::of(None, None, now),
        Some((lf, snap)) => Inspection::of(Some(lf), Some(snap.last_modified), now),
    })
}

/// Waits until the lock is free to take (no lockfile, released, or expired as a waiter judges
/// it: the same version seen for `expire_s`), or `timeout` passes (`Error::Timeout`). Never
/// writes, so it takes nothing: someone else may take the lock the moment it is free.
pub async fn wait_free(engine: &Engine, timeout: Option<Duration>) -> Result<Inspection> {
    let clock = &engine.clock;
    let began = clock.now();
    let deadline = timeout.map(|t| began + t);
    let mut acquisition = Acquisition::default();
    let mut polls = Polls::new(&engine.timing);
    loop {
        let (who, expires_in) = match engine.read().await {
            Ok(None) => return Ok(Inspection::of(None, None, clock.wall())),
            Ok(Some((lf, snap))) => match engine.judge(&lf, &snap, clock.now(), &mut acquisition) {
                None => {
                    let mut seen = Inspection::of(Some(lf), Some(snap.last_modified), clock.wall());
                    if seen.state == LockState::Held {
                        seen.state = LockState::Expired; // seen unchanged for its expire_s
                    }
                    return Ok(seen);
                }
                Some(Attempt::Busy { expires_in, .. }) => (lf.describe(), expires_in),
                Some(Attempt::Acquired(_)) => unreachable!("judging never acquires"),
            },
            Err(e) if e.is_transient() => {
                log::warn!(
                    "{}: reading the lockfile failed, retrying: {e}",
                    engine.uri()
                );
                (format!("unknown ({e})"), None)
            }
            Err(e) => return Err(e),
        };
        let now = clock.now();
        if deadline.is_some_and(|d| now >= d) {
            return Err(Error::Timeout {
                uri: engine.lock_uri(),
                waited: now - began,
                holder: who,
                saturated: None,
            });
        }
        let pause = polls.pause(clock.jitter(), expires_in, deadline.map(|d| d - now));
        clock.sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lf(written: DateTime<Utc>, expire: f64) -> LockFile {
        LockFile::acquired("me", Duration::from_secs_f64(expire), 3, "cas", written)
    }

    #[test]
    fn judges_by_the_writers_wall_clock() {
        let now = Utc::now();
        let held = Inspection::of(
            Some(lf(now - chrono::Duration::seconds(10), 30.0)),
            None,
            now,
        );
        assert_eq!(held.state, LockState::Held);
        assert!((held.expires_in.unwrap() - 20.0).abs() < 0.01);
        let expired = Inspection::of(
            Some(lf(now - chrono::Duration::seconds(40), 30.0)),
            None,
            now,
        );
        assert_eq!(expired.state, LockState::Expired);
        assert!((expired.expires_in.unwrap() + 10.0).abs() < 0.01);
        let released = Inspection::of(Some(lf(now, 30.0).released(now)), None, now);
        assert_eq!(released.state, LockState::Released);
        assert_eq!(released.expires_in, None);
        assert_eq!(Inspection::of(None, None, now).state, LockState::Unlocked);
    }
}
