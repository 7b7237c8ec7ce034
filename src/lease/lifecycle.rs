//! The lifecycle of one lock object's hold on a lock, from the first acquisition attempt to
//! its end, as an explicit state machine. Every transition is checked against the table below
//! and logged at debug level (in Python: the `blob_lock.lifecycle` logger), so that a person
//! reading the log of a flaky run sees exactly what the lock did and why. (Not a "claim":
//! that word is `claim_memo`'s.)
//!
//! ```text
//! new ──> acquiring ──> held ──> renewing ──> held ...
//!           │  ▲  │      │  ▲       │
//!           ▼  │  ▼      │  └── renew_retrying (transient error, before the deadline)
//!     waiting  retrying  │
//!           │     │      ├──> releasing ──> released
//!           ▼     ▼      ├──> stopped (a remote's keep-alive ended) ──> lost (ran out)
//!          failed        └──> lost (taken over, or no renewal before the deadline)
//! ```
//!
//! `failed` ends a lifecycle that never held the lock (timeout, permanent error) or whose
//! release failed; `released`, `stopped` and `lost` end one that held it. A lost, stopped or
//! failed lifecycle may still be released (a lease that ran out unrenewed is still ours in the
//! lockfile).

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

/// Where a lifecycle is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Made, no request sent yet.
    New,
    /// An acquisition attempt is in flight.
    Acquiring,
    /// Someone else holds the lock; polling.
    Waiting,
    /// The last attempt failed with a transient store error; trying again.
    Retrying,
    /// Ours, renewed in the background.
    Held,
    /// A renewal is in flight.
    Renewing,
    /// The last renewal failed with a transient store error; trying again before the deadline.
    RenewRetrying,
    /// A release is in flight.
    Releasing,
    /// Released by us.
    Released,
    /// Renewal stopped without release (a remote's keep-alive ended): the lease runs out.
    Stopped,
    /// No longer ours: taken over, released by someone else, or not renewed in time.
    Lost,
    /// Ended without holding the lock, or the release failed.
    Failed,
}

impl State {
    /// The state's name, as the logs show it.
    pub fn as_str(self) -> &'static str {
        match self {
            State::New => "new",
            State::Acquiring => "acquiring",
            State::Waiting => "waiting",
            State::Retrying => "retrying",
            State::Held => "held",
            State::Renewing => "renewing",
            State::RenewRetrying => "renew_retrying",
            State::Releasing => "releasing",
            State::Released => "released",
            State::Stopped => "stopped",
            State::Lost => "lost",
            State::Failed => "failed",
        }
    }

    /// Whether a lifecycle in this state holds the lock (as far as it knows).
    pub fn is_holding(self) -> bool {
        matches!(
            self,
            State::Held | State::Renewing | State::RenewRetrying | State::Releasing
        )
    }

    /// Whether a semaphore's slot whose lifecycle is in this state counts as held by this
    /// process (`stats()["slots_held"]`): renewed by it, not yet being released.
    fn counts_as_held_slot(self) -> bool {
        matches!(self, State::Held | State::Renewing | State::RenewRetrying)
    }

    /// The transition table.
    pub fn may_become(self, next: State) -> bool {
        use State::*;
        match (self, next) {
            (New | Waiting | Retrying, Acquiring) => true,
            (Acquiring, Held | Waiting | Retrying | Failed) => true,
            (Waiting | Retrying, Failed) => true,
            (Held, Renewing | Releasing | Stopped | Lost) => true,
            // Releasing from renewing: a renewal that saw the loss coming returned before
            // the loss was recorded. Stopped from renewing or releasing: a lease dropped
            // with its request abandoned.
            (Renewing, Held | RenewRetrying | Releasing | Stopped | Lost) => true,
            (RenewRetrying, Renewing | Releasing | Stopped | Lost) => true,
            (Releasing, Released | Stopped | Lost | Failed) => true,
            // A lost, stopped or failed lifecycle may still be released (a lease that ran out
            // unrenewed is still ours in the lockfile; a failed release may be retried).
            (Lost | Stopped | Failed, Releasing) => true,
            (Stopped, Lost) => true, // a stopped lease runs out at its deadline
            _ => false,
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a semaphore's slot calls when its lifecycle vacates it (stops holding it, however).
pub type OnVacate = Box<dyn Fn() + Send + Sync>;

/// One lifecycle: its state, and the names its log lines carry.
pub struct Lifecycle {
    /// Shared with the lock (thousands of held locks: no copies).
    uri: Arc<str>,
    owner: Arc<str>,
    state: Mutex<State>,
    /// A semaphore's slot: counted in the process's held slots while held, and what to call
    /// when it is vacated (released, stopped or lost).
    slot: OnceLock<OnVacate>,
}

impl fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lifecycle")
            .field("uri", &self.uri)
            .field("owner", &self.owner)
            .field("state", &self.state())
            .field("slot", &self.slot.get().is_some())
            .finish()
    }
}

