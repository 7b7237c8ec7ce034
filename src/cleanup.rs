//! Work left running in the background when a caller stopped waiting: the release of what an
//! interrupted or abandoned acquisition may have written. [`drain`] waits for it a moment
//! (the Python package calls it at interpreter exit), so that a Ctrl-C or a timeout during a
//! wait leaves no lock behind to expire.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Cleanups running: the process in the high half (a child made by fork inherits the count
/// but none of the tasks), their number in the low half.
static PENDING: AtomicU64 = AtomicU64::new(0);

fn mine(packed: u64) -> u64 {
    if packed >> 32 == u64::from(std::process::id()) {
        packed & 0xffff_ffff
    } else {
        0
    }
}

fn add(delta: i64) {
    let me = u64::from(std::process::id()) << 32;
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
