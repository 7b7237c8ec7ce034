//! The requests waiting for a pass, in the order they get one: renewals first (and releases
//! of held leases, which end renewals), earliest lease deadline first (a renewal that can
//! wait does); then other releases; then everything else (acquisitions, reads, listings)
//! in the order they came.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Where a request stands in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rank {
    /// A renewal, by its lease's deadline.
    Renewal(Instant),
    /// The release of a held lease, among the renewals by the earlier of that lease's
    /// deadline and a request timeout after it was asked (`Load::enter`): it ends the
    /// lease's renewals. (Sent even after the deadline: it saves the next owner a wait.)
    LeaseRelease(Instant),
    /// Another release: it frees a lock for others, but a late one costs only a wait.
    Release,
    /// The rest.
    Other,
}

impl Rank {
    /// True for requests that keep a held lease (renewals and its release): they may use
    /// every pass.
    pub(super) fn keeps_a_lease(self) -> bool {
        self.class() == 0
    }

    fn class(self) -> u8 {
        match self {
            Rank::Renewal(_) | Rank::LeaseRelease(_) => 0,
            Rank::Release => 1,
            Rank::Other => 2,
        }
    }
}

/// What a waiter is told when it is called.
pub(super) enum Call {
    /// Go: the pass is taken for it.
    Go,
    /// A renewal that could not land before its deadline: not sent.
    TooLate,
}

struct Waiter {
    rank: Rank,
    seq: u64,
    call: oneshot::Sender<Call>,
}

impl Waiter {
    /// Smaller goes first.
    fn key(&self) -> (u8, Option<Instant>, u64) {
        let deadline = match self.rank {
            Rank::Renewal(d) | Rank::LeaseRelease(d) => Some(d),
            _ => None,
        };
        (self.rank.class(), deadline, self.seq)
    }
}

impl PartialEq for Waiter {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for Waiter {}
impl PartialOrd for Waiter {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Waiter {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

#[derive(Default)]
pub(super) struct Queue {
    heap: BinaryHeap<Reverse<Waiter>>,
    seq: u64,
}

impl Queue {
    /// Queues a request of `rank`; the receiver hears when it is called.
    pub(super) fn push(&mut self, rank: Rank) -> oneshot::Receiver<Call> {
        let (call, heard) = oneshot::channel();
        self.seq += 1;
        self.heap.push(Reverse(Waiter {
            rank,
            seq: self.seq,
            call,
        }));
        heard
    }

    /// The rank of the first waiter still waiting (those whose caller left are dropped).
    pub(super) fn first(&mut self) -> Option<Rank> {
        while let Some(Reverse(w)) = self.heap.peek() {
            if !w.call.is_closed() {
                return Some(w.rank);
            }
            self.heap.pop();
        }
        None
    }

    /// Tells the first waiter `call`; false if it had left meanwhile (nothing was taken).
    pub(super) fn tell_first(&mut self, call: Call) -> bool {
        match self.heap.pop() {
            Some(Reverse(w)) => w.call.send(call).is_ok(),
            None => false,
        }
    }

    /// Waiters, those who left included until they reach the front.
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn renewals_go_first_by_deadline_then_releases_then_the_rest_in_order() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut q = Queue::default();
        let mut heard = [
            ("read", q.push(Rank::Other)),
            ("late renewal", q.push(Rank::Renewal(t0 + s * 9))),
            ("release", q.push(Rank::Release)),
            ("acquisition", q.push(Rank::Other)),
            ("urgent renewal", q.push(Rank::Renewal(t0 + s))),
        ];
        let mut order = Vec::new();
        while q.first().is_some() {
            assert!(q.tell_first(Call::Go));
            for (name, rx) in heard.iter_mut() {
                if rx.try_recv().is_ok() {
                    order.push(*name);
                }
            }
        }
        assert_eq!(
            order,
            [
                "urgent renewal",
                "late renewal",
                "release",
                "read",
                "acquisition"
            ]
        );
    }

    #[test]
    fn a_waiter_that_left_is_skipped() {
        let mut q = Queue::default();
        let gone = q.push(Rank::Release);
        let mut stays = q.push(Rank::Other);
        drop(gone);
        assert_eq!(q.first(), Some(Rank::Other));
        assert!(q.tell_first(Call::Go));
        assert!(matches!(stays.try_recv(), Ok(Call::Go)));
        assert_eq!(q.first(), None);
    }
}
