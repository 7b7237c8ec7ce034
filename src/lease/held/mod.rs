//! A held lease: the state its handle and its heartbeat share (`LeaseState`), and its
//! release; the heartbeat is in `heartbeat.rs`.

mod heartbeat;

use super::retry::{release_retrying, Backoff};
use super::LossHook;
use crate::claim::{Claim, State};
use crate::errors::{Error, Result};
use crate::metrics;
use crate::protocol::{Engine, Held, ReleaseStatus};
use heartbeat::file_beat;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// What a lease's handle, its heartbeat task and its release share.
struct LeaseState {
    /// Shared with the lock (an engine is about 100 bytes, and thousands of locks are held).
    engine: Arc<Engine>,
    token: u64,
    writer_name: Option<&'static str>,
    /// The heartbeat and release take turns on the lockfile through this.
    held: tokio::sync::Mutex<Held>,
    /// Past this instant we no longer claim the lock: `lease_start + expire - margin`.
    deadline: Mutex<Instant>,
    /// When the lock was acquired (the start of the acquiring write): hold times count from it.
    acquired_at: Instant,
    /// Why the lease was lost; sticky once set.
    lost: Mutex<Option<String>>,
    stopped: AtomicBool,
    released: AtomicBool,
    /// Set by a successful hand-off: a remote may be starting on this lock.
    handed_off: AtomicBool,
    /// Wakes a beat that sleeps on the lease's clock (simulated clocks, runtimes of the
    /// caller's own; see [`file_beat`]).
    stop: Notify,
    /// The next beat, while it is filed with the shared runtime's starter (see [`file_beat`]).
    filed: Mutex<Option<crate::starter::Ticket>>,
    /// The pauses between renewals that failed, kept between beats.
    backoff: Mutex<Backoff>,
    on_lost: Option<LossHook>,
    claim: Arc<Claim>,
}

impl LeaseState {
    fn deadline_of(&self, held: &Held) -> Instant {
        let t = &self.engine.timing;
        held.lease_start + t.expire - t.margin
    }

    fn mark_lost(&self, cause: metrics::Loss, reason: String) {
        let first = {
            let mut lost = self.lost.lock().unwrap_or_else(|e| e.into_inner());
            let first = lost.is_none();
            if first {
                *lost = Some(reason.clone());
            }
            first
        };
        // Every time: a release after an earlier loss has moved the claim on since.
        self.claim.enter(State::Lost, &reason);
        if !first {
            return;
        }
        metrics::lost(cause, self.engine.clock.now() - self.acquired_at);
        // Log only after the mutex is dropped: in Python, logging takes the GIL, and a
        // thread that holds the GIL may be waiting for this mutex (`held.lost`): deadlock.
        log::warn!(
            "{}: lock lost by owner {}: {reason}",
            self.engine.uri(),
            self.claim.owner()
        );
        if let Some(hook) = &self.on_lost {
            (hook.0)(&Error::Lost {
                uri: self.engine.uri().to_string(),
                reason,
            });
        }
    }

    /// Takes up a successful renewal: the new deadline. False when the lease was lost
    /// meanwhile (lost is sticky: past the old deadline we may already have said so).
    fn renewed(&self, held: &Held) -> bool {
        let deadline = self.deadline_of(held);
        if self.lost_reason().is_some() {
            return false;
        }
        *self.deadline.lock().unwrap_or_else(|e| e.into_inner()) = deadline;
        self.claim.enter(State::Held, "renewed")
    }

    fn lost_reason(&self) -> Option<String> {
        if let Some(r) = self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Some(r);
        }
        let deadline = *self.deadline.lock().unwrap_or_else(|e| e.into_inner());
        // A stopped lease (the remote's keep_alive after stop()) is lost at its deadline too;
        // only a release ends the claim without loss. Stopping was asked for, so that loss
        // is neither warned about nor told to on_lost.
        if self.engine.clock.now() >= deadline && !self.released.load(Ordering::SeqCst) {
            if self.claim.state() == State::Stopped {
                return Some("renewal was stopped and the lease ran out".into());
            }
            self.mark_lost(metrics::Loss::Deadline, format!(
                "no successful renewal before the lease deadline ({}s after the last write, less the margin)",
                self.engine.timing.expire.as_secs_f64()
            ));
            return self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone();
        }
        None
    }
}

