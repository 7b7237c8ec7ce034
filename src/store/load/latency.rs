//! How long the store takes to answer, as this process sees it: the smoothed latency and
//! its variation, from which a request's timeout follows (TCP's retransmission timeout,
//! RFC 6298), and the least latency of the last minutes (the store's answer without a
//! queue, which the concurrency limit compares with).

use std::time::Duration;
use tokio::time::Instant;

/// How long the least latency is remembered: a store that has become slower for good is
/// seen as such after this long.
const BASELINE_WINDOW: Duration = Duration::from_secs(60);

/// The timeout doubles after each request that timed out, at most this many times (eight
/// times the latency), and comes back at the next answer (Karn's algorithm: a timed-out
/// request gives no sample).
const MAX_DOUBLINGS: u32 = 3;

#[derive(Debug, Default)]
pub(super) struct Latency {
    /// Smoothed latency and its mean deviation, in seconds; `None` before any answer.
    smoothed: Option<(f64, f64)>,
    backoff: u32,
    /// The least latency of the current and the previous window, and when the current began.
    least: [Option<Duration>; 2],
    window_began: Option<Instant>,
}

impl Latency {
    /// An answer that took `took` (from sending to the answer).
    pub(super) fn answered(&mut self, took: Duration, now: Instant) {
        let r = took.as_secs_f64();
        self.smoothed = Some(match self.smoothed {
            None => (r, r / 2.0),
            Some((srtt, var)) => (
                0.875 * srtt + 0.125 * r,
                0.75 * var + 0.25 * (srtt - r).abs(),
            ),
        });
        self.backoff = 0;
        if self
            .window_began
            .is_none_or(|began| now - began >= BASELINE_WINDOW)
        {
            self.least = [None, self.least[0]];
            self.window_began = Some(now);
        }
        self.least[0] = Some(self.least[0].map_or(took, |l| l.min(took)));
    }

    /// A request that got no answer within its timeout.
    pub(super) fn timed_out(&mut self) {
        self.backoff = (self.backoff + 1).min(MAX_DOUBLINGS);
    }

    /// The smoothed latency, if the store has answered.
    pub(super) fn smoothed(&self) -> Option<Duration> {
        self.smoothed.map(|(srtt, _)| Duration::from_secs_f64(srtt))
    }

    /// The least latency seen in the last one to two windows: the store without a queue.
    pub(super) fn baseline(&self) -> Option<Duration> {
        match self.least {
            [Some(a), Some(b)] => Some(a.min(b)),
            [a, b] => a.or(b),
        }
    }

    /// How long a request may take before it counts as lost: the smoothed latency and four
    /// deviations (RFC 6298), doubled per timeout since the last answer, never below `floor`.
    pub(super) fn timeout(&self, floor: Duration) -> Duration {
        let Some((srtt, var)) = self.smoothed else {
            return floor;
        };
        let rto = Duration::from_secs_f64((srtt + 4.0 * var).min(86_400.0));
        rto.max(floor) * (1 << self.backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeout_follows_a_slow_store_and_doubles_after_timeouts() {
        let now = Instant::now();
        let floor = Duration::from_secs(1);
        let mut l = Latency::default();
        assert_eq!(l.timeout(floor), floor, "before any answer: the floor");
        for _ in 0..50 {
            l.answered(Duration::from_millis(5), now);
        }
        assert_eq!(
            l.timeout(floor),
            floor,
            "a fast store: never below the floor"
        );
        for _ in 0..50 {
            l.answered(Duration::from_secs(3), now);
        }
        let slow = l.timeout(floor);
        assert!(
            slow >= Duration::from_secs(3),
            "{slow:?}: a store answering in 3 s is waited for"
        );
        l.timed_out();
        assert_eq!(l.timeout(floor), slow * 2);
        for _ in 0..10 {
            l.timed_out();
        }
        assert_eq!(l.timeout(floor), slow * 8, "the doubling is bounded");
        l.answered(Duration::from_secs(3), now);
        assert!(l.timeout(floor) < slow * 2, "an answer ends the doubling");
    }

    #[test]
    fn the_baseline_is_the_least_latency_of_the_last_window_or_two() {
        let t0 = Instant::now();
        let mut l = Latency::default();
        assert_eq!(l.baseline(), None);
        l.answered(Duration::from_millis(2), t0);
        l.answered(Duration::from_millis(9), t0);
        assert_eq!(l.baseline(), Some(Duration::from_millis(2)));
        // The store becomes slower for good: after two windows the old minimum is forgotten.
        l.answered(Duration::from_millis(50), t0 + BASELINE_WINDOW);
        assert_eq!(l.baseline(), Some(Duration::from_millis(2)));
        l.answered(Duration::from_millis(50), t0 + BASELINE_WINDOW * 2);
        assert_eq!(l.baseline(), Some(Duration::from_millis(50)));
    }
}
