//! What a lock costs by what it was before: a new lock, one released here, one released
//! elsewhere, as a process meets them in runs. The guess of `blob_lock::protocol::released` is
//! process-wide, so this binary holds one test, counting the requests the process-wide
//! metrics see (the lock protocol's own requests).

use blob_lock::metrics::{self, Request};
use blob_lock::store::{self, Access};
use blob_lock::{Lock, LockOptions};

/// The requests of each kind the lock protocol made since `before`, in the order
/// read, create, update.
fn since(before: &metrics::Snapshot) -> (u64, u64, u64) {
    let now = metrics::snapshot();
    let count = |s: &metrics::Snapshot, kind: Request| -> u64 {
        s.requests
            .iter()
            .filter(|(k, _, _)| *k == kind)
            .map(|(_, _, n)| n)
            .sum()
    };
    let d = |kind| count(&now, kind) - count(before, kind);
    (d(Request::Read), d(Request::Create), d(Request::Update))
}

/// One acquire and release by a fresh lock object, as users write `with BlobLock(uri)`.
async fn cycle(uri: &str, o: &LockOptions) -> (u64, u64, u64) {
    let before = metrics::snapshot();
    let lease = Lock::new(uri, o).unwrap().acquire(None).await.unwrap();
    lease.release().await.unwrap();
    since(&before)
}

/// A lock taken and released by another process: a lock over the same store with a receipt
/// of its own, so that this process's receipts learn nothing of it.
async fn released_elsewhere(uri: &str, o: &LockOptions) {
    let store = store::open(uri, &Access::default(), &o.timing).unwrap();
    let elsewhere = Lock::with_store(uri, store, o);
    elsewhere
        .acquire(None)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_locks_cost_two_requests_after_the_first_and_existing_ones_three() {
    let o = LockOptions::new(30.0).unwrap();
    // The process's first lock: read first (nothing there), create, release.
    assert_eq!(cycle("memory://runs/new-0", &o).await, (1, 1, 1));
    // A run of new locks: created first, then released; two requests each.
    for i in 1..6 {
        assert_eq!(
            cycle(&format!("memory://runs/new-{i}"), &o).await,
            (0, 1, 1)
        );
    }
    // Taken again here: an update on the version our release left, and the release.
    assert_eq!(cycle("memory://runs/new-3", &o).await, (0, 0, 2));
    // A lock released elsewhere, met in a run of new ones: the create is refused, once.
    released_elsewhere("memory://runs/old-0", &o).await;
    assert_eq!(cycle("memory://runs/old-0", &o).await, (1, 1, 2));
    // Then locks released elsewhere are read first: read, update, release.
    for i in 1..4 {
        let uri = format!("memory://runs/old-{i}");
        released_elsewhere(&uri, &o).await;
        assert_eq!(cycle(&uri, &o).await, (1, 0, 2));
    }
    // A new lock after them: read first, finding nothing; the next new one is created first.
    assert_eq!(cycle("memory://runs/new-6", &o).await, (1, 1, 1));
    assert_eq!(cycle("memory://runs/new-7", &o).await, (0, 1, 1));
    // A lock released here, then taken by another process between our turns: the update on
    // the version our release left is refused, once (a stale receipt); while others go on
    // writing between our turns, read first: read, update, release.
    let shared = "memory://runs/shared";
    assert_eq!(cycle(shared, &o).await, (0, 1, 1));
    released_elsewhere(shared, &o).await;
    assert_eq!(cycle(shared, &o).await, (1, 0, 3));
    for _ in 0..3 {
        released_elsewhere(shared, &o).await;
        assert_eq!(cycle(shared, &o).await, (1, 0, 2));
    }
    // Taken again only here: one read finds the receipt current, then two requests again.
    assert_eq!(cycle(shared, &o).await, (1, 0, 2));
    assert_eq!(cycle(shared, &o).await, (0, 0, 2));
}