/// A held lease, renewed by its heartbeat. Dropping it stops the heartbeat without
/// releasing (the lock then expires); call [`Lease::release`] to release.
pub struct Lease {
    state: Arc<LeaseState>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("uri", &self.state.engine.uri())
            .field("owner", &self.state.claim.owner())
            .field("token", &self.state.token)
            .finish()
    }
}

impl Lease {
    pub(super) fn start(
        engine: Arc<Engine>,
        held: Held,
        writer_name: Option<&'static str>,
        on_lost: Option<LossHook>,
        claim: Arc<Claim>,
    ) -> Lease {
        let first_beat = held.lease_start + engine.timing.heartbeat;
        let state = Arc::new(LeaseState {
            on_lost,
            claim,
            token: held.token,
            writer_name,
            deadline: Mutex::new(held.lease_start + engine.timing.expire - engine.timing.margin),
            acquired_at: held.lease_start,
            backoff: Mutex::new(Backoff::new(&engine.timing)),
            held: tokio::sync::Mutex::new(held),
            engine,
            lost: Mutex::new(None),
            stopped: AtomicBool::new(false),
            released: AtomicBool::new(false),
            handed_off: AtomicBool::new(false),
            stop: Notify::new(),
            filed: Mutex::new(None),
        });
        file_beat(state.clone(), first_beat);
        Lease { state }
    }

    /// The owner id.
    pub fn owner(&self) -> &str {
        self.state.claim.owner()
    }

    /// The fencing token of this acquisition.
    pub fn token(&self) -> u64 {
        self.state.token
    }

