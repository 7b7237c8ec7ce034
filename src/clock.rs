//! Time as the lock sees it: a monotonic clock for leases and expiry, a wall clock for the
//! lockfile's ISO times, and sleeping. Production uses tokio's clock; the simulation gives
//! each contender its own clock, running fast or slow, on tokio's paused virtual time.

use chrono::{DateTime, Utc};
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// A boxed sleep.
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The clocks a lock runs on.
pub trait Clock: Send + Sync + Debug + 'static {
    /// Now, on this process's monotonic clock.
    fn now(&self) -> Instant;
    /// Now, on this machine's wall clock.
    fn wall(&self) -> DateTime<Utc>;
    /// Sleeps until `deadline` on this clock.
    fn sleep_until(&self, deadline: Instant) -> Sleep;
    /// Sleeps for `d` on this clock.
    fn sleep(&self, d: Duration) -> Sleep {
        self.sleep_until(self.now() + d)
    }
    /// A random factor in [0.5, 1) to jitter poll intervals. Part of the clock so that a
    /// simulation can seed it and replay a run exactly.
    fn jitter(&self) -> f64 {
        use rand::Rng;
        rand::rng().random_range(0.5..1.0)
    }
    /// True if [`Clock::now`] and [`Clock::sleep_until`] are tokio's own, so that a timer
    /// elsewhere on the runtime agrees with this clock (the shared runtime's starter of
    /// heartbeats, `crate::lease::starter`).
    fn is_tokio(&self) -> bool {
        false
    }
}

/// tokio's clock and the system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn wall(&self) -> DateTime<Utc> {
        Utc::now()
    }
    fn sleep_until(&self, deadline: Instant) -> Sleep {
        Box::pin(tokio::time::sleep_until(deadline))
    }
    fn is_tokio(&self) -> bool {
        true
    }
}

/// The clock of production code.
pub fn system() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

/// A clock whose monotonic time runs at `rate` times true (tokio) time from `base`, and
/// whose wall clock reads true time off by `offset`: the simulation's model of machines
/// whose timers run fast or slow and whose wall clocks, disciplined by NTP, stay within a
/// bounded offset of each other (the `clock_skew` a lock is told of).
#[derive(Debug)]
pub struct DriftingClock {
    base: Instant,
    wall_base: DateTime<Utc>,
    rate: f64,
    offset: chrono::Duration,
    rng: std::sync::Mutex<rand::rngs::StdRng>,
}

impl DriftingClock {
    /// A clock starting now, its monotonic time running at `rate` (1.0 is true time), its
    /// wall clock reading `wall_base` now and off by `offset`, with jitter drawn from `seed`.
    pub fn new(rate: f64, wall_base: DateTime<Utc>, offset: chrono::Duration, seed: u64) -> Self {
        use rand::SeedableRng;
        assert!(rate > 0.0, "a clock rate is positive");
        DriftingClock {
            base: Instant::now(),
            wall_base,
            rate,
            offset,
            rng: std::sync::Mutex::new(rand::rngs::StdRng::seed_from_u64(seed)),
        }
    }
}

impl Clock for DriftingClock {
    fn now(&self) -> Instant {
        self.base + (Instant::now() - self.base).mul_f64(self.rate)
    }
    fn wall(&self) -> DateTime<Utc> {
        let elapsed = Instant::now() - self.base;
        self.wall_base + chrono::Duration::from_std(elapsed).unwrap_or_default() + self.offset
    }
    fn sleep_until(&self, deadline: Instant) -> Sleep {
        let local = deadline.saturating_duration_since(self.base);
        Box::pin(tokio::time::sleep_until(
            self.base + local.div_f64(self.rate),
        ))
    }
    fn jitter(&self) -> f64 {
        use rand::Rng;
        self.rng
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .random_range(0.5..1.0)
    }
}
