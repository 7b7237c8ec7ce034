//! What is owed when a caller stopped waiting, process-wide and per lock: work left running
//! in the background (the release of what an interrupted or abandoned acquisition may have
//! written, [`spawn`]), counted until done, and each lock's debts ([`Owed`]), which its next
//! acquisition waits for. [`drain`] waits for them a moment (the Python package calls it at
//! interpreter exit), so that a Ctrl-C or a timeout during a wait leaves no lock behind to
//! expire.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Cleanups running: the process in the high half (a child made by fork inherits the count
/// but none of the tasks), their number in the low half.
static PENDING: AtomicU64 = AtomicU64::new(0);

fn mine(packed: u64) -> u64 {
    if packed >> 32 == u64::from(crate::per_process::pid()) {
        packed & 0xffff_ffff
    } else {
        0
    }
}

fn add(delta: i64) {
    let me = u64::from(crate::per_process::pid()) << 32;
    let _ = PENDING.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |packed| {
        let n = mine(packed) as i64 + delta;
        Some(me | n.max(0) as u64)
    });
}

/// Runs `cleanup` on the current tokio runtime (the shared one outside any), counted until
/// it ends.
pub fn spawn(cleanup: impl Future<Output = ()> + Send + 'static) {
    add(1);
    let counted = async move {
        cleanup.await;
        add(-1);
    };
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => drop(runtime.spawn(counted)),
        Err(_) => drop(crate::runtime::runtime().spawn(counted)),
    }
}

/// Waits until no cleanup of this process runs, or `timeout` passes.
pub fn drain(timeout: Duration) {
    let until = Instant::now() + timeout;
    while mine(PENDING.load(Ordering::SeqCst)) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The cleanups one lock owes: each is counted from the moment it is owed (synchronously,
/// before the caller can start another acquisition) until its release has run, and the
/// lock's next acquisition waits for the count to reach zero. An acquisition through the
/// same lock has the same owner id, so a cleanup running alongside it could release it.
#[derive(Debug, Default)]
pub struct Owed {
    pending: AtomicU64,
    paid: tokio::sync::Notify,
}

impl Owed {
    /// Counts one more cleanup owed until the returned debt is dropped. [`drain`] counts it
    /// too, from now: an abandoned acquisition still in flight owes its cleanup before the
    /// cleanup is spawned (when the acquisition ends), and waiting only for what was spawned
    /// would return while its write is still to be released.
    pub fn owe(self: &Arc<Self>) -> Debt {
        self.pending.fetch_add(1, Ordering::SeqCst);
        add(1);
        Debt(self.clone())
    }

    /// True while a cleanup is owed.
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst) > 0
    }

    /// Returns once no cleanup is owed.
    pub async fn drained(&self) {
        loop {
            let paid = self.paid.notified();
            if !self.pending() {
                return;
            }
            paid.await;
        }
    }
}

/// One owed cleanup; dropping it marks it done.
#[derive(Debug)]
pub struct Debt(Arc<Owed>);

impl Drop for Debt {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, Ordering::SeqCst);
        add(-1);
        self.0.paid.notify_waiters();
    }
}