    /// True once the lease is lost: taken over, released by someone else, or not renewed
    /// before its deadline. Never turns false again.
    pub fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// Why the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<String> {
        self.state.lost_reason()
    }

    /// The version of our last write, and the instant past which the lease no longer
    /// claims the lock (its deadline).
    pub(crate) async fn last_write(&self) -> (crate::store::Version, Instant) {
        let version = self.state.held.lock().await.version.clone();
        let deadline = *self
            .state
            .deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        (version, deadline)
    }

    /// Stops the heartbeat and waits for a renewal in flight; the lease is then ours until
    /// it expires, unless released.
    pub async fn stop(&self) {
        self.halt();
        drop(self.state.held.lock().await);
        self.state.claim.enter(State::Stopped, "renewal stopped");
    }

    /// Hands the lock to a remote that may take up to `grace` to start its keep_alive: renews
    /// it now with a launch grace ([`Engine::hand_off`]). The heartbeat goes on as before.
    /// `Error::Lost` when the lease is lost; `Error::InvalidArgument` when it was released or
    /// stopped, or is a remote's.
    pub async fn hand_off(&self, grace: Duration) -> Result<()> {
        let state = &self.state;
        let uri = state.engine.uri();
        if state.writer_name.is_some() {
            return Err(Error::InvalidArgument(format!(
                "{uri}: hand_off is for the orchestrator that acquired the lock, not a remote's keep_alive"
            )));
        }
        crate::timing::Timing::check_grace(grace)?;
        let lost = |reason| Error::Lost {
            uri: uri.to_string(),
            reason,
        };
        if let Some(reason) = state.lost_reason() {
            return Err(lost(reason));
        }
        let mut held = state.held.lock().await;
        if state.stopped.load(Ordering::SeqCst) {
            return Err(Error::InvalidArgument(format!(
                "{uri}: hand_off needs a held lock, and this one was released or stopped"
            )));
        }
        if !state.claim.enter(State::Renewing, "hand-off") {
            let reason = state.lost_reason();
            return Err(lost(reason.unwrap_or_else(|| "the lease ended".into())));
        }
        let handed = state.engine.hand_off(&mut held, grace);
        match crate::store::gate::urgently(handed).await {
            Ok(()) if state.renewed(&held) => {
                state.handed_off.store(true, Ordering::SeqCst);
                log::info!(
                    "{uri}: handed off with {:.1}s of launch grace (owner {}, token {})",
                    grace.as_secs_f64(),
                    state.claim.owner(),
                    state.token
                );
                Ok(())
            }
            Ok(()) => Err(lost(state.lost_reason().unwrap_or_default())),
            Err(Error::Lost { reason, .. }) => {
                state.mark_lost(Engine::loss_cause(&reason), reason.clone());
                Err(lost(reason))
            }
            Err(e) => {
                state.claim.enter(State::Held, "hand-off failed");
                Err(e)
            }
        }
    }

    /// True once [`Lease::hand_off`] succeeded: a remote may be starting on this lock, and
    /// ending the hold early (a crash, an exception) should leave it to the remote rather
    /// than release it ([`Lease::let_go`]).
    pub fn handed_off(&self) -> bool {
        self.state.handed_off.load(Ordering::SeqCst)
    }

    /// Stops the heartbeat without waiting and without releasing: the lock stays the
    /// owner's (the remote's, after a hand-off) until nobody renews it for its lifetime.
    pub fn let_go(&self) {
        self.halt();
        if self.state.claim.state().is_holding() {
            self.state.claim.enter(State::Stopped, "let go");
        }
    }

    /// Where the claim of this lease is in its lifecycle.
    pub fn state(&self) -> State {
        self.state.claim.state()
    }

    /// Stops the heartbeat and releases.
    pub async fn release(&self) -> Result<ReleaseStatus> {
        self.halt();
        let held = self.state.held.lock().await;
        self.state.claim.enter(State::Releasing, "release");
        // Retry within the lease, or a heartbeat if that has run out (nobody may have
        // taken the lock yet: releasing it still saves the next owner a wait).
        let engine = &self.state.engine;
        let deadline = *self
            .state
            .deadline
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let until = deadline.max(engine.clock.now() + engine.timing.heartbeat);
        let released = release_retrying(
            engine,
            self.state.claim.owner(),
            Some(&held),
            until,
            Some(deadline),
        );
        let status = match released.await {
            Ok(status) => status,
            Err(e) => {
                self.state.claim.enter(State::Failed, &e);
                return Err(e);
            }
        };
        match &status {
            ReleaseStatus::Released => {
                self.state.released.store(true, Ordering::SeqCst);
                self.state.claim.enter(State::Released, "released");
                if self
                    .state
                    .lost
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_none()
                {
                    // A lease lost earlier had its hold counted then.
                    metrics::released(engine.clock.now() - self.state.acquired_at);
                }
                if let Some(wake) = &self.state.engine.wake {
                    wake.notify_waiters();
                }
            }
            // Not ours any more, found only now (taken over between heartbeats, released
            // or deleted by someone else): a loss like any other, told the same ways.
            ReleaseStatus::HeldByOther(who, _) => self.state.mark_lost(
                metrics::Loss::TakenOver,
                format!("at release it was held by {who}"),
            ),
            ReleaseStatus::NoLockfile => self.state.mark_lost(
                metrics::Loss::Deleted,
                "at release the lockfile was gone".into(),
            ),
            _ => self.state.mark_lost(
                metrics::Loss::Released,
                "at release it was already released by someone else".into(),
            ),
        }
        Ok(status)
    }

    /// True while the next beat is filed with the starter and no beat's task exists.
    #[cfg(test)]
    pub(crate) fn beat_filed(&self) -> bool {
        let ticket = *self.state.filed.lock().unwrap_or_else(|e| e.into_inner());
        ticket.is_some_and(crate::starter::is_filed)
    }

    /// The ticket of the beat filed last (for tests).
    #[cfg(test)]
    pub(crate) fn filed_ticket(&self) -> crate::starter::Ticket {
        self.state
            .filed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .expect("a beat was filed")
    }

    /// Tells the heartbeat to stop, without waiting for it.
    fn halt(&self) {
        self.state.stopped.store(true, Ordering::SeqCst);
        let filed = self
            .state
            .filed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if filed.is_some_and(crate::starter::cancel) {
            return; // no beat was running: nobody to tell
        }
        self.state.stop.notify_one();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.halt();
        if self.state.claim.state().is_holding() {
            // Dropped mid-renewal or mid-release (an abandoned future) too.
            self.state.claim.enter(State::Stopped, "lease dropped");
        }
    }
}
