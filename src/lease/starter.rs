//! Tasks of the shared runtime started only when first needed, by one task that keeps
//! their start times.
//!
//! A held lock's heartbeat has nothing to do until its first renewal, a third of the
//! lease away, and most locks taken by a blocking caller are released long before that.
//! Spawning the heartbeat task from the caller's thread wakes a runtime thread, and the
//! release wakes it again to stop the task, a measurable part of an acquire+release on
//! local files. Here the caller only files the start under its instant; a release before
//! then takes it back, and no runtime thread hears of either. Every later beat is filed the
//! same way by the beat before it, so a held lock between renewals is a filed start of a
//! few dozen bytes, not a sleeping task of several hundred (thousands of held locks). The
//! starter task wakes when the earliest start is due (or when an earlier one is filed), so
//! filing a start later than all others wakes nobody.

use crate::per_process::PerProcess;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;
use tokio::time::Instant;

/// What starts a task (it spawns it).
pub(crate) type Start = Box<dyn FnOnce() + Send>;

/// A filed start, to take it back with [`cancel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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

    fn file(&self, at: Instant, start: Start) -> Ticket {
        let mut filed = self.filed();
        filed.issued += 1;
        let ticket = Ticket(at, filed.issued);
        filed.starts.insert(ticket, start);
        if filed.armed.is_none_or(|armed| at < armed) {
            filed.armed = Some(at);
            // A permit if the task is not waiting yet: it then looks again at once.
            self.wake.notify_one();
        }
        ticket
    }

    fn cancel(&self, ticket: Ticket) -> bool {
        let start = self.filed().starts.remove(&ticket);
        // Dropped outside the mutex, for the same reason as in `run`.
        start.is_some()
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
                // One start that panics must not end this task: every later heartbeat
                // would then never start, and held locks would expire unnoticed.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(start));
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

/// This process's starter, made on first use. A child made by fork makes its own (the
/// parent's task does not run there).
static STARTER: PerProcess<Arc<Starter>> = PerProcess::new(start_starter);

/// A starter with its task spawned on the shared runtime.
fn start_starter() -> Arc<Starter> {
    let starter = Arc::<Starter>::default();
    crate::runtime::runtime().spawn(starter.clone().run());
    starter
}

/// Files `start` to run at `at` (on tokio's clock) on the shared runtime.
pub(crate) fn start_at(at: Instant, start: Start) -> Ticket {
    STARTER.get().file(at, start)
}

/// Takes back a filed start: true if it had not run (it never will), false if it ran (or
/// was filed in another process: a child made by fork has none of its parent's tasks).
pub(crate) fn cancel(ticket: Ticket) -> bool {
    STARTER.made().is_some_and(|s| s.cancel(ticket))
}

/// True while `ticket`'s start is filed and has not run (for tests).
#[cfg(test)]
pub(crate) fn is_filed(ticket: Ticket) -> bool {
    STARTER
        .made()
        .is_some_and(|s| s.filed().starts.contains_key(&ticket))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::drive;
    use std::time::Duration;

    /// A starter of the test's own, so that other tests' starts do not wake it.
    fn own_starter() -> Arc<Starter> {
        start_starter()
    }

    /// A start that sends the instant it ran.
    fn noting(tx: &std::sync::mpsc::Sender<Instant>) -> Start {
        let tx = tx.clone();
        Box::new(move || {
            let _ = tx.send(Instant::now());
        })
    }

    const LIVENESS: Duration = Duration::from_secs(10);

    #[test]
    fn a_start_runs_once_at_its_instant_unless_taken_back() {
        let starter = own_starter();
        let (tx, rx) = std::sync::mpsc::channel();
        let now = drive(async { Instant::now() });
        let at = now + Duration::from_millis(50);
        let kept = starter.file(at, noting(&tx));
        let taken = starter.file(at, noting(&tx));
        let later = starter.file(now + Duration::from_secs(3600), noting(&tx));
        assert!(starter.cancel(taken), "not run yet, so taken back");
        let ran = rx.recv_timeout(LIVENESS).expect("the kept start ran");
        assert!(ran >= at, "not before its instant");
        assert!(!starter.cancel(kept), "it ran");
        assert!(
            rx.recv_timeout(Duration::from_millis(200)).is_err(),
            "the taken-back start never ran, nor the one an hour away"
        );
        assert!(starter.cancel(later));
        assert!(starter.filed().starts.is_empty());
    }

    #[test]
    fn an_earlier_start_filed_after_a_later_one_wakes_the_starter() {
        let starter = own_starter();
        let (tx, rx) = std::sync::mpsc::channel();
        let now = drive(async { Instant::now() });
        let late = starter.file(now + Duration::from_secs(3600), noting(&tx));
        // Long enough for the task to have gone to sleep until an hour from now.
        std::thread::sleep(Duration::from_millis(200));
        starter.file(now + Duration::from_millis(250), noting(&tx));
        rx.recv_timeout(LIVENESS)
            .expect("the starter, asleep until an hour from now, was woken for it");
        assert!(starter.cancel(late));
    }

    #[test]
    fn a_start_that_panics_leaves_the_others_to_run() {
        let starter = own_starter();
        let (tx, rx) = std::sync::mpsc::channel();
        let now = drive(async { Instant::now() });
        starter.file(now, Box::new(|| panic!("a start that panics")));
        starter.file(now + Duration::from_millis(20), noting(&tx));
        rx.recv_timeout(LIVENESS).expect("the next start ran");
    }
}
