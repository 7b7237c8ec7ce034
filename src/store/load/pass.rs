//! A request's way through the load: waiting to be called (`Waiting`), then let through
//! with a timeout (`Pass`), giving its pass back however it ends.

use super::kind::{rank_of, Kind};
use super::queue::{Call, Rank};
use super::Load;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Why a request was not let through: a renewal that could not land before its lease
/// deadline (why, in words).
#[derive(Debug)]
pub struct TooLate(pub String);

/// How a request that was let through ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The store answered (a success, a conflict, a missing object, a refusal).
    Answered,
    /// The store answered that it is overloaded (S3 503 SlowDown, Azure 503 ServerBusy and
    /// 500 OperationTimedOut, GCS 429 and 503).
    Throttled,
    /// No answer within the request's timeout.
    TimedOut,
    /// No answer for another reason (a connection refused or reset).
    Unanswered,
}

/// A request waiting in the queue. Dropped before it is called (its caller stopped waiting), it
/// leaves the queue; dropped after being told to go, it gives the pass back.
pub(super) struct Waiting<'a> {
    pub(super) load: &'a Arc<Load>,
    pub(super) heard: tokio::sync::oneshot::Receiver<Call>,
    pub(super) rank: Rank,
    pub(super) told: bool,
}

impl Waiting<'_> {
    pub(super) async fn called(mut self) -> Call {
        // The queue keeps the sender until it tells: no error while the load exists.
        let call = (&mut self.heard).await.unwrap_or(Call::TooLate);
        self.told = true;
        call
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.told {
            return;
        }
        self.heard.close();
        match self.heard.try_recv() {
            Ok(Call::Go) => self.load.give_back(self.rank),
            Ok(Call::TooLate) => {}
            Err(_) => {
                let mut s = self.load.state();
                s.unqueue(Instant::now());
                s.hand_on(Instant::now());
            }
        }
    }
}

/// A request let through: gives its pass back when dropped, after [`Pass::end`] says how
/// it ended.
#[derive(Debug)]
pub struct Pass {
    pub(super) load: Arc<Load>,
    pub(super) kind: Kind,
    pub(super) asked: Instant,
    pub(super) sent: Instant,
    /// Requests in flight when this one was sent, itself included.
    pub(super) in_flight: usize,
    pub(super) timeout: Duration,
}

impl Pass {
    /// How long the request may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Notes how the request ended and gives its pass back.
    pub fn end(self, ending: Ending) {
        self.load.ended(&self, ending);
    }

    /// Notes how one try of the request ended, keeping its pass for another.
    pub fn note(&self, ending: Ending) {
        self.load.ended(self, ending);
    }

    /// The request is sent again: its latency counts from now.
    pub fn resend(&mut self) {
        self.sent = Instant::now();
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.load.give_back(rank_of(self.kind));
    }
}
