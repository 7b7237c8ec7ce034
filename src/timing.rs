//! The timing of a lock: expiry, heartbeat, safety margin, polling and the lww settle wait,
//! with the defaults of the protocol and the checks that refuse nonsense before any request.

use crate::errors::{Error, Result};
use std::time::Duration;

/// What a user asks of a lock's timing, in seconds as given; each `None` but `clock_skew`'s
/// takes its default, derived from `expire`. Built from the options
/// ([`crate::lease::Settings::timing`]); [`Timing::new`] checks it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimingSpec {
    /// See [`Timing::expire`].
    pub expire: f64,
    /// See [`Timing::heartbeat`].
    pub heartbeat: Option<f64>,
    /// See [`Timing::settle`].
    pub settle: Option<f64>,
    /// See [`Timing::skew`]; `None` switches the wall-clock fast path off.
    pub clock_skew: Option<f64>,
}

/// All durations a lock runs on. Build it with [`Timing::new`], which checks it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// A lock nobody renews counts as expired this long after its last write.
    pub expire: Duration,
    /// How often the holder renews. Default `expire / 3`; must be below `expire / 2` so that
    /// one failed renewal still leaves time for another before the deadline.
    pub heartbeat: Duration,
    /// The holder stops claiming the lock this long before a waiter may take it over. It
    /// covers clock rate differences between machines. A tenth of `expire`.
    pub margin: Duration,
    /// First poll interval of a waiter.
    pub poll_min: Duration,
    /// Largest poll interval of a waiter, well below `expire`.
    pub poll_max: Duration,
    /// lww only: the least time a writer waits after writing before reading back.
    pub settle: Duration,
    /// How far another machine's wall clock may be off ours. A waiter that meets a lockfile
    /// last written more than `expire + skew` ago by the store's clock takes it at once
    /// instead of watching it for `expire`. `None` switches that fast path off.
    pub skew: Option<Duration>,
    /// What was asked, from which the rest follows ([`Timing::with_expire`]).
    pub asked: TimingSpec,
}

/// Seconds given by a user, checked to be a finite positive number.
pub fn seconds(name: &str, value: f64) -> Result<Duration> {
    if !value.is_finite() || value <= 0.0 {
        return Err(Error::InvalidArgument(format!(
            "{name} must be a positive number of seconds, got {value}"
        )));
    }
    Duration::try_from_secs_f64(value)
        .map_err(|_| Error::InvalidArgument(format!("{name} is too large: {value} seconds")))
}

/// Seconds that may be zero (timeouts, allowances).
pub fn seconds_or_zero(name: &str, value: f64) -> Result<Duration> {
    if value == 0.0 {
        return Ok(Duration::ZERO);
    }
    seconds(name, value).map_err(|_| {
        Error::InvalidArgument(format!(
            "{name} must be zero or a positive number of seconds, got {value}"
        ))
    })
}

/// A timeout: zero or more seconds, at most [`Timing::MAX_TIMEOUT`] (`None` waits for ever).
pub fn timeout(value: f64) -> Result<Duration> {
    timeout_named("timeout", value)
}

/// [`timeout`] for an argument of another name (an adapter's `acquire_timeout`), which its
/// errors name.
pub fn timeout_named(name: &str, value: f64) -> Result<Duration> {
    let t = seconds_or_zero(name, value)?;
    at_most(name, t, Timing::MAX_TIMEOUT, "; pass None to wait for ever")?;
    Ok(t)
}

fn at_most(name: &str, value: Duration, max: Duration, hint: &str) -> Result<()> {
    if value > max {
        return Err(Error::InvalidArgument(format!(
            "{name} must be at most {} seconds, got {}{hint}",
            max.as_secs_f64(),
            value.as_secs_f64()
        )));
    }
    Ok(())
}

impl Timing {
    /// The shortest `expire`: a renewal must fit in a third of it, store round trip included.
    pub const MIN_EXPIRE: Duration = Duration::from_millis(500);
    /// The longest `expire` (7 days): a crashed holder blocks everyone for this long, and
    /// every reader of the lockfile (ours, mops's) must accept the number.
    pub const MAX_EXPIRE: Duration = Duration::from_secs(7 * 24 * 3600);
    /// The shortest heartbeat: 20 writes a second per lock is already more than any store
    /// should be asked for.
    pub const MIN_HEARTBEAT: Duration = Duration::from_millis(50);
    /// The largest clock skew allowance (a day).
    pub const MAX_SKEW: Duration = Duration::from_secs(24 * 3600);
    /// The longest finite timeout (a year); `None` waits for ever.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

