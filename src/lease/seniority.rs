//! Who goes first when a release wakes several waiters at once: the one that has lost the
//! most races.
//!
//! On local files (inotify) and between the locks of one process, every waiter wakes at a
//! release and races for the lock; the winner is whoever the scheduler runs first. With 16
//! waiters a waiter loses 15 races in 16, and over a thousand handovers one of them waits
//! a hundred rounds. Here a waiter that has already lost races since it began waiting
//! pauses before its attempt, the less the more it lost; from [`Seniority::ENOUGH`] lost
//! races on, or before its first loss, it tries at once. So a lone waiter's handover is
//! not slowed (it has lost nothing), and among many the oldest try first: the others'
//! attempts then read the new holder instead of racing it. Nothing is written to the store:
//! the order is a courtesy between waiters running this code, not a queue, and changes no
//! step of the protocol.

use crate::lockfile::LockFile;
use std::time::Duration;

/// A waiter's count of races lost since it began waiting.
#[derive(Debug, Default)]
pub(super) struct Seniority {
    lost: u32,
    /// The holder last seen (its token and a digest of its owner id): a different one seen
    /// after a wake-up means another waiter won.
    holder: Option<(u64, u64)>,
}

impl Seniority {
    /// Lost races from which a waiter no longer pauses (waiters that have lost this many
    /// race among themselves, as every waiter did before).
    pub(super) const ENOUGH: u32 = 16;
    /// The pause after one lost race; it shrinks by a sixteenth with each further loss.
    /// Longer than a handover's write on local files, so that a senior waiter's write has
    /// landed when a junior one reads.
    const MOST: Duration = Duration::from_millis(4);

    /// Takes note of the holder an attempt found.
    pub(super) fn saw(&mut self, holder: &LockFile) {
        let seen = (holder.token, digest(&holder.writer_id));
        if self.holder.is_some_and(|before| before != seen) {
            self.lost = self.lost.saturating_add(1);
        }
        self.holder = Some(seen);
    }

    /// How long to pause, after a wake-up, before the next attempt.
    pub(super) fn pause(&self) -> Duration {
        if self.lost == 0 || self.lost >= Self::ENOUGH {
            return Duration::ZERO;
        }
        Self::MOST.mul_f64(1.0 - f64::from(self.lost - 1) / f64::from(Self::ENOUGH))
    }
}

fn digest(owner: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    owner.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(owner: &str, token: u64) -> LockFile {
        LockFile::acquired(
            owner,
            Duration::from_secs(30),
            token,
            "cas",
            chrono::Utc::now(),
        )
    }

    #[test]
    fn a_waiter_that_lost_nothing_tries_at_once() {
        let mut s = Seniority::default();
        assert_eq!(s.pause(), Duration::ZERO);
        s.saw(&held_by("a", 1));
        // A renewal by the same holder is no lost race.
        s.saw(&held_by("a", 1));
        assert_eq!(
            s.pause(),
            Duration::ZERO,
            "a lone waiter's handover is not slowed"
        );
    }

    #[test]
    fn the_more_races_lost_the_shorter_the_pause_until_none() {
        let mut s = Seniority::default();
        s.saw(&held_by("a", 1));
        let mut pauses = Vec::new();
        for i in 0..Seniority::ENOUGH + 2 {
            // Another owner, or the same owner with a new token (it acquired again).
            let owner = if i % 2 == 0 { "b" } else { "a" };
            s.saw(&held_by(owner, u64::from(i) + 2));
            pauses.push(s.pause());
        }
        assert_eq!(pauses[0], Seniority::MOST, "the first loss pauses longest");
        assert!(
            pauses.windows(2).all(|w| w[1] <= w[0]),
            "never longer after more losses: {pauses:?}"
        );
        assert!(pauses[14] > Duration::ZERO);
        assert_eq!(
            pauses[15],
            Duration::ZERO,
            "from ENOUGH lost races on, at once"
        );
        assert_eq!(*pauses.last().unwrap(), Duration::ZERO);
    }

    #[test]
    fn a_foreign_writer_without_tokens_is_told_apart_by_owner() {
        let mut s = Seniority::default();
        s.saw(&held_by("mops-1", 0));
        s.saw(&held_by("mops-2", 0));
        assert_eq!(s.pause(), Seniority::MOST);
    }
}
