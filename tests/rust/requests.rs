//! How many store requests an uncontended acquire and release cost, counted by an
//! instrumented store: the latency of a lock on a remote store is its round trips.

use blob_lock::store::{self, Counted, Requests};
use blob_lock::{Lock, LockOptions, Protocol, ReleaseStatus};
use std::sync::Arc;

fn counted(name: &str, protocol: Protocol) -> (Arc<Counted>, LockOptions) {
    let mut o = LockOptions::new(30.0).unwrap();
    o.protocol = Some(protocol);
    let inner = store::open(
        &format!("memory://{name}/lock"),
        &store::Access::default(),
        &o.timing,
    )
    .unwrap();
    (Arc::new(Counted::new(inner)), o)
}

async fn cycle(lock: &Lock, store: &Counted) -> Requests {
    let before = store.requests();
    let lease = lock.acquire(None).await.unwrap();
    assert_eq!(lease.release().await.unwrap(), ReleaseStatus::Released);
    let after = store.requests();
    Requests {
        reads: after.reads - before.reads,
        creates: after.creates - before.creates,
        updates: after.updates - before.updates,
        overwrites: after.overwrites - before.overwrites,
        deletes: after.deletes - before.deletes,
    }
}

#[tokio::test]
async fn cas_costs_two_requests_when_released_here_three_otherwise() {
    let (store, o) = counted("req-cas", Protocol::Cas);
    let lock = Lock::with_store("req", store.clone(), &o);
    // A new lock: a read finds nothing, one create, one release write.
    let first = cycle(&lock, &store).await;
    assert_eq!(
        (first.reads, first.creates, first.updates, first.total()),
        (1, 1, 1, 3),
        "{first:?}"
    );
    // Taken again through the same lock: an update on the version our release left, then
    // the release write.
    for _ in 0..5 {
        let again = cycle(&lock, &store).await;
        assert_eq!((again.updates, again.total()), (2, 2), "{again:?}");
    }
    // Another lock (another process) does not know that version: read, update, release.
    let other = Lock::with_store("req", store.clone(), &o);
    let theirs = cycle(&other, &store).await;
    assert_eq!(
        (theirs.reads, theirs.updates, theirs.total()),
        (1, 2, 3),
        "{theirs:?}"
    );
}

#[tokio::test]
async fn a_stale_hint_costs_one_refused_request_and_nothing_else() {
    let (store, o) = counted("req-stale", Protocol::Cas);
    let lock = Lock::with_store("req", store.clone(), &o);
    cycle(&lock, &store).await;
    let ours = lock.inspect().await.unwrap().lockfile.unwrap().token;
    // Someone else takes and keeps the lock after our release: our hint is stale.
    let other = Lock::with_store("req", store.clone(), &o);
    let theirs = other.acquire(None).await.unwrap();
    let before = store.requests();
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "the holder keeps it"
    );
    let spent = store.requests().total() - before.total();
    // The refused update, then the usual read.
    assert_eq!(spent, 2);
    assert!(theirs.token() > ours);
    assert!(!theirs.is_lost());
    theirs.release().await.unwrap();
    let lease = lock.acquire(None).await.unwrap();
    assert!(
        lease.token() > theirs.token(),
        "tokens still grow from holder to holder"
    );
}

#[tokio::test]
async fn lww_costs_read_write_read_and_a_read_release_write() {
    let (store, o) = counted("req-lww", Protocol::Lww);
    let lock = Lock::with_store("req", store.clone(), &o);
    let first = cycle(&lock, &store).await;
    // Read, write, read back; the release reads first too (it writes only over a lockfile
    // that is still ours: lww has no conditional write to do that check for it).
    assert_eq!((first.reads, first.overwrites), (3, 2), "{first:?}");
}

