//! When a store counts as saturated, so that a new acquisition gives way to the renewals of
//! the locks already held there: renewals falling behind, a throttling answer, or held leases
//! needing most of what the store answers when kept busy.

use super::State;
use std::time::Duration;
use tokio::time::Instant;

/// The share of the store's measured capacity that the renewals of held leases may use; the
/// rest absorbs bursts, retries, reads and releases.
pub const HEADROOM: f64 = 0.8;

/// A renewal that waited for a pass more than this share of the time it had left before its
/// lease deadline, in the last second or two, means the store is falling behind: a queue
/// of renewals grows only while they need more than the store answers.
pub(super) const RENEWAL_WAIT: f64 = 1.0 / 8.0;

/// How long a throttling answer holds new acquisitions back, at least.
const THROTTLE_HOLD: Duration = Duration::from_secs(1);

impl State {
    /// Why a new acquisition would add more than the store can take, if it would.
    pub(super) fn saturation(&self, now: Instant, name: &str) -> Option<String> {
        if let Some(at) = self.throttled_at {
            let hold = THROTTLE_HOLD.max(self.latency.smoothed().unwrap_or_default() * 2);
            if now - at < hold {
                return Some(format!(
                    "{name} is saturated: it asked this process to slow down {:.2}s ago (a throttling answer); {} leases renew there",
                    (now - at).as_secs_f64(),
                    self.leases
                ));
            }
        }
        let [a, b] = self.renewal_wait;
        let (share, waited) = if a.0 >= b.0 { a } else { b };
        if share > RENEWAL_WAIT {
            return Some(format!(
                "{name} is saturated: renewals of the {} leases held there are falling behind (one waited {:.2}s for the store, {:.0} % of the time it had left before its lease deadline; {}, {} requests waiting, {} in flight)",
                self.leases,
                waited.as_secs_f64(),
                100.0 * share,
                self.latency_words(),
                self.queue.len(),
                self.in_flight
            ));
        }
        if let Some(capacity) = self.capacity.estimate(now) {
            let needed = self.renewals_per_second;
            if needed >= HEADROOM * capacity {
                return Some(format!(
                    "{name} is saturated: the {} leases held there need {needed:.0} renewals a second, {:.0} % of the {capacity:.0} requests a second it answers this process when kept busy, as measured now (new locks wait while the renewals need {:.0} % or more of it; the measure grows as the store answers more, so locks taken earlier may be above it)",
                    self.leases,
                    100.0 * needed / capacity,
                    100.0 * HEADROOM
                ));
            }
        }
        None
    }

    pub(super) fn latency_words(&self) -> String {
        match self.latency.smoothed() {
            Some(l) => format!("answering in {:.0} ms", l.as_secs_f64() * 1e3),
            None => "no answer yet".into(),
        }
    }
}
