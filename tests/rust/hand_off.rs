//! The launch grace: an orchestrator hands its lock to a remote that may take long to start
//! (`Lease::hand_off`), then dies. Waiters wait out the grace rather than `expire`, until the
//! remote's first write; from then on normal expiry applies. Memory stores on tokio's paused
//! clock, both protocols.

use blob_lock::lockfile::LockFile;
use blob_lock::store::{self, LockStore};
use blob_lock::{keep_alive_on, Error, Lock, LockOptions, LossCause, Protocol, ReleaseStatus};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

const EXPIRE: f64 = 2.0;
const GRACE: Duration = Duration::from_secs(20);

fn setup(name: &str, protocol: Protocol) -> (LockOptions, Arc<dyn LockStore>) {
    let mut o = LockOptions::new(EXPIRE).unwrap();
    o.protocol = Some(protocol);
    let uri = format!("memory://hand-off-{name}-{}/lock", protocol.as_str());
    let s = store::open(&uri, &store::Access::default(), &o.timing).unwrap();
    (o, s)
}

async fn lockfile(s: &dyn LockStore) -> LockFile {
    LockFile::decode(&s.read().await.unwrap().unwrap().bytes).unwrap()
}

/// How long a fresh waiter takes to get the lock, from now.
async fn takeover(s: &Arc<dyn LockStore>, o: &LockOptions) -> (Duration, blob_lock::Lease) {
    let began = Instant::now();
    let waiter = Lock::with_store("t", s.clone(), o);
    let lease = waiter
        .acquire(Some(Duration::from_secs(120)))
        .await
        .unwrap();
    (began.elapsed(), lease)
}

#[tokio::test(start_paused = true)]
async fn a_dead_orchestrators_handed_off_lock_is_taken_over_after_the_grace_not_expire() {
    for protocol in [Protocol::Cas, Protocol::Lww] {
        let (o, s) = setup("dies", protocol);
        let orchestrator = Lock::with_store("t", s.clone(), &o);
        let lease = orchestrator.acquire(None).await.unwrap();
        lease.hand_off(GRACE).await.unwrap();
        let handed = Instant::now();
        let token = lease.token();
        assert_eq!(
            lockfile(s.as_ref()).await.grace_s,
            Some(GRACE.as_secs_f64())
        );
        lease.stop().await; // killed right after handing off: no renewals, no release
        drop(lease);
        let (waited, next) = takeover(&s, &o).await;
        let since = handed.elapsed();
        assert!(
            since >= GRACE,
            "{protocol:?}: taken over {since:?} after the hand-off"
        );
        assert!(
            waited < GRACE + Duration::from_secs(4),
            "{protocol:?}: the grace held the lock for {waited:?}"
        );
        assert!(next.token() > token);
        assert_eq!(
            lockfile(s.as_ref()).await.grace_s,
            None,
            "a new holder grants none"
        );

        // Without a hand-off the same death frees the lock after `expire`.
        next.stop().await;
        let (waited, _) = takeover(&s, &o).await;
        assert!(waited < Duration::from_secs(4), "{protocol:?}: {waited:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_remotes_first_write_ends_the_grace() {
    for protocol in [Protocol::Cas, Protocol::Lww] {
        let (o, s) = setup("remote", protocol);
        let orchestrator = Lock::with_store("t", s.clone(), &o);
        let lease = orchestrator.acquire(None).await.unwrap();
        lease.hand_off(GRACE).await.unwrap();
        // The orchestrator lives on for a while: its renewals carry what is left of the grace.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let left = lockfile(s.as_ref())
            .await
            .grace_s
            .expect("grace still granted");
        assert!(
            left < GRACE.as_secs_f64() - 4.0 && left > GRACE.as_secs_f64() - 6.0,
            "{protocol:?}: {left} s of grace left after 5 s"
        );
        let remote = keep_alive_on(s.clone(), orchestrator.owner(), &o)
            .await
            .unwrap();
        let seen = lockfile(s.as_ref()).await;
        assert_eq!(seen.writer_name.as_deref(), Some("remote"));
        assert_eq!(
            seen.grace_s, None,
            "{protocol:?}: the remote's write grants no grace"
        );
        // The orchestrator's renewals after the remote's write grant none either.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(!lease.is_lost(), "{:?}", lease.lost_reason());
        for _ in 0..20 {
            assert_eq!(lockfile(s.as_ref()).await.grace_s, None, "{protocol:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Both die: normal expiry applies, well before the grace would have ended.
        lease.stop().await;
        remote.stop().await;
        let (waited, next) = takeover(&s, &o).await;
        assert!(
            waited < Duration::from_secs(4),
            "{protocol:?}: waited {waited:?}"
        );
        assert!(next.token() > lease.token());
    }
}

#[tokio::test(start_paused = true)]
async fn the_grace_runs_out_while_the_orchestrator_renews() {
    let (o, s) = setup("runs-out", Protocol::Cas);
    let lease = Lock::with_store("t", s.clone(), &o)
        .acquire(None)
        .await
        .unwrap();
    lease.hand_off(Duration::from_secs(3)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(lockfile(s.as_ref()).await.grace_s, None);
    lease.stop().await;
    let (waited, _) = takeover(&s, &o).await;
    assert!(waited < Duration::from_secs(4), "waited {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn hand_off_refuses_what_it_cannot_do_and_writes_nothing() {
    let (o, s) = setup("refused", Protocol::Cas);
    let orchestrator = Lock::with_store("t", s.clone(), &o);
    let lease = orchestrator.acquire(None).await.unwrap();
    let before = s.read().await.unwrap().unwrap().version;
    for grace in [Duration::ZERO, Duration::from_secs(8 * 24 * 3600)] {
        let err = lease.hand_off(grace).await.unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("grace"), "{err}");
    }
    let remote = keep_alive_on(s.clone(), orchestrator.owner(), &o)
        .await
        .unwrap();
    let after_remote = s.read().await.unwrap().unwrap().version;
    assert_ne!(before, after_remote);
    let err = remote.hand_off(GRACE).await.unwrap_err();
    assert!(err.to_string().contains("orchestrator"), "{err}");
    assert_eq!(s.read().await.unwrap().unwrap().version, after_remote);
    remote.stop().await;

    assert_eq!(lease.release().await.unwrap(), ReleaseStatus::Released);
    let released = s.read().await.unwrap().unwrap().version;
    let err = lease.hand_off(GRACE).await.unwrap_err();
    assert!(err.to_string().contains("released or stopped"), "{err}");
    assert_eq!(s.read().await.unwrap().unwrap().version, released);

    // A lease taken over meanwhile: the hand-off is a loss, told as one.
    let lost = orchestrator.acquire(None).await.unwrap();
    assert_eq!(
        orchestrator.release_unheld().await.unwrap(),
        ReleaseStatus::Released
    );
    let _other = Lock::with_store("t", s.clone(), &o)
        .acquire(None)
        .await
        .unwrap();
    let err = lost.hand_off(GRACE).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Lost {
                cause: LossCause::TakenOver,
                ..
            }
        ),
        "{err}"
    );
    assert!(lost.is_lost());
}
