//! The timing of a lock: expiry, heartbeat, safety margin, polling and the lww settle wait,
//! with the defaults of the protocol and the checks that refuse nonsense before any request.

use crate::errors::{Error, Result};
use std::time::Duration;

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

impl Timing {
    /// Default skew allowance for the wall-clock fast path.
    pub const DEFAULT_SKEW: Duration = Duration::from_secs(60);

    /// Checks and completes the timing for `expire` seconds. `heartbeat`, `settle` and `skew`
    /// (`Some(None)` switches the fast path off) take their defaults when not given.
    pub fn new(
        expire: f64,
        heartbeat: Option<f64>,
        settle: Option<f64>,
        skew: Option<Option<f64>>,
    ) -> Result<Timing> {
        let expire = seconds("expire", expire)?;
        if expire < Duration::from_millis(100) {
            return Err(Error::InvalidArgument(format!(
                "expire must be at least 0.1 seconds (a store round trip takes longer than that), got {}",
                expire.as_secs_f64()
            )));
        }
        let heartbeat = match heartbeat {
            Some(h) => seconds("heartbeat", h)?,
            None => expire / 3,
        };
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
        let skew = match skew {
            None => Some(Self::DEFAULT_SKEW),
            Some(None) => None,
            Some(Some(s)) => Some(seconds_or_zero("clock_skew", s)?),
        };
        Ok(Timing {
            expire,
            heartbeat,
            margin: expire / 10,
            poll_min: Duration::from_millis(50).min(expire / 20),
            poll_max: (expire / 10).clamp(Duration::from_millis(50), Duration::from_secs(3)),
            settle,
            skew,
        })
    }

    /// The defaults for `expire` seconds.
    pub fn with_expire(expire: f64) -> Result<Timing> {
        Timing::new(expire, None, None, None)
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

    #[test]
    fn defaults_follow_expire() {
        let t = Timing::with_expire(30.0).unwrap();
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
            assert!(Timing::new(e, h, None, None).is_err());
        }
        let err = Timing::new(10.0, Some(5.0), None, None).unwrap_err();
        assert!(err.to_string().contains("less than half"));
        assert!(Timing::new(10.0, Some(0.0), None, None).is_err());
        assert!(Timing::new(10.0, Some(4.9), None, None).is_ok());
    }
}
