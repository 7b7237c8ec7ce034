//! How many requests to one store may be in flight at once: a limit that follows the
//! store's answers, in the manner of TCP Vegas as Netflix's concurrency-limits applies it.
//! The queue a store keeps is estimated from its latency against the least latency seen
//! (`limit × (1 - least / latency)`): the limit grows while that queue is short and shrinks
//! when it grows, so that requests wait here, where renewals go first, rather than in the
//! store's queue, where they would wait behind everything else. A request that timed out or
//! an answer that asks to slow down (throttling) cuts the limit by 30 %, as AWS's adaptive
//! retry mode cuts its send rate, at most once per round trip.

use std::time::Duration;
use tokio::time::Instant;

/// Never fewer: one slow request must not stall every renewal behind it.
pub(super) const MIN: f64 = 4.0;
/// Never more: a connection each, so that thousands of locks stay under a process's
/// file-descriptor limit.
pub(super) const MAX: f64 = 64.0;
/// Where a store starts: a few round trips of growth reach the maximum on a store that
/// does not queue.
const START: f64 = 16.0;
/// The cut after a timeout or a throttling answer.
const CUT: f64 = 0.7;

#[derive(Debug)]
pub(super) struct Limit {
    limit: f64,
    /// No second cut before this: one congestion event cuts once, however many requests
    /// it failed.
    calm_after: Option<Instant>,
}

impl Default for Limit {
    fn default() -> Self {
        Limit {
            limit: START,
            calm_after: None,
        }
    }
}

impl Limit {
    /// The limit in requests.
    pub(super) fn get(&self) -> usize {
        self.limit as usize
    }

    /// An answer that took `took` when `in_flight` requests were out (this one included),
    /// against the store's `baseline` latency.
    pub(super) fn answered(&mut self, took: Duration, baseline: Duration, in_flight: usize) {
        if (in_flight as f64) * 2.0 < self.limit {
            return; // the limit was not in use: the answer says nothing about it
        }
        let took = took.as_secs_f64().max(1e-6);
        let queued = self.limit * (1.0 - baseline.as_secs_f64() / took).max(0.0);
        let step = self.limit.log10().max(1.0);
        if queued <= step {
            self.limit += 3.0 * step; // nearly no queue: grow fast
        } else if queued < 3.0 * step {
            self.limit += step;
        } else if queued > 6.0 * step {
            self.limit -= step;
        }
        self.limit = self.limit.clamp(MIN, MAX);
    }

    /// A timeout or a throttling answer at `now`, when the store answers in about `rtt`.
    pub(super) fn congested(&mut self, now: Instant, rtt: Duration) {
        if self.calm_after.is_some_and(|t| now < t) {
            return;
        }
        self.limit = (self.limit * CUT).clamp(MIN, MAX);
        self.calm_after = Some(now + rtt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_store_that_does_not_queue_reaches_the_maximum() {
        let mut l = Limit::default();
        for _ in 0..100 {
            let full = l.get();
            l.answered(MS * 30, MS * 30, full);
        }
        assert_eq!(l.get(), MAX as usize);
    }

    #[test]
    fn a_store_that_queues_holds_the_limit_down() {
        // One server thread: each request in flight adds a service time of 2.5 ms.
        let mut l = Limit::default();
        for _ in 0..2000 {
            let n = l.get();
            l.answered(MS.mul_f64(2.5 * n as f64), MS.mul_f64(2.5), n);
        }
        let n = l.get();
        // Below where it started (16): the queue it saw brought it down.
        assert!((MIN as usize..START as usize).contains(&n), "limit {n}");
    }

    #[test]
    fn an_idle_limit_does_not_move() {
        let mut l = Limit::default();
        l.answered(MS * 500, MS, 1);
        assert_eq!(l.get(), START as usize);
    }

    #[test]
    fn congestion_cuts_once_per_round_trip() {
        let t0 = Instant::now();
        let mut l = Limit::default();
        l.congested(t0, MS * 100);
        l.congested(t0 + MS * 50, MS * 100);
        assert_eq!(l.get(), 11, "16 x 0.7, once");
        l.congested(t0 + MS * 150, MS * 100);
        assert_eq!(l.get(), 7);
        for i in 0..10 {
            l.congested(t0 + MS * (300 + 200 * i), MS * 100);
        }
        assert_eq!(l.get(), MIN as usize);
    }
}
