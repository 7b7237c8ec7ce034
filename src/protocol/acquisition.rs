//! What an acquisition carries from attempt to attempt ([`Acquisition`]), what one attempt
//! ends in ([`Attempt`]), and what a holder knows of the lock it holds ([`OurWrite`]).

use crate::lockfile::LockFile;
use crate::store::Version;
use std::time::Duration;
use tokio::time::Instant;

/// What a holder knows about the lock it holds.
#[derive(Debug, Clone)]
pub struct OurWrite {
    /// The owner id.
    pub owner: std::sync::Arc<str>,
    /// The version of our last write.
    pub version: Version,
    /// The body of our last write.
    pub body: LockFile,
    /// When our last successful write started: the lease runs from here.
    pub lease_start: Instant,
    /// Until when our writes grant a launch grace ([`crate::protocol::Engine::hand_off`]); `None` when they
    /// grant none, and from the first write of the remote on.
    pub grace_until: Option<Instant>,
}

impl OurWrite {
    /// The fencing token of this acquisition: our body's, which every write of ours and
    /// every co-owner's body we adopt carries (a held lock keeps no second copy).
    pub fn token(&self) -> u64 {
        self.body.token
    }

    /// The body of our next write, started at `start` by `wall`: a renewal of our last one,
    /// with the launch grace still left, if any.
    pub(super) fn next_body(
        &self,
        writer_name: Option<&str>,
        start: Instant,
        wall: chrono::DateTime<chrono::Utc>,
    ) -> LockFile {
        let mut body = self.body.renewed(writer_name, wall);
        // Up to the millisecond: a longer wait is the safe side, and people read the number.
        body.grace_s = self
            .grace_until
            .map(|until| until.saturating_duration_since(start).as_secs_f64())
            .filter(|left| *left > 0.0)
            .map(|left| (left * 1000.0).ceil() / 1000.0);
        body
    }
}

/// One acquisition, as it goes from attempt to attempt: what it has seen and written.
#[derive(Debug, Clone, Default)]
pub struct Acquisition {
    /// The lockfile version this waiter is watching, and since when by its clock.
    pub(super) watch: Option<(Version, Instant)>,
    /// Our writes whose outcome we do not know (an error, or a conflict that may be our own
    /// retried request): the token each wrote and the earliest start of a write with it.
    /// A later read that shows our owner id with one of these tokens resolves it: ours, with
    /// the lease counted from that start.
    unresolved: Vec<(u64, Instant)>,
    /// Set by the first attempt: only it may create first ([`crate::protocol::released`]'s guess).
    begun: bool,
    /// The holder (its lockfile described) whose expired lease the last attempt found and
    /// wrote over: a takeover, when that attempt acquired. Set by `Engine::judge`.
    pub(crate) took_over: Option<String>,
}

impl Acquisition {
    /// An acquisition that starts from what an earlier one by the same owner id `left`
    /// when it ended without the lock ([`Acquisition::left`]): its writes of unknown outcome
    /// (a read that shows one of them is then ours to confirm, not another holder's to wait
    /// out), and, if that one ended no more than `within` before `now`, the version it
    /// watched and since when (a wait in slices, a semaphore's polls of its slots, each an
    /// acquisition, watch as one acquisition's attempts do).
    pub fn carrying(left: Left, now: Instant, within: std::time::Duration) -> Acquisition {
        let watch = (left.watch)
            .filter(|(_, ended)| now.saturating_duration_since(*ended) <= within)
            .map(|(watch, _)| watch);
        Acquisition {
            unresolved: left.writes,
            watch,
            ..Acquisition::default()
        }
    }

    /// What this acquisition, ending without the lock at `ended`, leaves to the next one by
    /// the same owner id ([`Acquisition::carrying`]).
    pub fn left(self, ended: Instant) -> Left {
        Left {
            writes: self.unresolved,
            watch: self.watch.map(|watch| (watch, ended)),
        }
    }

    /// True at the first attempt of this acquisition only.
    pub(super) fn begin(&mut self) -> bool {
        !std::mem::replace(&mut self.begun, true)
    }

    pub(super) fn note(&mut self, token: u64, start: Instant) {
        if !self.unresolved.iter().any(|(t, _)| *t == token) {
            self.unresolved.push((token, start));
        }
    }

    /// True if a write of ours may have landed without our knowing.
    pub fn wrote(&self) -> bool {
        !self.unresolved.is_empty()
    }

    pub(super) fn resolves(&self, owner: &str, lf: &LockFile) -> Option<Instant> {
        if *lf.writer_id != *owner || lf.is_released() {
            return None;
        }
        self.unresolved
            .iter()
            .find(|(t, _)| *t == lf.token)
            .map(|(_, start)| *start)
    }
}

/// What an acquisition that ended without the lock leaves to the next by the same owner id
/// ([`Acquisition::left`], [`Acquisition::carrying`]).
#[derive(Debug, Clone, Default)]
pub struct Left {
    /// Its writes of unknown outcome: each token, and the earliest start of a write with it.
    writes: Vec<(u64, Instant)>,
    /// The version it watched and since when, and when it ended.
    watch: Option<((Version, Instant), Instant)>,
}

impl Left {
    /// A write of ours that may still be the lockfile (a lease whose release failed): its
    /// token and the start of its last write known to have landed.
    pub fn add_write(&mut self, written: (u64, Instant)) {
        if !self.writes.contains(&written) {
            self.writes.push(written);
        }
    }
}

/// The outcome of one acquisition attempt.
#[derive(Debug)]
pub enum Attempt {
    /// We hold it.
    Acquired(OurWrite),
    /// Someone else does. `expires_in` is how long until we may take it over if nothing
    /// changes; `None` when the lockfile vanished or changed under us (poll again soon).
    Busy {
        /// The holder, as the lockfile says.
        holder: Option<LockFile>,
        /// Time left until expiry by our clock.
        expires_in: Option<Duration>,
    },
}
