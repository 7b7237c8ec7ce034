//! How many requests a second the store answers this process when it is kept busy: the
//! answers that came while requests waited for passes, over the time they waited (a busy
//! period's throughput is the service rate). Old measurements fade (halved every
//! [`HALF_LIFE`]), so a store that became faster or slower is seen as such, and a store
//! that was never kept busy has no capacity known: nothing then says it is near its limit.

use std::time::Duration;
use tokio::time::Instant;

/// Measurements lose half their weight in this long.
const HALF_LIFE: Duration = Duration::from_secs(30);

/// A capacity is known once requests waited this long, in all, and this many answered.
const LEAST_BUSY: Duration = Duration::from_millis(500);
const LEAST_ANSWERS: f64 = 50.0;

#[derive(Debug, Default)]
pub(super) struct Capacity {
    /// Since when requests have been waiting, if they are.
    busy_since: Option<Instant>,
    /// Time with requests waiting, and answers in that time (both fading).
    busy: f64,
    answers: f64,
    faded_at: Option<Instant>,
}

impl Capacity {
    /// Requests began to wait (none were waiting).
    pub(super) fn busy(&mut self, now: Instant) {
        self.fade(now);
        self.busy_since.get_or_insert(now);
    }

    /// No request waits any more.
    pub(super) fn idle(&mut self, now: Instant) {
        self.fade(now);
        if let Some(since) = self.busy_since.take() {
            self.busy += (now - since).as_secs_f64();
        }
    }

    /// The store answered a request.
    pub(super) fn answered(&mut self, now: Instant) {
        self.fade(now);
        if self.busy_since.is_some() {
            self.answers += 1.0;
        }
    }

    /// Answers a second while kept busy, once measured.
    pub(super) fn estimate(&self, now: Instant) -> Option<f64> {
        let ongoing = self.busy_since.map_or(0.0, |s| (now - s).as_secs_f64());
        let busy = self.busy + ongoing;
        (busy >= LEAST_BUSY.as_secs_f64() && self.answers >= LEAST_ANSWERS)
            .then(|| self.answers / busy)
    }

    fn fade(&mut self, now: Instant) {
        let Some(at) = self.faded_at else {
            self.faded_at = Some(now);
            return;
        };
        if now - at < HALF_LIFE {
            return;
        }
        // The ongoing busy period is counted up to now before it fades.
        if let Some(since) = self.busy_since {
            self.busy += (now - since).as_secs_f64();
            self.busy_since = Some(now);
        }
        let halvings = ((now - at).as_secs_f64() / HALF_LIFE.as_secs_f64()).floor();
        let keep = 0.5f64.powf(halvings);
        self.busy *= keep;
        self.answers *= keep;
        self.faded_at = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_throughput_of_busy_periods_is_the_capacity() {
        let t0 = Instant::now();
        let mut c = Capacity::default();
        // Answers while nobody waits say nothing about the limit.
        for i in 0..1000 {
            c.answered(t0 + MS * i);
        }
        assert_eq!(c.estimate(t0 + MS * 1000), None);
        // Two busy periods of 400 ms, 200 answers each: 500 a second.
        for start in [1000, 2000] {
            c.busy(t0 + MS * start);
            for i in 0..200 {
                c.answered(t0 + MS * (start + 2 * i));
            }
            c.idle(t0 + MS * (start + 400));
        }
        let got = c.estimate(t0 + MS * 3000).unwrap();
        assert!((got - 500.0).abs() < 1.0, "{got}");
    }

    #[test]
    fn an_old_measurement_fades_away() {
        let t0 = Instant::now();
        let mut c = Capacity::default();
        c.busy(t0);
        for i in 0..100 {
            c.answered(t0 + MS * (10 * i));
        }
        c.idle(t0 + MS * 1000);
        assert!(c.estimate(t0 + MS * 1000).is_some());
        c.answered(t0 + HALF_LIFE * 3);
        assert_eq!(
            c.estimate(t0 + HALF_LIFE * 3),
            None,
            "faded below what is trusted"
        );
    }
}
