//! The semaphore core (src/semaphore/): at most N holders on memory (tokio's paused clock, so
//! expiries cost no real time) and on local files (real threads), the number stored beside
//! the slots, raised and lowered, and a slot freed by its holder's expiry.

use blob_lock::{Error, LockOptions, Protocol, Semaphore};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn opts(expire: f64) -> LockOptions {
    let mut o = LockOptions::new(expire).unwrap();
    o.protocol = Some(Protocol::Cas);
    o
}

/// `tasks` contenders each taking a slot `rounds` times from `semaphore`s of their own,
/// counting who is inside: never more than `slots` at once, and every round done.
async fn at_most(prefix: &str, slots: usize, tasks: usize, rounds: usize, hold: Duration) {
    let o = opts(2.0);
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut running = Vec::new();
    for _ in 0..tasks {
        let (inside, most, done) = (inside.clone(), most.clone(), done.clone());
        let semaphore = Semaphore::new(prefix, slots, &o).unwrap();
        running.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let permit = semaphore.acquire(None).await.unwrap();
                assert!(permit.slot() < slots);
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                assert!(now <= slots, "{now} holders of {slots} slots at once");
                tokio::time::sleep(hold).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(!permit.lease().is_lost());
                permit.release().await.unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for t in running {
        t.await.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), tasks * rounds);
    // Contention filled every slot at some moment: the semaphore let N in, not fewer.
    assert_eq!(most.load(Ordering::SeqCst), slots);
}

#[tokio::test(start_paused = true)]
async fn sixteen_contenders_never_exceed_four_slots_on_memory() {
    at_most(
        "memory://sem-16-4/gpu",
        4,
        16,
        4,
        Duration::from_millis(200),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_contenders_never_exceed_three_slots_on_files() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("quota");
    at_most(prefix.to_str().unwrap(), 3, 8, 3, Duration::from_millis(50)).await;
}

#[tokio::test(start_paused = true)]
async fn try_acquire_is_refused_while_every_slot_is_held() {
    let s = Semaphore::new("memory://sem-try/q", 2, &opts(2.0)).unwrap();
    let a = s.try_acquire().await.unwrap().expect("a free slot");
    let b = s.try_acquire().await.unwrap().expect("a free slot");
    assert_ne!(a.slot(), b.slot());
    assert_ne!(
        a.owner(),
        b.owner(),
        "each permit has an owner id of its own"
    );
    assert!(s.try_acquire().await.unwrap().is_none());
    a.release().await.unwrap();
    let c = s.try_acquire().await.unwrap().expect("the released slot");
    assert_eq!(c.slot(), a.slot());
    assert_eq!(c.uri(), format!("memory://sem-try/q/slot-{}", a.slot()));
}

#[tokio::test(start_paused = true)]
async fn the_stored_number_wins_over_the_one_asked() {
    let o = opts(2.0);
    let first = Semaphore::new("memory://sem-agree/q", 2, &o).unwrap();
    assert_eq!(first.configuration().await.unwrap().slots, 2);
    let other = Semaphore::new("memory://sem-agree/q", 5, &o).unwrap();
    let _held: Vec<_> = [
        other.try_acquire().await.unwrap(),
        other.try_acquire().await.unwrap(),
    ]
    .into_iter()
    .map(|p| p.expect("two slots"))
    .collect();
    assert!(
        other.try_acquire().await.unwrap().is_none(),
        "a caller asking for 5 got a third slot of 2"
    );
}

#[tokio::test(start_paused = true)]
async fn a_raised_number_lets_a_waiter_in_at_once() {
    let o = opts(2.0);
    let s = Arc::new(Semaphore::new("memory://sem-raise/q", 1, &o).unwrap());
    let held = s.acquire(None).await.unwrap();
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move { s.acquire(Some(Duration::from_secs(30))).await })
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!waiter.is_finished());
    s.set_slots(2).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter took the new slot")
        .unwrap()
        .unwrap();
    assert_eq!(got.slot(), 1);
    assert!(!held.lease().is_lost());
}

#[tokio::test(start_paused = true)]
async fn a_lowered_number_evicts_nobody_and_drains() {
    let o = opts(2.0);
    let s = Semaphore::new("memory://sem-lower/q", 3, &o).unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(s.acquire(None).await.unwrap());
    }
    s.set_slots(1).await.unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(
        held.iter().all(|p| !p.lease().is_lost()),
        "a holder was evicted"
    );
    held.sort_by_key(|p| p.slot());
    // Slots 1 and 2 released: past the number, they are not taken anew.
    for p in held.drain(1..) {
        p.release().await.unwrap();
    }
    assert!(s.try_acquire().await.unwrap().is_none());
    held.pop().unwrap().release().await.unwrap();
    assert_eq!(s.try_acquire().await.unwrap().unwrap().slot(), 0);
}

/// Under either protocol: a waiter's polls of the slot watch as one wait does (under `lww`
/// they once started again at each poll, and the slot was taken only by the wall clock's
/// path, after `expire + clock_skew`: 62 s here).
#[tokio::test(start_paused = true)]
async fn a_holder_that_stops_renewing_frees_its_slot_by_expiry() {
    for protocol in [Protocol::Cas, Protocol::Lww] {
        let mut o = opts(2.0);
        o.protocol = Some(protocol);
        let prefix = format!("memory://sem-expiry-{}/q", protocol.as_str());
        stops_renewing_frees_its_slot(Semaphore::new(&prefix, 1, &o).unwrap()).await;
    }
}

async fn stops_renewing_frees_its_slot(s: Semaphore) {
    let crashed = s.acquire(None).await.unwrap();
    crashed.lease().let_go(); // as a killed process: no renewal, no release
    let began = tokio::time::Instant::now();
    let next = s.acquire(Some(Duration::from_secs(30))).await.unwrap();
    let waited = began.elapsed();
    assert_eq!(next.slot(), 0);
    assert_ne!(next.owner(), crashed.owner());
    assert!(
        waited >= Duration::from_millis(1500),
        "taken after {waited:?}"
    );
    assert!(waited < Duration::from_secs(10), "taken after {waited:?}");
    assert!(next.lease().token() > crashed.lease().token());
}

#[tokio::test(start_paused = true)]
async fn a_wait_past_its_timeout_names_the_semaphore() {
    let s = Semaphore::new("memory://sem-timeout/q", 1, &opts(2.0)).unwrap();
    let _held = s.acquire(None).await.unwrap();
    match s.acquire(Some(Duration::from_secs(5))).await {
        Err(Error::Timeout { uri, holder, .. }) => {
            assert_eq!(uri, "memory://sem-timeout/q");
            assert!(holder.contains("its 1 slot"), "{holder}");
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn bad_numbers_and_prefixes_are_refused_before_any_request() {
    let o = opts(2.0);
    for (prefix, slots, expect) in [
        ("memory://sem-bad/q", 0, "between 1 and 4096"),
        ("memory://sem-bad/q", 5000, "between 1 and 4096"),
        ("", 2, "prefix"),
        ("nosuch://x/q", 2, "nosuch"),
    ] {
        let e = Semaphore::new(prefix, slots, &o).unwrap_err().to_string();
        assert!(e.contains(expect), "{prefix} {slots}: {e}");
    }
}