    /// Checks a launch grace ([`crate::protocol::Engine::hand_off`]): positive, and at most
    /// [`Timing::MAX_EXPIRE`], the longest wait every reader of the lockfile accepts.
    pub fn check_grace(grace: Duration) -> Result<()> {
        if grace.is_zero() {
            return Err(Error::InvalidArgument(
                "grace must be a positive number of seconds, got 0".into(),
            ));
        }
        at_most(
            "grace",
            grace,
            Self::MAX_EXPIRE,
            " (a launch that never starts would block everyone for longer)",
        )
    }

    /// Checks and completes the timing asked for.
    pub fn new(asked: TimingSpec) -> Result<Timing> {
        let TimingSpec {
            expire,
            heartbeat,
            settle,
            clock_skew: skew,
        } = asked;
        let expire = seconds("expire", expire)?;
        if expire < Self::MIN_EXPIRE {
            return Err(Error::InvalidArgument(format!(
                "expire must be at least {} seconds (a renewal, store round trip included, must fit in a third of it), got {}",
                Self::MIN_EXPIRE.as_secs_f64(),
                expire.as_secs_f64()
            )));
        }
        at_most(
            "expire",
            expire,
            Self::MAX_EXPIRE,
            " (a crashed holder would block everyone for longer)",
        )?;
        let heartbeat = match heartbeat {
            Some(h) => seconds("heartbeat", h)?,
            None => expire / 3,
        };
        if heartbeat < Self::MIN_HEARTBEAT {
            return Err(Error::InvalidArgument(format!(
                "heartbeat must be at least {} seconds (each one is a write to the store), got {}",
                Self::MIN_HEARTBEAT.as_secs_f64(),
                heartbeat.as_secs_f64()
            )));
        }
        if heartbeat >= expire / 2 {
            return Err(Error::InvalidArgument(format!(
                "heartbeat ({}s) must be less than half of expire ({}s), so that a failed renewal can be retried before the lock expires; the default is expire / 3",
                heartbeat.as_secs_f64(),
                expire.as_secs_f64()
            )));
        }
        let settle = match settle {
            Some(s) => seconds_or_zero("settle", s)?,
            None => (expire / 20).clamp(Duration::from_millis(50), Duration::from_millis(500)),
        };
        if settle >= expire / 2 {
            return Err(Error::InvalidArgument(format!(
                "settle ({}s) must be less than half of expire ({}s): an lww acquisition waits that long before it counts as held",
                settle.as_secs_f64(),
                expire.as_secs_f64()
            )));
        }
        let skew = match skew {
            None => None,
            Some(s) => {
                let s = seconds_or_zero("clock_skew", s)?;
                at_most(
                    "clock_skew",
                    s,
                    Self::MAX_SKEW,
                    "; pass None to switch the wall-clock fast path off",
                )?;
                Some(s)
            }
        };
        Ok(Timing {
            expire,
            heartbeat,
            margin: expire / 10,
            poll_min: Duration::from_millis(50).min(expire / 20),
            poll_max: (expire / 10).clamp(Duration::from_millis(50), Duration::from_secs(3)),
            settle,
            skew,
            asked,
        })
    }

    /// The same timing asked for, on `expire` seconds: a remote's, whose lock runs on the
    /// schedule its lockfile states. The heartbeat follows the new expiry (its default), as
    /// the orchestrator's did; everything else asked is kept, and checked again.
    pub fn with_expire(&self, expire: f64) -> Result<Timing> {
        Timing::new(TimingSpec {
            expire,
            heartbeat: None,
            ..self.asked
        })
    }

    /// How long after the start of one of its writes a holder may still count the lock
    /// held: `expire` less the margin, which is earlier than any waiter's takeover.
    pub fn held_for(&self) -> Duration {
        self.expire.saturating_sub(self.margin)
    }

    /// lww's settle wait: how long a writer that wrote blindly waits before it reads back,
    /// `measured` being how long its own read and write took (from the read's start to the
    /// write's answer). Another writer that read before our write landed may take as long to
    /// write: the larger of `settle` and twice that.
    pub fn lww_settle(&self, measured: Duration) -> Duration {
        self.settle.max(measured * 2)
    }

    /// How long one store request may take: half a heartbeat, from 1 to 30 s. A request lost
    /// in a partition hangs until then, so a renewal that hangs is retried in time to land
    /// before the lease deadline (which comes `heartbeat + margin` or more after it was due).
    pub fn request_timeout(&self) -> Duration {
        (self.heartbeat / 2).clamp(Duration::from_secs(1), Duration::from_secs(30))
    }

    /// How long the end of a block waits for its release (`Lock::release_best_effort`):
    /// two request timeouts (10 s at the default `expire`), a request and a retry of it. The
    /// work is done by then; a release not answered goes on in the background and the
    /// lock frees itself at its expiry.
    pub fn release_patience(&self) -> Duration {
        self.request_timeout() * 2
    }