/// A release wakes the waiters on the same lock in this process at once: on tokio's paused
/// clock the handover takes no virtual time at all, where a poll would wait up to 3 s.
#[tokio::test(start_paused = true)]
async fn a_release_wakes_waiters_in_this_process_at_once() {
    let o = LockOptions::new(60.0).unwrap(); // polls back off to 3 s
    let holder = Lock::new("memory://wake/lock", &o).unwrap();
    let waiter = Lock::new("memory://wake/lock", &o).unwrap();
    let lease = holder.acquire(None).await.unwrap();
    let first = lease.token();
    let waiting = tokio::spawn(async move {
        let lease = waiter.acquire(None).await.unwrap();
        (tokio::time::Instant::now(), lease)
    });
    tokio::time::sleep(std::time::Duration::from_secs(20)).await; // the waiter backs off
    lease.release().await.unwrap();
    let released = tokio::time::Instant::now();
    let (acquired, lease) = waiting.await.unwrap();
    assert_eq!(
        acquired - released,
        std::time::Duration::ZERO,
        "woken, not polled"
    );
    assert!(lease.token() > first);
}

/// What holding costs: 200 locks at the default timing (expire 30 s, a heartbeat every
/// 10 s), held for an hour of virtual time. Each renewal is one conditional write and
/// nothing else (no read): 360 writes per lock-hour, the figure BENCHMARKS.md prices.
/// (A thousand locks cost 40 s of an unoptimised build's CPU and showed nothing more:
/// tests/python/test_scale.py holds 10,000.)
#[tokio::test(start_paused = true)]
async fn a_held_lock_costs_one_write_per_heartbeat() {
    const LOCKS: usize = 200;
    let o = LockOptions::new(30.0).unwrap();
    let mut held = Vec::new();
    for i in 0..LOCKS {
        let inner = store::open(
            &format!("memory://hour/{i}"),
            &store::Access::default(),
            &o.timing,
        );
        let store = Arc::new(Counted::new(inner.unwrap()));
        let lock = Lock::with_store(&format!("hour-{i}"), store.clone(), &o);
        held.push((lock.acquire(None).await.unwrap(), store));
    }
    let before: Vec<Requests> = held.iter().map(|(_, s)| s.requests()).collect();
    tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    let mut writes = 0;
    for ((lease, store), before) in held.iter().zip(&before) {
        assert!(!lease.is_lost());
        let after = store.requests();
        assert_eq!(
            after.total() - before.total(),
            after.updates - before.updates
        );
        let renewals = after.updates - before.updates;
        assert!(
            (359..=361).contains(&renewals),
            "{renewals} renewals in an hour"
        );
        writes += renewals;
    }
    eprintln!(
        "{LOCKS} locks held an hour at expire 30 s: {writes} conditional writes, {:.1} per lock-hour, no reads",
        writes as f64 / LOCKS as f64
    );
    for (lease, _) in held {
        lease.release().await.unwrap();
    }
}

/// A lockfile deleted under its holder (by hand) is reported gone after two more reads a
/// poll apart (what a store that has not caught up would need), not read again and again.
/// cas reads once more first: its release is a conditional write, refused, then resolved by
/// a read.
#[tokio::test(start_paused = true)]
async fn a_release_of_a_lockfile_deleted_by_hand_reads_it_three_times_a_poll_apart() {
    use blob_lock::store::LockStore;
    for protocol in [Protocol::Cas, Protocol::Lww] {
        let (store, o) = counted(&format!("req-gone-{}", protocol.as_str()), protocol);
        let lock = Lock::with_store("req", store.clone(), &o);
        let lease = lock.acquire(None).await.unwrap();
        store.delete().await.unwrap();
        let (before, began) = (store.requests(), tokio::time::Instant::now());
        assert_eq!(lease.release().await.unwrap(), ReleaseStatus::NoLockfile);
        let spent = store.requests();
        let reads = if protocol == Protocol::Cas { 4 } else { 3 };
        assert_eq!(spent.reads - before.reads, reads, "{protocol:?}: {spent:?}");
        let paused = began.elapsed();
        assert!(
            paused >= 2 * o.timing.poll_min,
            "{protocol:?}: the reads came {paused:?} apart in all"
        );
    }
}