impl Lifecycle {
    /// A new lifecycle of `owner` on the lock at `uri`.
    pub fn new(uri: impl Into<Arc<str>>, owner: impl Into<Arc<str>>) -> Lifecycle {
        Lifecycle::starting_in(uri, owner, State::New)
    }

    /// A lifecycle that starts in `state` (a remote's keep-alive starts as `acquiring`).
    pub fn starting_in(
        uri: impl Into<Arc<str>>,
        owner: impl Into<Arc<str>>,
        state: State,
    ) -> Lifecycle {
        let (uri, owner) = (uri.into(), owner.into());
        log::debug!(target: "blob_lock::lifecycle", "{uri}: owner {owner}: {state}");
        Lifecycle {
            uri,
            owner,
            state: Mutex::new(state),
            slot: OnceLock::new(),
        }
    }

    /// Counts this lifecycle, a semaphore's slot's, in the process's held slots while it holds,
    /// and calls `on_vacate` when it stops holding it.
    pub fn count_as_slot(&self, on_vacate: OnVacate) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if self.slot.set(on_vacate).is_ok() && state.counts_as_held_slot() {
            crate::metrics::slots_held(1);
        }
    }

    /// The owner id whose lifecycle this is.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The current state.
    pub fn state(&self) -> State {
        *self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves to `next`, saying why. Returns false, and changes nothing, when the table does
    /// not allow it: a transition that loses a race (a release after the lifecycle was lost,
    /// a second loss) is refused rather than rewriting what happened. Staying in the same
    /// state is allowed and not logged.
    pub fn enter(&self, next: State, why: impl fmt::Display) -> bool {
        let mut vacated = None;
        let prev = {
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            let prev = *state;
            if prev == next {
                return true;
            }
            if !prev.may_become(next) {
                drop(state);
                log::debug!(
                    target: "blob_lock::lifecycle",
                    "{}: owner {}: stays {prev}, not {next} ({why})",
                    self.uri,
                    self.owner
                );
                return false;
            }
            *state = next;
            if let Some(hook) = self.slot.get() {
                match (prev.counts_as_held_slot(), next.counts_as_held_slot()) {
                    (true, false) => {
                        crate::metrics::slots_held(-1);
                        vacated = Some(hook);
                    }
                    (false, true) => crate::metrics::slots_held(1),
                    _ => {}
                }
            }
            prev
        };
        if let Some(hook) = vacated {
            hook();
        }
        // Logged after the mutex is released: in Python, logging takes the GIL.
        log::debug!(
            target: "blob_lock::lifecycle",
            "{}: owner {}: {prev} -> {next} ({why})",
            self.uri,
            self.owner
        );
        true
    }
}

impl Drop for Lifecycle {
    fn drop(&mut self) {
        let state = *self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(hook) = self.slot.get().filter(|_| state.counts_as_held_slot()) {
            crate::metrics::slots_held(-1);
            hook();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lifecycle_follows_the_table() {
        let c = Lifecycle::new("memory://t/x", "o");
        assert!(!c.enter(State::Held, "no request yet"));
        assert_eq!(c.state(), State::New);
        for s in [
            State::Acquiring,
            State::Waiting,
            State::Acquiring,
            State::Held,
            State::Renewing,
            State::RenewRetrying,
            State::Renewing,
            State::Held,
            State::Releasing,
            State::Released,
        ] {
            assert!(c.enter(s, "test"), "to {s}");
        }
        // Final: nothing follows a release.
        for s in [State::Held, State::Lost, State::Acquiring] {
            assert!(!c.enter(s, "late"));
        }
        assert_eq!(c.state(), State::Released);
    }

    #[test]
    fn a_lost_lifecycle_may_still_be_released_but_never_held_again() {
        let c = Lifecycle::starting_in("memory://t/x", "o", State::Held);
        assert!(c.enter(State::Lost, "deadline"));
        assert!(!c.enter(State::Held, "a late renewal"));
        assert!(!c.enter(State::Renewing, "a late renewal"));
        assert!(c.enter(State::Releasing, "cleanup"));
        assert!(c.enter(State::Released, "it was still ours"));
        assert!(!State::Lost.is_holding() && State::Renewing.is_holding());
    }
}
