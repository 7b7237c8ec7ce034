//! A held lease's heartbeat: one beat at a time, each filing the next (`file_beat`), and a
//! beat's renewal or retry (`beat`).

use super::state::{Kept, LeaseState, NextBeat};
use crate::errors::{Error, LossCause};
use crate::lease::lifecycle::State;
use crate::metrics;
use crate::store::load::{self, Kind};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::time::Instant;

/// Renewals failing together (an outage) warn once in a while, not once each.
static RENEWAL_FAILED: crate::lease::warnings::Warning = crate::lease::warnings::Warning::new();

/// Files the next beat of the heartbeat, due at `at`: a task of its own runs the beat when
/// it is due, files the one after, and ends, so that between beats a held lock keeps no
/// task (thousands of held locks in one process). On the shared runtime the beat waits as
/// a start filed with its starter (`crate::lease::starter`), a few dozen bytes; on a simulated
/// clock or a runtime of the caller's own (where the starter keeps another time), as a
/// task that sleeps on the lease's clock.
pub(super) fn file_beat(state: Arc<LeaseState>, at: Instant) {
    let mut next = state.next_beat();
    if let NextBeat::Sleeping(stop) = &*next {
        let stop = stop.clone();
        drop(next);
        tokio::spawn(async move {
            tokio::select! {
                biased; // deterministic under simulation
                _ = state.engine.clock.sleep_until(at) => {}
                _ = stop.notified() => {}
            }
            beat_then_file(state).await;
        });
        return;
    }
    // Under the mutex that `halt` takes after setting `stopped`: either this sees it set, or
    // `halt` finds this start and takes it back.
    if state.stopped.load(Ordering::SeqCst) {
        return;
    }
    // The start holds only the state: the beat's future is made when it is due.
    let task = state.clone();
    let start = Box::new(move || drop(tokio::spawn(beat_then_file(task))));
    *next = NextBeat::Filed(crate::lease::starter::start_at(at, start));
}

/// Runs a beat that is due, then files the next one, if any.
async fn beat_then_file(state: Arc<LeaseState>) {
    if let Some(next) = beat(&state).await {
        file_beat(state, next);
    }
}

/// One beat of the heartbeat: a renewal, or a retry of one that failed. Returns when the
/// next beat is due, or `None` when the lease has ended (stopped, released or lost).
async fn beat(state: &LeaseState) -> Option<Instant> {
    if state.stopped.load(Ordering::SeqCst) || state.lost_reason().is_some() {
        return None;
    }
    let mut kept = state.kept.lock().await;
    let Kept { ours, backoff } = &mut *kept;
    if state.stopped.load(Ordering::SeqCst) || !state.lifecycle.enter(State::Renewing, "heartbeat")
    {
        return None; // stopped, or lost meanwhile
    }
    let deadline = state.deadline();
    let began = state.engine.clock.now();
    let renewal = {
        // Boxed: inline, the renewal's state would be most of a beat's memory while it
        // waits on the store (in the load's queue, then for the answer).
        let writer_name = state.remote.then_some(crate::protocol::REMOTE);
        let renewal = state.engine.renew(ours, writer_name);
        // Its requests go ahead of the store's others, by this deadline.
        let mut renewal = Box::pin(load::as_kind(Kind::Renewal { deadline }, renewal));
        tokio::select! {
            biased;
            r = &mut renewal => r,
            _ = state.engine.clock.sleep_until(deadline) => {
                // From the deadline on a waiter may take over, so a renewal still in flight
                // cannot save the lease: declare the loss now, not when the request ends.
                state.mark_lost(LossCause::Deadline, "the renewal in flight did not finish before the lease deadline".into());
                // Not cancelled: a request on the wire may land anyway, and its outcome is
                // resolved like any other (a release waits for it).
                let _ = renewal.await;
                return None;
            }
        }
    };
    match renewal {
        Ok(()) => {
            let now = state.engine.clock.now();
            if !state.renewed(ours) {
                return None;
            }
            metrics::renewed(now - began, deadline.saturating_duration_since(now));
            backoff.reset();
            Some(ours.lease_start + state.engine.timing.heartbeat)
        }
        Err(Error::Lost { cause, reason, .. }) => {
            state.mark_lost(cause, reason);
            None
        }
        Err(Error::Saturated { message, .. }) => {
            // Not sent: it could not have landed before the deadline.
            state.mark_lost(LossCause::Deadline, message);
            None
        }
        Err(e) if !e.is_transient() && !matches!(e, Error::InvalidLockFile { .. }) => {
            // Bad credentials, a deleted bucket: no retry can renew the lease. (An
            // unreadable lockfile may be a foreign writer's torn write: retried.)
            state.mark_lost(
                LossCause::RenewalFailed,
                format!("renewal failed and cannot succeed: {e}"),
            );
            None
        }
        Err(e) => {
            let now = state.engine.clock.now();
            if now >= deadline {
                state.mark_lost(
                    LossCause::Deadline,
                    format!("renewal failed until the lease deadline: {e}"),
                );
                return None;
            }
            RENEWAL_FAILED
                .warn(|| format!("{}: renewal failed, retrying: {e}", state.engine.uri()));
            metrics::renewal_retried();
            state.lifecycle.enter(State::RenewRetrying, &e);
            // Closer to the deadline, tried more often: a third of what is left at most.
            let left = deadline.saturating_duration_since(now);
            let pause = backoff.pause(state.engine.clock.jitter()).min(left / 3);
            Some((now + pause).min(deadline))
        }
    }
}
