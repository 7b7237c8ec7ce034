//! A held lease: its handle (`Lease`) and release; the state the handle and the heartbeat
//! share is in `state.rs`, the heartbeat in `heartbeat.rs`.

mod heartbeat;
mod state;

use super::retry::{release_retrying, Backoff};
use super::LossHook;
use crate::errors::{Error, LossCause, Result};
use crate::lease::lifecycle::{Lifecycle, State};
use crate::metrics;
use crate::protocol::{Engine, OurWrite, ReleaseStatus};
use crate::store::load::Kind;
use heartbeat::file_beat;
use state::{Kept, LeaseState, NextBeat};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// A held lease, renewed by its heartbeat. Dropping it stops the heartbeat without
/// releasing (the lock then expires); call [`Lease::release`] to release.
pub struct Lease {
    state: Arc<LeaseState>,
    /// The holder whose expired lease this acquisition wrote over (its lockfile described).
    took_over: Option<Box<str>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("uri", &self.state.engine.uri())
            .field("owner", &self.state.lifecycle.owner())
            .field("token", &self.state.token)
            .finish()
    }
}

impl Lease {
    pub(super) fn start(
        engine: Arc<Engine>,
        ours: OurWrite,
        remote: bool,
        on_lost: Option<LossHook>,
        lifecycle: Arc<Lifecycle>,
    ) -> Lease {
        let first_beat = ours.lease_start + engine.timing.heartbeat;
        // Decided once: the beats of a lease run where its first one does.
        let next = if engine.clock.is_tokio() && crate::runtime::on_shared_runtime() {
            NextBeat::Unfiled
        } else {
            NextBeat::Sleeping(Arc::new(Notify::new()))
        };
        let state = Arc::new(LeaseState {
            on_lost,
            lifecycle,
            token: ours.token(),
            remote,
            // The deadline of the acquiring write, which started at `acquired_at`.
            deadline_ns: AtomicU64::new(state::nanos(engine.timing.held_for())),
            acquired_at: ours.lease_start,
            kept: tokio::sync::Mutex::new(Kept {
                backoff: Backoff::new(&engine.timing),
                ours,
            }),
            engine,
            lost: Mutex::new(None),
            stopped: AtomicBool::new(false),
            released: AtomicBool::new(false),
            handed_off: AtomicBool::new(false),
            next: Mutex::new(next),
            counted: AtomicBool::new(false),
        });
        // Counted where the store weighs new acquisitions against its held leases.
        state.count();
        file_beat(state.clone(), first_beat);
        Lease {
            state,
            took_over: None,
        }
    }

    /// This lease, noting the holder whose expired lease its acquisition wrote over.
    pub(crate) fn took_over(mut self, who: Option<String>) -> Lease {
        self.took_over = who.map(String::into_boxed_str);
        self
    }

    /// The holder whose expired lease this acquisition wrote over (its lockfile described:
    /// owner, host, pid, labels), if it took the lock over; `None` when it found the lock
    /// free (no lockfile, or released).
    pub fn taken_over_from(&self) -> Option<&str> {
        self.took_over.as_deref()
    }

    /// The owner id.
    pub fn owner(&self) -> &str {
        self.state.lifecycle.owner()
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

    /// How long the lease holds from now unless renewed, by this process's clock (zero
    /// once its deadline has passed, whether or not the loss has been noted yet).
    pub fn remaining(&self) -> Duration {
        let engine = &self.state.engine;
        self.state
            .deadline()
            .saturating_duration_since(engine.clock.now())
    }

    /// Why the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<String> {
        self.state.lost_reason()
    }

    /// The version of our last write, and the instant past which the lease no longer
    /// counts the lock ours (its deadline).
    pub(crate) async fn last_write(&self) -> (crate::store::Version, Instant) {
        let version = self.state.kept.lock().await.ours.version.clone();
        (version, self.state.deadline())
    }

    /// Its token and the start of its last write known to have landed: what an acquisition
    /// through the same lock resolves as its own write, when a release of it failed.
    pub(crate) async fn written(&self) -> (u64, Instant) {
        let kept = self.state.kept.lock().await;
        (kept.ours.token(), kept.ours.lease_start)
    }

    /// Stops the heartbeat and waits for a renewal in flight; the lease is then ours until
    /// it expires, unless released.
    pub async fn stop(&self) {
        self.halt();
        drop(self.state.kept.lock().await);
        self.state
            .lifecycle
            .enter(State::Stopped, "renewal stopped");
    }

