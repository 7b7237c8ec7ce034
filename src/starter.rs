//! Tasks of the shared runtime started only when first needed, by one task that keeps
//! their start times.
//!
//! A held lock's heartbeat has nothing to do until its first renewal, a third of the
//! lease away, and most locks taken by a blocking caller are released long before that.
//! Spawning the heartbeat task from the caller's thread wakes a runtime thread, and the
//! release wakes it again to stop the task: about 18 µs of an acquire+release on local
//! files (Python loops of 3,000, interleaved with and without the spawn). Here the caller
//! only files the start under its instant; a release before then takes it back, and no
//! runtime thread hears of either. The starter task wakes when the earliest start is due
//! (or when an earlier one is filed), so filing a start later than all others wakes nobody.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;

/// What starts a task (it spawns it).
pub(crate) type Start = Box<dyn FnOnce() + Send>;

/// A filed start, to take it back with [`cancel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ticket(Instant, u64);

#[derive(Default)]
struct Filed {
    starts: BTreeMap<Ticket, Start>,
    /// When the starter task will look next (`None`: only when woken).
    armed: Option<Instant>,
    issued: u64,
}

#[derive(Default)]
struct Starter {
    filed: Mutex<Filed>,
    wake: Notify,
}

impl Starter {
    fn filed(&self) -> MutexGuard<'_, Filed> {
        self.filed.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn run(self: Arc<Self>) {
        loop {
            let (due, armed) = {
                let mut filed = self.filed();
                let later = filed.starts.split_off(&Ticket(Instant::now(), u64::MAX));
                let due = std::mem::replace(&mut filed.starts, later);
                filed.armed = filed.starts.keys().next().map(|t| t.0);
                (due, filed.armed)
            };
            // Outside the mutex: a start spawns, and dropping what it holds may do anything.
            for start in due.into_values() {
                start();
            }
            match armed {
                Some(at) => {
                    tokio::select! {
                        _ = tokio::time::sleep_until(at) => {}
                        _ = self.wake.notified() => {}
                    }
                }
                None => self.wake.notified().await,
            }
        }
    }
}

/// This process's starter, its task spawned on the shared runtime on first use. A child
/// made by fork starts its own (the parent's task does not run there).
fn starter() -> Arc<Starter> {
    static STARTER: Mutex<Option<(u32, Arc<Starter>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = STARTER.lock().unwrap_or_else(|e| e.into_inner());
    match &*slot {
        Some((owner, starter)) if *owner == pid => starter.clone(),
        _ => {
            let starter = Arc::<Starter>::default();
            crate::runtime::runtime().spawn(starter.clone().run());
            *slot = Some((pid, starter.clone()));
            starter
        }
    }
}

/// Files `start` to run at `at` (on tokio's clock) on the shared runtime.
pub(crate) fn start_at(at: Instant, start: Start) -> Ticket {
    let starter = starter();
    let mut filed = starter.filed();
    filed.issued += 1;
    let ticket = Ticket(at, filed.issued);
    filed.starts.insert(ticket, start);
    if filed.armed.is_none_or(|armed| at < armed) {
        filed.armed = Some(at);
        // A permit if the task is not waiting yet: it then looks again at once.
        starter.wake.notify_one();
    }
    ticket
}

/// Takes back a filed start: true if it had not run (it never will), false if it ran.
pub(crate) fn cancel(ticket: Ticket) -> bool {
    let start = starter().filed().starts.remove(&ticket);
    // Dropped outside the mutex, for the same reason as in `run`.
    start.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::drive;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    fn counting(n: &Arc<AtomicUsize>) -> Start {
        let n = n.clone();
        Box::new(move || {
            n.fetch_add(1, Ordering::SeqCst);
        })
    }

    /// Waits (a generous liveness bound) until `n` reaches `want`.
    fn reaches(n: &AtomicUsize, want: usize) -> bool {
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while n.load(Ordering::SeqCst) < want && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        n.load(Ordering::SeqCst) == want
    }

    #[test]
    fn a_start_runs_once_at_its_instant_unless_taken_back() {
        let ran = Arc::new(AtomicUsize::new(0));
        let now = drive(async { Instant::now() });
        let kept = start_at(now + Duration::from_millis(50), counting(&ran));
        let taken = start_at(now + Duration::from_millis(50), counting(&ran));
        assert!(cancel(taken), "not run yet, so taken back");
        assert!(reaches(&ran, 1));
        assert!(!cancel(kept), "it ran");
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            1,
            "the taken-back start never ran"
        );
    }

    #[test]
    fn an_earlier_start_filed_after_a_later_one_wakes_the_starter() {
        let ran = Arc::new(AtomicUsize::new(0));
        let now = drive(async { Instant::now() });
        let late = start_at(now + Duration::from_secs(3600), counting(&ran));
        start_at(now + Duration::from_millis(20), counting(&ran));
        assert!(
            reaches(&ran, 1),
            "the starter, asleep until an hour from now, was woken"
        );
        assert!(cancel(late));
    }
}
