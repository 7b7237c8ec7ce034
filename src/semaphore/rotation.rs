//! Which slot a waiter reads next. A waiter reads one slot per poll, not all of them: with
//! W waiters on N held slots that is W reads a poll, not W × N. It keeps, for each slot,
//! when the holder's last write it read expires, and reads the slot due soonest at that
//! moment (a crashed holder's slot is taken as soon as it may be); meanwhile it reads the
//! slots in order, which finds a slot released before its expiry within N polls.

use std::time::Duration;
use tokio::time::Instant;

/// One waiter's view of the slots.
#[derive(Debug)]
pub(super) struct Rotation {
    /// When each slot's last write read expires; `None` where that is unknown.
    expires: Vec<Option<Instant>>,
    /// The slot read next in order.
    cursor: usize,
}

impl Rotation {
    /// `slots` slots, the first read at `start` (spread by the caller: waiters that all began
    /// at slot 0 would read the same slot at the same time).
    pub(super) fn new(slots: usize, start: usize) -> Rotation {
        Rotation {
            expires: vec![None; slots],
            cursor: start % slots.max(1),
        }
    }

    /// How many slots it reads.
    pub(super) fn slots(&self) -> usize {
        self.expires.len()
    }

    /// Every slot once, from the next in order.
    pub(super) fn round(&self) -> impl Iterator<Item = usize> {
        let (n, start) = (self.slots(), self.cursor);
        (0..n).map(move |i| (start + i) % n)
    }

    /// The number of slots changed (the stored configuration did): slots gone are no longer
    /// read, new ones are read in order.
    pub(super) fn resize(&mut self, slots: usize) {
        self.expires.resize(slots, None);
        if self.cursor >= slots {
            self.cursor = 0;
        }
    }

    /// A read of `slot` at `now` found it held, its last write expiring in `expires_in`.
    pub(super) fn saw(&mut self, slot: usize, now: Instant, expires_in: Option<Duration>) {
        if let Some(e) = self.expires.get_mut(slot) {
            *e = expires_in.map(|d| now + d);
        }
    }

    /// The slot to read next and when, waiting at most `pause` from `now`: the slot due
    /// soonest, at its expiry, if that comes within the pause; else the next in order, after
    /// the pause.
    pub(super) fn next(&mut self, now: Instant, pause: Duration) -> (usize, Instant) {
        let soonest = (0..self.slots())
            .filter_map(|i| self.expires[i].map(|at| (at, i)))
            .min();
        if let Some((at, slot)) = soonest.filter(|(at, _)| *at <= now + pause) {
            // Read once at its expiry; what that read finds is noted again.
            self.expires[slot] = None;
            return (slot, at.max(now));
        }
        let slot = self.cursor;
        self.cursor = (self.cursor + 1) % self.slots().max(1);
        (slot, now + pause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

    #[test]
    fn a_round_starts_where_the_waiter_was_spread_to() {
        let r = Rotation::new(4, 6);
        assert_eq!(r.round().collect::<Vec<_>>(), vec![2, 3, 0, 1]);
    }

    #[test]
    fn reads_in_order_while_nothing_expires_within_the_pause() {
        let now = Instant::now();
        let mut r = Rotation::new(3, 1);
        for slot in 0..3 {
            r.saw(slot, now, Some(60 * SECOND));
        }
        let order: Vec<usize> = (0..4).map(|_| r.next(now, SECOND).0).collect();
        assert_eq!(order, vec![1, 2, 0, 1]);
    }

    #[test]
    fn reads_the_slot_due_soonest_at_its_expiry() {
        let now = Instant::now();
        let mut r = Rotation::new(3, 0);
        r.saw(0, now, Some(60 * SECOND));
        r.saw(1, now, Some(SECOND / 2));
        r.saw(2, now, Some(SECOND / 4));
        assert_eq!(r.next(now, SECOND), (2, now + SECOND / 4));
        assert_eq!(r.next(now, SECOND), (1, now + SECOND / 2));
        // Then in order again: slot 0 expires after the pause.
        assert_eq!(r.next(now, SECOND), (0, now + SECOND));
    }

    #[test]
    fn fewer_slots_are_no_longer_read() {
        let now = Instant::now();
        let mut r = Rotation::new(4, 3);
        r.saw(3, now, Some(SECOND / 2));
        r.resize(2);
        let order: Vec<usize> = (0..3).map(|_| r.next(now, SECOND).0).collect();
        assert_eq!(order, vec![0, 1, 0]);
    }
}
