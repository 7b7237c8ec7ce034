//! Process-wide counters and histograms of what the locks did (`blob_lock.stats()`, and the
//! Prometheus and OpenTelemetry integrations built on it): acquisitions and their waits,
//! hold times, renewals with their latency and the margin left before the deadline, store
//! requests by kind and outcome, losses by cause.
//!
//! Every figure is a relaxed atomic in one static: counting is a few uncontended atomic
//! additions, nothing is allocated, and a held lock carries nothing for it.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;

mod kinds;
pub use kinds::*;

use crate::errors::LossCause;

/// The upper bounds of the histograms' buckets, in seconds (the last bucket is unbounded):
/// from a local file's millisecond to a day-long hold.
pub const BUCKETS: [f64; 20] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 1800.0, 3600.0, 21600.0, 86400.0,
];

struct Histogram {
    /// Per bucket (not cumulative), and one more for what is above the last bound.
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

impl Histogram {
    const fn new() -> Self {
        Histogram {
            counts: [const { AtomicU64::new(0) }; BUCKETS.len() + 1],
            sum_micros: AtomicU64::new(0),
        }
    }

    fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = BUCKETS
            .iter()
            .position(|b| s <= *b)
            .unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Relaxed);
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Relaxed);
    }

    fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(BUCKETS.len() + 1);
        for (i, c) in self.counts.iter().enumerate() {
            cumulative += c.load(Relaxed);
            buckets.push((BUCKETS.get(i).copied().unwrap_or(f64::INFINITY), cumulative));
        }
        HistogramSnapshot {
            count: cumulative,
            sum: self.sum_micros.load(Relaxed) as f64 / 1e6,
            buckets,
        }
    }
}

const fn counters<const N: usize>() -> [AtomicU64; N] {
    [const { AtomicU64::new(0) }; N]
}

struct Metrics {
    requests: [[AtomicU64; 4]; 4],
    acquisitions: [AtomicU64; 5],
    releases: AtomicU64,
    renewals_ok: AtomicU64,
    renewals_retried: AtomicU64,
    losses: [AtomicU64; LossCause::ALL.len()],
    acquire_wait: Histogram,
    hold: Histogram,
    renewal_latency: Histogram,
    renewal_margin: Histogram,
    tightest: Tightest,
    throttled: AtomicU64,
    queued: AtomicI64,
    slots_held: AtomicI64,
    semaphore_waiters: AtomicI64,
}

static METRICS: Metrics = Metrics {
    requests: [const { counters::<4>() }; 4],
    acquisitions: counters(),
    releases: AtomicU64::new(0),
    renewals_ok: AtomicU64::new(0),
    renewals_retried: AtomicU64::new(0),
    losses: counters(),
    acquire_wait: Histogram::new(),
    hold: Histogram::new(),
    renewal_latency: Histogram::new(),
    renewal_margin: Histogram::new(),
    tightest: Tightest::new(),
    throttled: AtomicU64::new(0),
    queued: AtomicI64::new(0),
    slots_held: AtomicI64::new(0),
    semaphore_waiters: AtomicI64::new(0),
};

/// The least margin a renewal left before its lease deadline, this minute and the last
/// (milliseconds since the process's first renewal mark the minutes).
struct Tightest {
    /// `(minute, least margin in microseconds)` of the current and the previous minute,
    /// under one mutex: a renewal takes it once.
    minutes: std::sync::Mutex<[(u64, u64); 2]>,
}

impl Tightest {
    const fn new() -> Self {
        Tightest {
            minutes: std::sync::Mutex::new([(0, u64::MAX); 2]),
        }
    }

    fn minute() -> u64 {
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        EPOCH
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_secs()
            / 60
            + 1
    }

    fn observe(&self, margin: Duration) {
        let micros = u64::try_from(margin.as_micros()).unwrap_or(u64::MAX);
        let now = Self::minute();
        let mut m = self.minutes.lock().unwrap_or_else(|e| e.into_inner());
        if m[0].0 != now {
            m[1] = if m[0].0 + 1 == now {
                m[0]
            } else {
                (0, u64::MAX)
            };
            m[0] = (now, u64::MAX);
        }
        m[0].1 = m[0].1.min(micros);
    }

    /// The least margin of this minute and the last, if a renewal landed in them.
    fn get(&self) -> Option<Duration> {
        let now = Self::minute();
        let m = self.minutes.lock().unwrap_or_else(|e| e.into_inner());
        m.iter()
            .filter(|(minute, least)| *least != u64::MAX && now.saturating_sub(*minute) <= 1)
            .map(|(_, least)| Duration::from_micros(*least))
            .min()
    }
}

/// Makes `request` and counts it by kind and outcome.
pub async fn request<T>(kind: Request, request: impl std::future::Future<Output = T>) -> T
where
    T: Outcomes,
{
    let result = request.await;
    METRICS.requests[kind as usize][result.outcome() as usize].fetch_add(1, Relaxed);
    result
}

/// An acquisition ended, after waiting `waited`.
pub fn acquisition(ended: Acquired, waited: Duration) {
    METRICS.acquisitions[ended as usize].fetch_add(1, Relaxed);
    if ended != Acquired::Busy {
        METRICS.acquire_wait.observe(waited);
    }
}

/// A lease ended by its own release after `held` (from its acquisition).
pub fn released(held: Duration) {
    METRICS.releases.fetch_add(1, Relaxed);
    METRICS.hold.observe(held);
}

