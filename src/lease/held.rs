//! A held lease: the state its handle and its heartbeat share (`LeaseState`), its heartbeat, and its release.

use super::retry::{release_retrying, Backoff};
use super::LossHook;
use crate::claim::{Claim, State};
use crate::errors::{Error, Result};
use crate::protocol::{Engine, Held, ReleaseStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio::time::Instant;

/// What a lease's handle, its heartbeat task and its release share.
struct LeaseState {
    engine: Engine,
    owner: String,
    token: u64,
    writer_name: Option<&'static str>,
    /// The heartbeat and release take turns on the lockfile through this.
    held: tokio::sync::Mutex<Held>,
    /// Past this instant we no longer claim the lock: `lease_start + expire - margin`.
    deadline: Mutex<Instant>,
    /// Why the lease was lost; sticky once set.
    lost: Mutex<Option<String>>,
    stopped: AtomicBool,
    released: AtomicBool,
    stop: Notify,
    on_lost: Option<LossHook>,
    claim: Arc<Claim>,
}

impl LeaseState {
    fn deadline_of(&self, held: &Held) -> Instant {
        let t = &self.engine.timing;
        held.lease_start + t.expire - t.margin
    }

    fn mark_lost(&self, reason: String) {
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
        // Log only after the mutex is dropped: in Python, logging takes the GIL, and a
        // thread that holds the GIL may be waiting for this mutex (`held.lost`): deadlock.
        log::warn!(
            "{}: lock lost by owner {}: {reason}",
            self.engine.uri(),
            self.owner
        );
        if let Some(hook) = &self.on_lost {
            (hook.0)(&Error::Lost {
                uri: self.engine.uri().to_string(),
                reason,
            });
        }
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
            self.mark_lost(format!(
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
    /// The heartbeat's start, while it is filed with the shared runtime's starter and has
    /// not run.
    filed: Mutex<Option<crate::starter::Ticket>>,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("uri", &self.state.engine.uri())
            .field("owner", &self.state.owner)
            .field("token", &self.state.token)
            .finish()
    }
}

impl Lease {
    pub(super) fn start(
        engine: Engine,
        held: Held,
        writer_name: Option<&'static str>,
        on_lost: Option<LossHook>,
        claim: Arc<Claim>,
    ) -> Lease {
        let first_beat = held.lease_start + engine.timing.heartbeat;
        let state = Arc::new(LeaseState {
            on_lost,
            claim,
            owner: held.owner.clone(),
            token: held.token,
            writer_name,
            deadline: Mutex::new(held.lease_start + engine.timing.expire - engine.timing.margin),
            held: tokio::sync::Mutex::new(held),
            engine,
            lost: Mutex::new(None),
            stopped: AtomicBool::new(false),
            released: AtomicBool::new(false),
            stop: Notify::new(),
        });
        let mut filed = None;
        if state.engine.clock.is_tokio() && crate::runtime::on_shared_runtime() {
            // Nothing to do before the first renewal: the task starts then, if the lease is
            // still held (most blocking callers have released long before).
            let task = state.clone();
            let start = Box::new(move || drop(tokio::spawn(heartbeat(task))));
            filed = Some(crate::starter::start_at(first_beat, start));
        } else {
            tokio::spawn(heartbeat(state.clone()));
        }
        Lease {
            state,
            filed: Mutex::new(filed),
        }
    }

    /// The owner id.
    pub fn owner(&self) -> &str {
        &self.state.owner
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

    /// Stops the heartbeat and waits for a renewal in flight; the lease is then ours until
    /// it expires, unless released.
    pub async fn stop(&self) {
        self.halt();
        drop(self.state.held.lock().await);
        self.state.claim.enter(State::Stopped, "renewal stopped");
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
            &self.state.owner,
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
                if let Some(wake) = &self.state.engine.wake {
                    wake.notify_waiters();
                }
            }
            // Not ours any more, found only now (taken over between heartbeats, released
            // or deleted by someone else): a loss like any other, told the same ways.
            other => self.state.mark_lost(match other {
                ReleaseStatus::HeldByOther(who, _) => format!("at release it was held by {who}"),
                ReleaseStatus::NoLockfile => "at release the lockfile was gone".into(),
                _ => "at release it was already released by someone else".into(),
            }),
        }
        Ok(status)
    }

    /// Tells the heartbeat to stop, without waiting for it.
    fn halt(&self) {
        self.state.stopped.store(true, Ordering::SeqCst);
        let filed = self.filed.lock().unwrap_or_else(|e| e.into_inner()).take();
        if filed.is_some_and(crate::starter::cancel) {
            return; // no task was started: nobody to tell
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

async fn heartbeat(state: Arc<LeaseState>) {
    // Only the interval: a copy of the whole timing would live in every idle task.
    let heartbeat = state.engine.timing.heartbeat;
    let mut next = state.held.lock().await.lease_start + heartbeat;
    let mut backoff = Backoff::new(&state.engine.timing);
    loop {
        tokio::select! {
            biased; // deterministic under simulation
            _ = state.engine.clock.sleep_until(next) => {}
            _ = state.stop.notified() => {}
        }
        if state.stopped.load(Ordering::SeqCst) || state.lost_reason().is_some() {
            return;
        }
        let mut held = state.held.lock().await;
        if state.stopped.load(Ordering::SeqCst) || !state.claim.enter(State::Renewing, "heartbeat")
        {
            return; // stopped, or lost meanwhile
        }
        let deadline = *state.deadline.lock().unwrap_or_else(|e| e.into_inner());
        let renewal = {
            // Boxed: inline, the renewal's state was most of an idle heartbeat task's memory
            // (BENCHMARKS.md); boxed it exists only while a renewal runs.
            let renewal = state.engine.renew(&mut held, state.writer_name);
            let mut renewal = Box::pin(crate::store::gate::urgently(renewal));
            tokio::select! {
                biased;
                r = &mut renewal => r,
                _ = state.engine.clock.sleep_until(deadline) => {
                    // From the deadline on a waiter may take over, so a renewal still in flight
                    // cannot save the lease: declare the loss now, not when the request ends.
                    state.mark_lost("the renewal in flight did not finish before the lease deadline".into());
                    // Not cancelled: a request on the wire may land anyway, and its outcome is
                    // settled like any other (a release waits for it).
                    let _ = renewal.await;
                    return;
                }
            }
        };
        match renewal {
            Ok(()) => {
                let deadline = state.deadline_of(&held);
                // Past the old deadline we may already have told the user the lease is lost;
                // lost is sticky, so a late success changes nothing.
                if state.lost_reason().is_some() {
                    return;
                }
                *state.deadline.lock().unwrap_or_else(|e| e.into_inner()) = deadline;
                if !state.claim.enter(State::Held, "renewed") {
                    return;
                }
                next = held.lease_start + heartbeat;
                backoff.reset();
            }
            Err(Error::Lost { reason, .. }) => {
                state.mark_lost(reason);
                return;
            }
            Err(e) if !e.is_transient() && !matches!(e, Error::InvalidLockFile { .. }) => {
                // Bad credentials, a deleted bucket: no retry can renew the lease. (An
                // unreadable lockfile may be a foreign writer's torn write: retried.)
                state.mark_lost(format!("renewal failed and cannot succeed: {e}"));
                return;
            }
            Err(e) => {
                let now = state.engine.clock.now();
                if now >= deadline {
                    state.mark_lost(format!("renewal failed until the lease deadline: {e}"));
                    return;
                }
                log::warn!("{}: renewal failed, retrying: {e}", state.engine.uri());
                state.claim.enter(State::RenewRetrying, &e);
                next = (now + backoff.pause(state.engine.clock.jitter())).min(deadline);
            }
        }
    }
}