    /// The longest one of the lock's requests may be in flight: [`Timing::request_timeout`]
    /// at least, and on a slow store up to [`Timing::held_for`], as each request's timeout
    /// follows the store's latency (`store::request::gate`) but a write that lands later
    /// cannot count. An lww read takes an unreadable lockfile for a write in flight for this long.
    pub fn longest_request(&self) -> Duration {
        self.held_for().max(self.request_timeout())
    }
}

/// A waiter's polls: capped exponential backoff with jitter, but waking at the moment the
/// watched version would expire, and at the deadline.
#[derive(Debug, Clone)]
pub struct Polls {
    next: Duration,
    max: Duration,
}

impl Polls {
    /// From `timing.poll_min` up to `timing.poll_max`.
    pub fn new(timing: &Timing) -> Self {
        Polls {
            next: timing.poll_min,
            max: timing.poll_max,
        }
    }

    /// How long to wait before the next look: `jitter` is a factor near 1 from the lock's
    /// clock, `expires_in` the time until the watched version would expire, `left` the time
    /// until the deadline.
    pub fn pause(
        &mut self,
        jitter: f64,
        expires_in: Option<Duration>,
        left: Option<Duration>,
    ) -> Duration {
        let mut pause = self.next.mul_f64(jitter);
        self.next = (self.next * 2).min(self.max);
        if let Some(e) = expires_in {
            pause = pause.min(e + Duration::from_millis(1));
        }
        if let Some(l) = left {
            pause = pause.min(l);
        }
        pause
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(
        expire: f64,
        heartbeat: Option<f64>,
        settle: Option<f64>,
        clock_skew: Option<f64>,
    ) -> Result<Timing> {
        Timing::new(TimingSpec {
            expire,
            heartbeat,
            settle,
            clock_skew,
        })
    }

    #[test]
    fn with_expire_keeps_what_was_asked_and_lets_the_heartbeat_follow() {
        let t = new(30.0, Some(5.0), Some(0.4), Some(7.0)).unwrap();
        let remote = t.with_expire(9.0).unwrap();
        assert_eq!(remote.expire, Duration::from_secs(9));
        assert_eq!(remote.heartbeat, Duration::from_secs(3));
        assert_eq!(remote.settle, Duration::from_millis(400));
        assert_eq!(remote.skew, Some(Duration::from_secs(7)));
        // Checked again: a settle asked for that does not fit the new expiry is refused.
        let e = t.with_expire(0.6).unwrap_err().to_string();
        assert!(e.contains("settle"), "{e}");
    }

    #[test]
    fn defaults_follow_expire() {
        let t = new(30.0, None, None, Some(60.0)).unwrap();
        assert_eq!(t.heartbeat, Duration::from_secs(10));
        assert_eq!(t.margin, Duration::from_secs(3));
        assert!(t.poll_max < t.expire / 5);
    }

    #[test]
    fn refuses_nonsense() {
        for (e, h) in [
            (0.0, None),
            (-1.0, None),
            (f64::NAN, None),
            (f64::INFINITY, None),
        ] {
            assert!(new(e, h, None, None).is_err());
        }
        let err = new(10.0, Some(5.0), None, None).unwrap_err();
        assert!(err.to_string().contains("less than half"));
        assert!(new(10.0, Some(0.0), None, None).is_err());
        assert!(new(10.0, Some(4.9), None, None).is_ok());
    }

    /// Whatever a writer accepts, every reader of the lockfile must accept too
    /// (`LockFile::decode` takes `expire_s` below 1e9).
    #[test]
    fn bounds_are_enforced_at_construction() {
        for (expire, heartbeat, settle, skew, why) in [
            (1e10, None, None, None, "expire must be at most 604800"),
            (0.2, None, None, None, "at least 0.5"),
            (
                1.0,
                Some(0.001),
                None,
                None,
                "heartbeat must be at least 0.05",
            ),
            (10.0, None, Some(6.0), None, "settle"),
            (10.0, None, None, Some(1e6), "clock_skew must be at most"),
        ] {
            let e = new(expire, heartbeat, settle, skew)
                .unwrap_err()
                .to_string();
            assert!(e.contains(why), "{e} should say {why}");
        }
        let longest = new(Timing::MAX_EXPIRE.as_secs_f64(), None, None, None).unwrap();
        let body =
            crate::lockfile::LockFile::acquired("o", longest.expire, 1, "cas", chrono::Utc::now());
        assert!(crate::lockfile::LockFile::decode(&body.encode()).is_ok());
        assert!(timeout(1e10).unwrap_err().to_string().contains("None"));
        assert_eq!(timeout(0.0).unwrap(), Duration::ZERO);
    }
}