/// A lease was lost, `held` after its acquisition.
pub fn lost(cause: LossCause, held: Duration) {
    METRICS.losses[cause as usize].fetch_add(1, Relaxed);
    METRICS.hold.observe(held);
}

/// A renewal succeeded in `latency`, with `margin` left before the lease deadline.
pub fn renewed(latency: Duration, margin: Duration) {
    METRICS.renewals_ok.fetch_add(1, Relaxed);
    METRICS.renewal_latency.observe(latency);
    METRICS.renewal_margin.observe(margin);
    METRICS.tightest.observe(margin);
}

/// A store answered that it is overloaded (a throttling answer).
pub fn throttled() {
    METRICS.throttled.fetch_add(1, Relaxed);
}

/// `n` more (or fewer) requests wait for a pass of their store's load.
pub fn queued(n: i64) {
    METRICS.queued.fetch_add(n, Relaxed);
}

/// `n` more (or fewer) semaphore slots are held by this process.
pub fn slots_held(n: i64) {
    METRICS.slots_held.fetch_add(n, Relaxed);
}

/// `n` more (or fewer) semaphore acquisitions wait, every slot they read being held.
pub fn semaphore_waiters(n: i64) {
    METRICS.semaphore_waiters.fetch_add(n, Relaxed);
}

/// A renewal failed and will be tried again.
pub fn renewal_retried() {
    METRICS.renewals_retried.fetch_add(1, Relaxed);
}

/// One histogram as read.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Observations.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum: f64,
    /// `(upper bound in seconds, observations at or below it)`, cumulative, as Prometheus
    /// has them; the last bound is infinity.
    pub buckets: Vec<(f64, u64)>,
}

/// Every figure, as read at one moment (each figure atomically, not all together).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// `(kind, outcome, count)` for every kind and outcome.
    pub requests: Vec<(Request, Outcome, u64)>,
    /// `(ending, count)` of acquisitions (`acquire` and `try_acquire` calls).
    pub acquisitions: Vec<(Acquired, u64)>,
    /// Leases ended by their own release.
    pub releases: u64,
    /// Renewals that succeeded.
    pub renewals: u64,
    /// Renewals that failed and were tried again.
    pub renewals_retried: u64,
    /// `(cause, count)` of leases lost.
    pub losses: Vec<(LossCause, u64)>,
    /// Seconds each acquisition waited (but one attempt that found the lock held).
    pub acquire_wait: HistogramSnapshot,
    /// Seconds from acquisition to release or loss.
    pub hold: HistogramSnapshot,
    /// Seconds each successful renewal took.
    pub renewal_latency: HistogramSnapshot,
    /// Seconds left before the lease deadline when each renewal succeeded.
    pub renewal_margin: HistogramSnapshot,
    /// The least of those margins in the last one to two minutes: how close the tightest
    /// lease came to its deadline (`None` when no renewal landed then).
    pub renewal_margin_min: Option<Duration>,
    /// Answers of stores asking this process to slow down (S3 503 SlowDown, Azure 503
    /// ServerBusy and 500 OperationTimedOut, GCS 429 and 503).
    pub throttled: u64,
    /// Requests waiting now for a pass of their store's load (renewals go first).
    pub queued: u64,
    /// Semaphore slots this process holds now (renewed by it; a slot handed off to a remote
    /// is the remote's).
    pub slots_held: u64,
    /// Semaphore acquisitions waiting now, every slot they read being held.
    pub semaphore_waiters: u64,
}

/// Every figure of this process so far. A child made by fork starts with its parent's.
pub fn snapshot() -> Snapshot {
    let m = &METRICS;
    let mut requests = Vec::new();
    for kind in Request::ALL {
        for outcome in Outcome::ALL {
            let n = m.requests[kind as usize][outcome as usize].load(Relaxed);
            requests.push((kind, outcome, n));
        }
    }
    Snapshot {
        requests,
        acquisitions: Acquired::ALL
            .iter()
            .map(|a| (*a, m.acquisitions[*a as usize].load(Relaxed)))
            .collect(),
        releases: m.releases.load(Relaxed),
        renewals: m.renewals_ok.load(Relaxed),
        renewals_retried: m.renewals_retried.load(Relaxed),
        losses: LossCause::ALL
            .iter()
            .map(|l| (*l, m.losses[*l as usize].load(Relaxed)))
            .collect(),
        acquire_wait: m.acquire_wait.snapshot(),
        hold: m.hold.snapshot(),
        renewal_latency: m.renewal_latency.snapshot(),
        renewal_margin: m.renewal_margin.snapshot(),
        renewal_margin_min: m.tightest.get(),
        throttled: m.throttled.load(Relaxed),
        queued: m.queued.load(Relaxed).max(0) as u64,
        slots_held: m.slots_held.load(Relaxed).max(0) as u64,
        semaphore_waiters: m.semaphore_waiters.load(Relaxed).max(0) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_into_cumulative_buckets_and_sums() {
        let h = Histogram::new();
        for ms in [0, 3, 3, 700, 100_000_000] {
            h.observe(Duration::from_millis(ms));
        }
        let s = h.snapshot();
        assert_eq!(s.count, 5);
        assert!((s.sum - 100_000.706).abs() < 1e-6, "{}", s.sum);
        let at = |bound: f64| s.buckets.iter().find(|(b, _)| *b == bound).unwrap().1;
        assert_eq!((at(0.001), at(0.005), at(1.0), at(86400.0)), (1, 3, 4, 4));
        assert_eq!(s.buckets.last(), Some(&(f64::INFINITY, 5)));
    }
}
