//! What one store can take from this process, and who goes first when it can take no more.
//!
//! Every request to a store over HTTP passes its [`Load`] ([`super::request::gate`] sends it): a
//! request waits for one of the store's passes, whose number follows the store's answers
//! (`limit.rs`); waiting requests go in the order of `queue.rs` (renewals first, by their
//! leases' deadlines); each request may take what the store's latency says it needs
//! (`latency.rs`), never less than the lock's request timeout and never more than its lease
//! can afford. A renewal that could only land after its deadline is not sent.
//!
//! New acquisitions are what gives way when the store falls behind: while renewals wait for
//! passes, while the store asks to slow down, or while the renewals of the leases held here
//! would need more than [`HEADROOM`] of what the store has shown it can answer, an
//! acquisition is refused at once ([`crate::Error::Saturated`], which names the reason and
//! its figures) instead of adding to the load: held locks are never what is lost.

mod capacity;
mod kind;
mod latency;
mod limit;
mod pass;
mod queue;
mod saturation;
mod scope;

use crate::metrics;
use capacity::Capacity;
use kind::rank_of;
pub use kind::Kind;
use latency::Latency;
use limit::Limit;
use pass::Waiting;
pub use pass::{Ending, Pass, TooLate};
use queue::{Call, Queue, Rank};
pub use saturation::HEADROOM;
pub use scope::{as_kind, current_kind, reserving};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// At most one warning about lagging renewals per store in this long.
const LAG_WARNING_EVERY: Duration = Duration::from_secs(60);

/// One store's load, shared by every request to it in this process.
#[derive(Debug)]
pub struct Load {
    /// The store, for messages.
    name: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    in_flight: usize,
    /// Of those, requests that are not renewals.
    bulk_in_flight: usize,
    limit: Limit,
    latency: Latency,
    queue: Queue,
    /// Leases renewing on this store, and the renewals a second they need together.
    leases: usize,
    renewals_per_second: f64,
    /// Requests waiting in the queue (those that left are not counted).
    waiting: usize,
    capacity: Capacity,
    /// The renewal that waited for a pass the longest share of the time it had left, in
    /// the current second and the last (`(share, wait)`), and when the current one began.
    renewal_wait: [(f64, Duration); 2],
    second: Option<Instant>,
    throttled_at: Option<Instant>,
    warned_at: Option<Instant>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("in_flight", &self.in_flight)
            .field("limit", &self.limit.get())
            .field("queued", &self.queue.len())
            .finish()
    }
}