    /// Hands the lock to a remote that may take up to `grace` to start its keep_alive: renews
    /// it now with a launch grace ([`Engine::hand_off`]). The heartbeat goes on as before.
    /// `Error::Lost` when the lease is lost; `Error::InvalidArgument` when it was released or
    /// stopped, or is a remote's.
    pub async fn hand_off(&self, grace: Duration) -> Result<()> {
        let state = &self.state;
        let uri = state.engine.uri();
        if state.remote {
            return Err(Error::InvalidArgument(format!(
                "{uri}: hand_off is for the orchestrator that acquired the lock, not a remote's keep_alive"
            )));
        }
        crate::timing::Timing::check_grace(grace)?;
        let lost = |(cause, reason)| Error::Lost {
            uri: uri.to_string(),
            cause,
            reason,
        };
        // The lease ended meanwhile: lost, as its loss says, or let go (it runs out then).
        let ended = |reason: &str| state.loss().unwrap_or((LossCause::Deadline, reason.into()));
        if let Some(loss) = state.loss() {
            return Err(lost(loss));
        }
        let mut kept = state.kept.lock().await;
        let ours = &mut kept.ours;
        if state.stopped.load(Ordering::SeqCst) {
            return Err(Error::InvalidArgument(format!(
                "{uri}: hand_off needs a held lock, and this one was released or stopped"
            )));
        }
        if !state.lifecycle.enter(State::Renewing, "hand-off") {
            return Err(lost(ended("the lease ended")));
        }
        let handed = state.engine.hand_off(ours, grace);
        let kind = Kind::Renewal {
            deadline: state.deadline(),
        };
        match crate::store::load::as_kind(kind, handed).await {
            Ok(()) if state.renewed(ours) => {
                state.handed_off.store(true, Ordering::SeqCst);
                log::info!(
                    "{uri}: handed off with {:.1}s of launch grace (owner {}, token {})",
                    grace.as_secs_f64(),
                    state.lifecycle.owner(),
                    state.token
                );
                Ok(())
            }
            Ok(()) => Err(lost(ended(""))),
            Err(Error::Lost { cause, reason, .. }) => {
                state.mark_lost(cause, reason.clone());
                Err(lost((cause, reason)))
            }
            Err(e) => {
                state.lifecycle.enter(State::Held, "hand-off failed");
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
        if self.state.lifecycle.state().is_holding() {
            self.state.lifecycle.enter(State::Stopped, "let go");
        }
    }

    /// Counts this lease, a semaphore's slot, in the process's held slots while it holds,
    /// and calls `on_vacate` when it stops holding it.
    pub(crate) fn count_as_slot(&self, on_vacate: crate::lease::lifecycle::OnVacate) {
        self.state.lifecycle.count_as_slot(on_vacate);
    }

    /// Where the lifecycle of this lease is.
    pub fn state(&self) -> State {
        self.state.lifecycle.state()
    }

    /// Stops the heartbeat and releases.
    pub async fn release(&self) -> Result<ReleaseStatus> {
        // Whether the block this lease guarded ended within it (see `release_retrying`).
        let in_time = !self.remaining().is_zero();
        self.halt();
        let kept = self.state.kept.lock().await;
        self.state.lifecycle.enter(State::Releasing, "release");
        // Retry within the lease, or a heartbeat if that has run out (nobody may have
        // taken the lock yet: releasing it still saves the next owner a wait).
        let engine = &self.state.engine;
        let deadline = self.state.deadline();
        let until = deadline.max(engine.clock.now() + engine.timing.heartbeat);
        let released = release_retrying(
            engine,
            self.state.lifecycle.owner(),
            Some(&kept.ours),
            until,
            in_time,
        );
        let kind = Kind::Release {
            deadline: Some(deadline),
        };
        let status = match crate::store::load::as_kind(kind, released).await {
            Ok(status) => status,
            Err(e) => {
                self.state.lifecycle.enter(State::Failed, &e);
                // What the caller can count on: the lock frees itself (nobody renews it).
                let frees_in = self.remaining() + engine.timing.margin;
                return Err(match e {
                    crate::errors::Error::Store { uri, message, kind } => crate::errors::Error::Store {
                        uri,
                        message: format!(
                            "{message}; not released: the lock frees itself when its last write expires, in {:.0}s at most",
                            frees_in.as_secs_f64().ceil()
                        ),
                        kind,
                    },
                    other => other,
                });
            }
        };
        match &status {
            ReleaseStatus::Released => {
                self.state.released.store(true, Ordering::SeqCst);
                self.state.lifecycle.enter(State::Released, "released");
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
                if let Some(identity) = &self.state.engine.wake {
                    crate::lease::wake_waiters(identity);
                }
            }
            // Not ours any more, found only now (taken over between heartbeats, released
            // or deleted by someone else): a loss like any other, told the same ways.
            ReleaseStatus::HeldByOther(who, _) => self.state.mark_lost(
                LossCause::TakenOver,
                format!("at release it was held by {who}"),
            ),
            ReleaseStatus::NoLockfile => self.state.mark_lost(
                LossCause::Deleted,
                "at release the lockfile was gone".into(),
            ),
            _ => self.state.mark_lost(
                LossCause::ReleasedByOther,
                "at release it was already released by someone else".into(),
            ),
        }
        Ok(status)
    }

    /// True while the next beat is filed with the starter and no beat's task exists.
    #[cfg(test)]
    pub(crate) fn beat_filed(&self) -> bool {
        match *self.state.next_beat() {
            NextBeat::Filed(ticket) => crate::lease::starter::is_filed(ticket),
            _ => false,
        }
    }

    /// The ticket of the beat filed last (for tests).
    #[cfg(test)]
    pub(crate) fn filed_ticket(&self) -> crate::lease::starter::Ticket {
        match *self.state.next_beat() {
            NextBeat::Filed(ticket) => ticket,
            _ => panic!("a beat was filed"),
        }
    }

    /// Tells the heartbeat to stop, without waiting for it.
    fn halt(&self) {
        self.state.stopped.store(true, Ordering::SeqCst);
        self.state.uncount();
        let mut next = self.state.next_beat();
        match std::mem::replace(&mut *next, NextBeat::Unfiled) {
            // Taken back before it started; or it has started, and the running beat sees
            // `stopped` (set before the mutex that `file_beat` checks it under).
            NextBeat::Filed(ticket) => drop(crate::lease::starter::cancel(ticket)),
            NextBeat::Unfiled => {}
            // A permit if the task is not waiting yet: it wakes at once when it does.
            NextBeat::Sleeping(stop) => {
                stop.notify_one();
                *next = NextBeat::Sleeping(stop);
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.halt();
        if self.state.lifecycle.state().is_holding() {
            // Dropped mid-renewal or mid-release (an abandoned future) too.
            self.state.lifecycle.enter(State::Stopped, "lease dropped");
        }
    }
}
