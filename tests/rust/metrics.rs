//! The process-wide metrics count what the locks did: acquisitions by ending and their
//! waits, renewals with latency and margin, releases and hold times, requests by kind and
//! outcome, losses by cause. One test in this binary, so that nothing else moves the
//! counters while it compares them.

use blob_lock::metrics::{self, Acquired, Outcome, Request, Snapshot};
use blob_lock::LossCause;
use blob_lock::{Lock, LockOptions};
use std::time::Duration;

fn acquisitions(s: &Snapshot, which: Acquired) -> u64 {
    s.acquisitions.iter().find(|(a, _)| *a == which).unwrap().1
}

fn requests(s: &Snapshot, kind: Request, outcome: Outcome) -> u64 {
    s.requests
        .iter()
        .find(|(k, o, _)| *k == kind && *o == outcome)
        .unwrap()
        .2
}

fn losses(s: &Snapshot, cause: LossCause) -> u64 {
    s.losses.iter().find(|(c, _)| *c == cause).unwrap().1
}

#[tokio::test(flavor = "multi_thread")]
async fn what_locks_do_is_counted() {
    let o = LockOptions::new(3.0).unwrap();
    let before = metrics::snapshot();

    let lock = Lock::new("memory://metrics/a", &o).unwrap();
    let lease = lock.acquire(None).await.unwrap();
    let held_from = std::time::Instant::now();
    let other = Lock::new("memory://metrics/a", &o).unwrap();
    assert!(other.try_acquire().await.unwrap().is_none());
    assert!(other
        .acquire(Some(Duration::from_millis(100)))
        .await
        .is_err());
    // Two heartbeats (every 1 s), however slow the machine.
    let renewed = tokio::time::Instant::now() + Duration::from_secs(60);
    while metrics::snapshot().renewals - before.renewals < 2 {
        assert!(
            tokio::time::Instant::now() < renewed,
            "no two renewals in 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let held_for = held_from.elapsed().as_secs_f64();
    lease.release().await.unwrap();

    let broken = Lock::new("memory://metrics/b", &o).unwrap();
    let lease = broken.acquire(None).await.unwrap();
    broken.break_lock(None).await.unwrap();
    let noticed = tokio::time::Instant::now() + Duration::from_secs(30);
    while !lease.is_lost() {
        assert!(
            tokio::time::Instant::now() < noticed,
            "its renewals never noticed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let after = metrics::snapshot();
    let delta = |f: &dyn Fn(&Snapshot) -> u64| f(&after) - f(&before);
    assert_eq!(delta(&|s| acquisitions(s, Acquired::Acquired)), 2);
    assert_eq!(delta(&|s| acquisitions(s, Acquired::Busy)), 1);
    assert_eq!(delta(&|s| acquisitions(s, Acquired::TimedOut)), 1);
    // Busy single attempts wait for nothing: not in the wait histogram.
    assert_eq!(delta(&|s| s.acquire_wait.count), 3);
    let renewals = delta(&|s| s.renewals);
    assert!(renewals >= 2, "{renewals} renewals");
    assert_eq!(delta(&|s| s.renewal_latency.count), renewals);
    assert_eq!(delta(&|s| s.renewal_margin.count), renewals);
    // Every margin below the lease's length (expire less its margin: 2.7 s).
    let within_the_lease = |s: &Snapshot| {
        s.renewal_margin
            .buckets
            .iter()
            .find(|(b, _)| *b == 5.0)
            .unwrap()
            .1
    };
    assert_eq!(delta(&within_the_lease), renewals);
    assert_eq!(delta(&|s| s.releases), 1);
    assert_eq!(delta(&|s| losses(s, LossCause::ReleasedByOther)), 1);
    assert_eq!(delta(&|s| s.hold.count), 2, "one release, one loss");
    assert!(delta(&|s| requests(s, Request::Read, Outcome::Ok)) >= 3);
    assert_eq!(delta(&|s| requests(s, Request::Create, Outcome::Ok)), 2);
    // Each renewal and the release.
    assert!(delta(&|s| requests(s, Request::Update, Outcome::Ok)) > renewals);
    assert_eq!(delta(&|s| requests(s, Request::Overwrite, Outcome::Ok)), 0);
    // The first lease's hold began before `acquire` returned and ended at its release.
    let sum_after = after.hold.sum - before.hold.sum;
    assert!(
        sum_after >= held_for,
        "hold times sum to {sum_after}s, the first lease alone was held {held_for}s"
    );
}