/// A semaphore's requests, on stores that count them: taking a free slot costs the
/// configuration's read, the slot lock's own acquisition and, for a slot above 0, the
/// configuration's read again (a number lowered meanwhile); waiters read one slot a poll
/// each and the configuration once a poll, never every slot a poll (W waiters on N slots:
/// about 2W reads a poll, not W x N).
#[tokio::test(start_paused = true)]
async fn a_semaphore_costs_two_reads_more_than_a_lock_and_a_waiter_two_reads_a_poll() {
    use blob_lock::semaphore::Opener;
    use blob_lock::store::LockStore;
    use blob_lock::Semaphore;
    use std::sync::Mutex;
    use std::time::Duration;

    let (slots, waiters) = (4usize, 4usize);
    let o = LockOptions::new(30.0).unwrap();
    type Views = Arc<Mutex<Vec<(String, Arc<Counted>)>>>;
    let stores: Views = Default::default();
    let timing = o.timing;
    let kept = stores.clone();
    // Each semaphore object gets its own counted view of each object (as a process would).
    let open: Opener = Arc::new(move |name: &str| {
        let inner = store::open(
            &format!("memory://req-semaphore/{name}"),
            &store::Access::default(),
            &timing,
        )
        .unwrap();
        let counted = Arc::new(Counted::new(inner));
        kept.lock()
            .unwrap()
            .push((name.to_string(), counted.clone()));
        counted as Arc<dyn LockStore>
    });
    let reads = |what: &str| -> u64 {
        let stores = stores.lock().unwrap();
        (stores.iter())
            .filter(|(name, _)| name.starts_with(what))
            .map(|(_, s)| s.requests().reads)
            .sum()
    };
    let total = || -> u64 {
        let stores = stores.lock().unwrap();
        stores.iter().map(|(_, s)| s.requests().total()).sum()
    };
    let semaphore = |asked| Semaphore::with_stores("req", asked, &o, open.clone()).unwrap();

    // The first acquisition writes the configuration: its read, a look for slots taken
    // before (here a read of each slot asked for; one listing on a real store), its create,
    // then the slot's read (no lockfile), create and release, and above slot 0 the
    // configuration's read again.
    let first = semaphore(slots).acquire(None).await.unwrap();
    let above = u64::from(first.slot() > 0);
    first.release().await.unwrap();
    assert_eq!(
        total(),
        2 + slots as u64 + 3 + above,
        "{:?}",
        stores.lock().unwrap()
    );
    // A fresh semaphore on it: the configuration's read, a lock's three requests on a slot
    // it has not released before (read, update, release), and the check above slot 0.
    let before = total();
    let again = semaphore(slots).acquire(None).await.unwrap();
    let above = u64::from(again.slot() > 0);
    again.release().await.unwrap();
    assert!(
        total() - before <= 4 + above,
        "{} requests",
        total() - before
    );

    // Every slot held; W waiters for a virtual 30 s.
    let holder = semaphore(slots);
    let mut held = Vec::new();
    for _ in 0..slots {
        held.push(holder.acquire(None).await.unwrap());
    }
    let (slot_reads, config_reads) = (reads("slot-"), reads("semaphore.json"));
    let waited = Duration::from_secs(30);
    let tasks: Vec<_> = (0..waiters)
        .map(|_| {
            let s = semaphore(slots);
            tokio::spawn(async move { s.acquire(Some(waited)).await.map(|_| ()) })
        })
        .collect();
    for t in tasks {
        assert!(matches!(
            t.await.unwrap(),
            Err(blob_lock::Error::Timeout { .. })
        ));
    }
    // Polls grow from 50 ms to 3 s, each jittered to half of it at least: in 30 s at most 7
    // while growing and 20 at 3 s. Each waiter: a first round of N reads, then a slot read
    // and the configuration's a poll.
    let polls = 7 + 20;
    let per_waiter = (slots + polls) as u64;
    let slot_read = reads("slot-") - slot_reads;
    assert!(
        slot_read <= waiters as u64 * per_waiter,
        "{slot_read} slot reads by {waiters} waiters in 30 s: more than one a poll"
    );
    assert!(
        slot_read >= waiters as u64 * slots as u64,
        "{slot_read}: no first rounds?"
    );
    let config_read = reads("semaphore.json") - config_reads;
    println!("{waiters} waiters on {slots} held slots for 30 s: {slot_read} slot reads, {config_read} configuration reads");
    assert!(
        config_read <= waiters as u64 * (1 + polls as u64),
        "{config_read} configuration reads"
    );
    for permit in held {
        permit.release().await.unwrap();
    }
}