impl Load {
    /// The load of the store named `name` (for messages).
    pub fn new(name: String) -> Load {
        Load {
            name,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a pass for a request of `kind`, which may take at least `floor` and at most
    /// `ceiling` (a renewal: at most until its deadline).
    pub async fn enter(
        self: &Arc<Self>,
        kind: Kind,
        floor: Duration,
        ceiling: Duration,
    ) -> Result<Pass, TooLate> {
        let asked = Instant::now();
        let rank = match rank_of(kind) {
            // A release ends its lease's renewals: it goes before every renewal that can
            // wait a request timeout, not before one about to miss its deadline. By its
            // lease's deadline alone, a process releasing its locks one by one on a store
            // kept busy by their renewals waited behind all of them, each time.
            Rank::LeaseRelease(deadline) => Rank::LeaseRelease(deadline.min(asked + floor)),
            rank => rank,
        };
        let mut heard = {
            let mut s = self.state();
            s.tick(asked);
            // Every request joins the queue, and goes at once if its rank lets it.
            let heard = s.push(rank, asked);
            s.hand_on(asked);
            heard
        };
        let call = match heard.try_recv().ok() {
            Some(call) => call,
            None => {
                let waiting = Waiting {
                    load: self,
                    heard,
                    rank,
                    told: false,
                };
                match rank {
                    // Renewals and the releases of held leases wait until their deadline
                    // (the queue says when it is too late).
                    Rank::Renewal(_) | Rank::LeaseRelease(_) => waiting.called().await,
                    // The rest give way for at most a request timeout: an acquisition
                    // behind renewals that keep coming is refused as saturated (its caller
                    // retries within its own timeout), never left waiting without end.
                    _ => match tokio::time::timeout(floor, waiting.called()).await {
                        Ok(call) => call,
                        Err(_) => return Err(TooLate(self.no_pass(floor))),
                    },
                }
            }
        };
        if let Call::TooLate = call {
            return Err(TooLate(self.too_late(kind)));
        }
        let now = Instant::now();
        let mut s = self.state();
        if let Rank::Renewal(deadline) = rank {
            let waited = now - asked;
            let left = deadline.saturating_duration_since(asked).as_secs_f64();
            let share = waited.as_secs_f64() / left.max(1e-3);
            if share > s.renewal_wait[0].0 {
                s.renewal_wait[0] = (share, waited);
            }
        }
        let timeout = match kind {
            // Half of what the lease has left, at least: a store that has just become
            // slower than the request timeout still renews, and one retry still fits.
            Kind::Renewal { deadline } => {
                let left = deadline.saturating_duration_since(now);
                s.latency.timeout(floor).max(left / 2).min(left)
            }
            _ => s.latency.timeout(floor).min(ceiling.max(floor)),
        };
        Ok(Pass {
            load: self.clone(),
            kind,
            asked,
            sent: now,
            in_flight: s.in_flight,
            timeout,
        })
    }

    /// Waits for a pass for the current task's next request and keeps it for that request
    /// (inside [`reserving`] or [`as_kind`]; elsewhere it does nothing): a write that
    /// stamps a lease with the time it leaves takes its pass first, so that time is when it
    /// leaves, not when it began to wait. A lease counted from before a long wait for a
    /// pass would gain less than its heartbeat at each renewal, and every lease would run
    /// out together once renewals must wait.
    pub async fn reserve(
        self: &Arc<Self>,
        floor: Duration,
        ceiling: Duration,
    ) -> Result<(), TooLate> {
        if scope::keeps(self) {
            return Ok(());
        }
        let pass = self.enter(current_kind(), floor, ceiling).await?;
        drop(scope::keep(pass)); // no place to keep it: given back at once
        Ok(())
    }

    /// The pass the current task reserved on this load, if any.
    pub fn reserved(self: &Arc<Self>) -> Option<Pass> {
        scope::take(self)
    }

    /// The reason a request other than a renewal was not sent.
    fn no_pass(&self, waited: Duration) -> String {
        let s = self.state();
        format!(
            "no pass to send a request within {:.1}s: the renewals of the {} leases held there go first ({}, {} requests waiting, {} in flight)",
            waited.as_secs_f64(),
            s.leases,
            s.latency_words(),
            s.queue.len(),
            s.in_flight
        )
    }

    /// The reason a renewal was not sent.
    fn too_late(&self, kind: Kind) -> String {
        let s = self.state();
        let left = match kind {
            Kind::Renewal { deadline } => deadline.saturating_duration_since(Instant::now()),
            _ => Duration::ZERO,
        };
        format!(
            "the renewal was not sent: {:.3}s were left before the lease deadline, less than {} takes to answer ({}, {} requests waiting, {} in flight)",
            left.as_secs_f64(),
            self.name,
            s.latency_words(),
            s.queue.len(),
            s.in_flight
        )
    }

    /// Whether a new acquisition may try now: `Err(why)` while the store is saturated
    /// (renewals falling behind, a throttling answer, or held leases needing most of its
    /// capacity). Asked before an attempt makes any request, so that an attempt is either
    /// not made or made whole.
    pub fn admit(&self) -> Result<(), String> {
        let now = Instant::now();
        let mut s = self.state();
        s.tick(now);
        match s.saturation(now, &self.name) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// Counts a lease renewing on this store every `heartbeat` (`renews`), or no longer
    /// (`!renews`, once for each count): what new acquisitions are weighed against.
    pub fn renewing(&self, heartbeat: Duration, renews: bool) {
        let per_second = 1.0 / heartbeat.as_secs_f64().max(1e-3);
        let mut s = self.state();
        if renews {
            s.leases += 1;
            s.renewals_per_second += per_second;
        } else {
            s.leases = s.leases.saturating_sub(1);
            s.renewals_per_second = (s.renewals_per_second - per_second).max(0.0);
            if s.leases == 0 {
                s.renewals_per_second = 0.0; // no drift from rounding
            }
        }
    }

    /// Requests waiting for a pass now, and in flight.
    pub fn depth(&self) -> (usize, usize) {
        let s = self.state();
        (s.queue.len(), s.in_flight)
    }

    /// The number of requests that may be in flight now.
    pub fn limit(&self) -> usize {
        self.state().limit.get()
    }

    /// Gives a pass back and hands it on to the first waiter who may take it.
    fn give_back(&self, rank: Rank) {
        let mut s = self.state();
        s.untake(rank);
        s.hand_on(Instant::now());
    }

    /// Notes how a request that was let through ended.
    fn ended(&self, pass: &Pass, ending: Ending) {
        let now = Instant::now();
        let took = now - pass.sent;
        let mut warn = None;
        {
            let mut s = self.state();
            s.tick(now);
            match ending {
                Ending::Answered => {
                    s.capacity.answered(now);
                    s.latency.answered(took, now);
                    let baseline = s.latency.baseline().unwrap_or(took);
                    s.limit.answered(took, baseline, pass.in_flight);
                }
                Ending::Throttled => {
                    s.capacity.answered(now);
                    s.throttled_at = Some(now);
                    let rtt = s.latency.smoothed().unwrap_or(took);
                    s.limit.congested(now, rtt);
                    metrics::throttled();
                }
                Ending::TimedOut => {
                    s.latency.timed_out();
                    let rtt = s.latency.smoothed().unwrap_or(took);
                    s.limit.congested(now, rtt);
                }
                Ending::Unanswered => {}
            }
            if let Kind::Renewal { deadline } = pass.kind {
                let slack = deadline.saturating_duration_since(pass.asked);
                let lag = now - pass.asked;
                let due = s.warned_at.is_none_or(|t| now - t >= LAG_WARNING_EVERY);
                if ending == Ending::Answered && lag * 2 > slack && due {
                    s.warned_at = Some(now);
                    warn = Some(format!(
                        "{}: renewals are lagging: one took {:.2}s of the {:.2}s left before its lease deadline ({} leases renew here, {:.0} renewals a second; {}, {} requests waiting, {} in flight); new acquisitions on this store are refused until it catches up",
                        self.name,
                        lag.as_secs_f64(),
                        slack.as_secs_f64(),
                        s.leases,
                        s.renewals_per_second,
                        s.latency_words(),
                        s.queue.len(),
                        s.in_flight,
                    ));
                }
            }
        }
        if let Some(w) = warn {
            log::warn!("{w}");
        }
    }
}

impl State {
    /// Moves the second of the renewals' longest wait on.
    fn tick(&mut self, now: Instant) {
        let Some(began) = self.second else {
            self.second = Some(now);
            return;
        };
        let elapsed = now - began;
        if elapsed >= Duration::from_secs(2) {
            self.renewal_wait = Default::default();
        } else if elapsed >= Duration::from_secs(1) {
            self.renewal_wait = [Default::default(), self.renewal_wait[0]];
        } else {
            return;
        }
        self.second = Some(now);
    }

    /// Queues a request of `rank`.
    fn push(&mut self, rank: Rank, now: Instant) -> tokio::sync::oneshot::Receiver<Call> {
        if self.waiting == 0 {
            self.capacity.busy(now);
        }
        self.waiting += 1;
        metrics::queued(1);
        self.queue.push(rank)
    }

    /// One waiter fewer: called, or gone.
    fn unqueue(&mut self, now: Instant) {
        self.waiting -= 1;
        metrics::queued(-1);
        if self.waiting == 0 {
            self.capacity.idle(now);
        }
    }

    /// Whether a request of `rank` may have a pass now. Requests other than renewals leave
    /// a quarter of the passes to renewals.
    fn has_pass(&self, rank: Rank) -> bool {
        let limit = self.limit.get();
        match rank {
            r if r.keeps_a_lease() => self.in_flight < limit,
            _ => self.in_flight < limit && self.bulk_in_flight < limit - limit / 4,
        }
    }

    fn take(&mut self, rank: Rank) {
        self.in_flight += 1;
        if !rank.keeps_a_lease() {
            self.bulk_in_flight += 1;
        }
    }

    fn untake(&mut self, rank: Rank) {
        self.in_flight -= 1;
        if !rank.keeps_a_lease() {
            self.bulk_in_flight -= 1;
        }
    }

    /// Hands free passes to the waiters, first in the queue first.
    fn hand_on(&mut self, now: Instant) {
        while let Some(rank) = self.queue.first() {
            if let Rank::Renewal(deadline) = rank {
                let fastest = self.latency.baseline().unwrap_or_default();
                if deadline.saturating_duration_since(now) <= fastest {
                    if self.queue.tell_first(Call::TooLate) {
                        self.unqueue(now);
                    }
                    continue;
                }
            }
            if !self.has_pass(rank) {
                return;
            }
            // Taken now: a waiter that leaves before it hears gives it back (`Waiting`).
            self.take(rank);
            if self.queue.tell_first(Call::Go) {
                self.unqueue(now);
            } else {
                self.untake(rank);
            }
        }
    }
}

#[cfg(test)]
mod tests;
