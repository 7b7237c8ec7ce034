//! The state a lease's handle, its heartbeat and its release share, and what they read
//! and change in it: the deadline, the loss, the lockfile held.

use super::super::retry::Backoff;
use super::super::LossHook;
use crate::errors::{Error, LossCause};
use crate::lease::lifecycle::{Lifecycle, State};
use crate::metrics;
use crate::protocol::{Engine, OurWrite};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// What a lease's handle, its heartbeat task and its release share. Thousands are held
/// at once: it is kept under 512 bytes with its counts (the allocator's next class down
/// from 640), so rarely used parts are boxed and flags are atomics.
pub(super) struct LeaseState {
    /// Shared with the lock (an engine is about 100 bytes, and thousands of locks are held).
    pub(super) engine: Arc<Engine>,
    pub(super) token: u64,
    /// The heartbeat and release write the lockfile one at a time through this.
    pub(super) kept: tokio::sync::Mutex<Kept>,
    /// Past this instant we no longer count the lock ours (`lease_start + expire - margin`), as
    /// nanoseconds after `acquired_at`.
    pub(super) deadline_ns: AtomicU64,
    /// When the lock was acquired (the start of the acquiring write): hold times count from it.
    pub(super) acquired_at: Instant,
    /// Why the lease was lost, as a cause and in words; sticky once set. Boxed: rare.
    pub(super) lost: Mutex<Option<Box<(LossCause, String)>>>,
    pub(super) stopped: AtomicBool,
    pub(super) released: AtomicBool,
    /// Set by a successful hand-off: a remote may be starting on this lock.
    pub(super) handed_off: AtomicBool,
    /// A remote's lease (`keep_alive`): its writes say so, and it cannot hand off.
    pub(super) remote: bool,
    /// How the next beat waits (see [`super::heartbeat::file_beat`]).
    pub(super) next: Mutex<NextBeat>,
    pub(super) on_lost: Option<LossHook>,
    pub(super) lifecycle: Arc<Lifecycle>,
    /// Set while this lease is counted in what its store can take (while it renews).
    pub(super) counted: AtomicBool,
}

/// What the heartbeat and a release hold while they write: the lockfile as held, and the
/// pauses between renewals that failed, kept between beats.
pub(super) struct Kept {
    pub(super) ours: OurWrite,
    pub(super) backoff: Backoff,
}

/// How a lease's next beat waits for its time.
pub(super) enum NextBeat {
    /// No beat is filed (one is running, or the heartbeat has ended).
    Unfiled,
    /// Filed with the shared runtime's starter, to be taken back by a stop.
    Filed(crate::lease::starter::Ticket),
    /// As a task sleeping on the lease's clock (simulated clocks, runtimes of the caller's
    /// own), woken early by a stop through this.
    Sleeping(Arc<Notify>),
}

impl LeaseState {
    pub(super) fn deadline_of(&self, ours: &OurWrite) -> Instant {
        ours.lease_start + self.engine.timing.held_for()
    }

    pub(super) fn deadline(&self) -> Instant {
        self.acquired_at + Duration::from_nanos(self.deadline_ns.load(Ordering::SeqCst))
    }

    pub(super) fn set_deadline(&self, deadline: Instant) {
        let after = deadline.saturating_duration_since(self.acquired_at);
        self.deadline_ns.store(nanos(after), Ordering::SeqCst);
    }

    pub(super) fn next_beat(&self) -> std::sync::MutexGuard<'_, NextBeat> {
        self.next.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts this lease in what its store can take, once.
    pub(super) fn count(&self) {
        if !self.counted.swap(true, Ordering::SeqCst) {
            let heartbeat = self.engine.timing.heartbeat;
            self.engine.store.renewing(heartbeat, true);
        }
    }

    /// Counts it no more: it renews no more (stopped, released, lost).
    pub(super) fn uncount(&self) {
        if self.counted.swap(false, Ordering::SeqCst) {
            let heartbeat = self.engine.timing.heartbeat;
            self.engine.store.renewing(heartbeat, false);
        }
    }

    pub(super) fn mark_lost(&self, cause: LossCause, reason: String) {
        let first = {
            let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
            let first = lost.is_none();
            if first {
                *lost = Some(Box::new((cause, reason.clone())));
            }
            first
        };
        // Every time: a release after an earlier loss has moved the lifecycle on since.
        self.lifecycle.enter(State::Lost, &reason);
        if !first {
            return;
        }
        self.uncount(); // it renews no more
        metrics::lost(cause, self.engine.clock.now() - self.acquired_at);
        // Log only after the mutex is dropped: in Python, logging takes the GIL, and a
        // thread that holds the GIL may be waiting for this mutex (`held.lost`): deadlock.
        log::warn!(
            "{}: lock lost by owner {}: {reason}",
            self.engine.uri(),
            self.lifecycle.owner()
        );
        if let Some(hook) = &self.on_lost {
            (hook.0)(&Error::Lost {
                uri: self.engine.uri().to_string(),
                cause,
                reason,
            });
        }
    }

    /// Takes up a successful renewal: the new deadline. False when the lease was lost
    /// meanwhile (lost is sticky: past the old deadline we may already have said so).
    pub(super) fn renewed(&self, ours: &OurWrite) -> bool {
        let deadline = self.deadline_of(ours);
        if self.lost_reason().is_some() {
            return false;
        }
        self.set_deadline(deadline);
        self.lifecycle.enter(State::Held, "renewed")
    }

    pub(super) fn lost_reason(&self) -> Option<String> {
        self.loss().map(|(_, reason)| reason)
    }

    /// Why the lease was lost, if it was: its cause, and the words that say it.
    pub(super) fn loss(&self) -> Option<(LossCause, String)> {
        if let Some(loss) = self.marked_loss() {
            return Some(loss);
        }
        let deadline = self.deadline();
        // A stopped lease (the remote's keep_alive after stop()) is lost at its deadline too;
        // only a release ends the lifecycle without loss. Stopping was asked for, so that loss
        // is neither warned about nor told to on_lost.
        if self.engine.clock.now() >= deadline && !self.released.load(Ordering::SeqCst) {
            if self.lifecycle.state() == State::Stopped {
                let reason = "renewal was stopped and the lease ran out";
                return Some((LossCause::Deadline, reason.into()));
            }
            self.mark_lost(LossCause::Deadline, format!(
                "no successful renewal before the lease deadline ({}s after the last write, less the margin)",
                self.engine.timing.expire.as_secs_f64()
            ));
            return self.marked_loss();
        }
        None
    }

    pub(super) fn marked_loss(&self) -> Option<(LossCause, String)> {
        let lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
        lost.as_deref().cloned()
    }
}

/// `d` in nanoseconds, as `LeaseState::deadline_ns` keeps it.
pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    /// Every held lock keeps one of these behind an `Arc` (two counts, 16 bytes): over 512
    /// bytes, the allocator rounds it up to 640.
    #[test]
    fn a_held_lease_fits_the_512_byte_class() {
        let size = std::mem::size_of::<super::LeaseState>() + 16;
        assert!(size <= 512, "LeaseState with its counts is {size} bytes");
    }
}
