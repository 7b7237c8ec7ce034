//! What every wait for a lock shares, a plain lock's (`lock/acquire.rs`) and a semaphore's
//! for one of its slots (`crate::semaphore`): the deadline, and the cutoff one request
//! timeout after it that bounds an attempt still in flight; the polls between attempts;
//! the wakers that end a pause early (a release by a lock of this process, or a write by
//! another process where the store hears of writes); and the seniority of waiters woken
//! together (`seniority.rs`). What is attempted, and what an attempt found, stay with each
//! caller.

use super::seniority::Seniority;
use crate::clock::Clock;
use crate::lockfile::LockFile;
use crate::timing::{Polls, Timing};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use tokio::time::Instant;

/// One acquisition's wait.
pub(crate) struct Wait {
    clock: Arc<dyn Clock>,
    began: Instant,
    deadline: Option<Instant>,
    cutoff: Option<Instant>,
    polls: Polls,
    seniority: Seniority,
}

/// Wakers listened to from before an attempt: a release between the attempt's read and the
/// pause after it is heard.
pub(crate) type Armed<'a> = Vec<Pin<Box<Notified<'a>>>>;

/// Listens on `wakers` from now.
pub(crate) fn arm<'a>(wakers: impl IntoIterator<Item = &'a Arc<Notify>>) -> Armed<'a> {
    let mut armed: Armed<'a> = wakers.into_iter().map(|w| Box::pin(w.notified())).collect();
    for w in &mut armed {
        w.as_mut().enable();
    }
    armed
}

impl Wait {
    /// A wait of at most `timeout` (`None`: for ever) from now.
    pub(crate) fn new(clock: &Arc<dyn Clock>, timing: &Timing, timeout: Option<Duration>) -> Wait {
        let began = clock.now();
        let deadline = timeout.map(|t| began + t);
        Wait {
            clock: clock.clone(),
            began,
            deadline,
            cutoff: deadline.map(|d| d + timing.request_timeout()),
            polls: Polls::new(timing),
            seniority: Seniority::default(),
        }
    }

    /// How long it has waited so far.
    pub(crate) fn waited(&self) -> Duration {
        self.clock.now() - self.began
    }

    /// When it gives up, if ever.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// One request timeout after the deadline: what bounds an attempt still in flight then.
    pub(crate) fn cutoff(&self) -> Option<Instant> {
        self.cutoff
    }

    /// Whether the deadline has passed.
    pub(crate) fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| self.clock.now() >= d)
    }

    /// The time left before the deadline (`None`: no deadline).
    pub(crate) fn left(&self) -> Option<Duration> {
        (self.deadline).map(|d| d.saturating_duration_since(self.clock.now()))
    }

    /// `attempt`, unless the cutoff comes first (`None` then: the caller releases whatever
    /// the attempt may have written, which dropping it abandoned).
    pub(crate) async fn within_cutoff<T>(&self, attempt: impl Future<Output = T>) -> Option<T> {
        match self.cutoff {
            None => Some(attempt.await),
            Some(cutoff) => tokio::select! {
                biased;
                outcome = attempt => Some(outcome),
                _ = self.clock.sleep_until(cutoff) => None,
            },
        }
    }

    /// Notes the holder an attempt found (seniority: a new one after a wake-up means another
    /// waiter won the race).
    pub(crate) fn saw(&mut self, holder: &LockFile) {
        self.seniority.saw(holder);
    }

    /// The next poll's pause, jittered, no later than `expires_in` (when the holder's last
    /// write expires) and the deadline.
    pub(crate) fn next_pause(&mut self, expires_in: Option<Duration>) -> Duration {
        let left = self.left();
        self.polls.pause(self.clock.jitter(), expires_in, left)
    }

    /// Sleeps until `until`, or until one of `armed` wakes it (its index then), and, woken,
    /// for its seniority's pause (the senior waiters try first), within the deadline.
    pub(crate) async fn sleep(&self, until: Instant, armed: Armed<'_>) -> Option<usize> {
        if armed.is_empty() {
            self.clock.sleep_until(until).await;
            return None;
        }
        let woken = tokio::select! {
            _ = self.clock.sleep_until(until) => None,
            (_, i, _) = futures_util::future::select_all(armed) => Some(i),
        };
        if woken.is_some() {
            let pause = self.seniority.pause();
            let pause = self.left().map_or(pause, |left| pause.min(left));
            if !pause.is_zero() {
                self.clock.sleep(pause).await;
            }
        }
        woken
    }
}
