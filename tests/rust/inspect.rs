//! Looking at a lock without taking it (inspect, wait_free), breaking it, and the store
//! doctor, on the memory and file stores.

use async_trait::async_trait;
use blob_lock::doctor::{doctor, doctor_on};
use blob_lock::store::{self, LockStore, Snapshot, Version, Write};
use blob_lock::{Broken, Error, Lock, LockOptions, LockState, Protocol};
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

fn opts(expire: f64) -> LockOptions {
    let mut o = LockOptions::new(expire).unwrap();
    o.protocol = Some(Protocol::Cas);
    o
}

#[tokio::test]
async fn inspect_shows_each_state_and_never_writes() {
    let o = opts(30.0);
    let lock = Lock::new("memory://inspect/a", &o).unwrap();
    assert_eq!(lock.inspect().await.unwrap().state, LockState::Unlocked);
    let lease = lock.acquire(None).await.unwrap();
    let seen = lock.inspect().await.unwrap();
    assert_eq!(seen.state, LockState::Held);
    let lf = seen.lockfile.unwrap();
    assert_eq!((&*lf.writer_id, lf.token), (lock.owner(), lease.token()));
    let left = seen.expires_in.unwrap();
    assert!(left > 25.0 && left <= 30.0, "expires in {left}");
    // Inspecting does not renew: the version stays what the holder wrote.
    let before = store::open("memory://inspect/a", &store::Access::default(), &o.timing)
        .unwrap()
        .read()
        .await
        .unwrap()
        .unwrap();
    lock.inspect().await.unwrap();
    let after = store::open("memory://inspect/a", &store::Access::default(), &o.timing)
        .unwrap()
        .read()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before.version, after.version);
    lease.release().await.unwrap();
    let seen = lock.inspect().await.unwrap();
    assert_eq!(seen.state, LockState::Released);
    assert_eq!(seen.expires_in, None);
}

#[tokio::test(start_paused = true)]
async fn wait_free_returns_at_release_and_at_expiry_and_times_out() {
    let o = opts(2.0);
    let holder = Lock::new("memory://waitfree/a", &o).unwrap();
    let watcher = Lock::new("memory://waitfree/a", &o).unwrap();
    let lease = holder.acquire(None).await.unwrap();
    match watcher.wait_free(Some(Duration::from_secs(5))).await {
        Err(Error::Timeout { holder: who, .. }) => assert!(who.contains(holder.owner()), "{who}"),
        other => panic!("a renewed lock must keep the watcher waiting: {other:?}"),
    }
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        lease.release().await.unwrap();
    });
    let seen = watcher
        .wait_free(Some(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(seen.state, LockState::Released);
    release.await.unwrap();
    // A holder that stops renewing (crashed) is free once its version is seen for expire.
    let lease = holder.acquire(None).await.unwrap();
    lease.stop().await;
    let began = tokio::time::Instant::now();
    let seen = watcher.wait_free(None).await.unwrap();
    assert_eq!(seen.state, LockState::Expired);
    assert!(began.elapsed() >= Duration::from_secs(2) - Duration::from_millis(50));
    // wait_free took nothing.
    assert_eq!(
        &*seen.lockfile.unwrap().writer_id,
        holder.owner(),
        "the lockfile is still the old holder's"
    );
}

#[tokio::test]
async fn break_marks_released_and_the_holder_learns_it_lost() {
    let o = opts(3.0);
    let holder = Lock::new("memory://break/a", &o).unwrap();
    let breaker = Lock::new("memory://break/a", &o).unwrap();
    assert!(matches!(
        breaker.break_lock(None).await.unwrap(),
        Broken::NoLockfile
    ));
    let lease = holder.acquire(None).await.unwrap();
    // Naming another acquisition leaves this one alone.
    match breaker
        .break_lock(Some((holder.owner(), 99)))
        .await
        .unwrap()
    {
        Broken::Changed(lf) => assert_eq!(lf.token, lease.token()),
        other => panic!("{other:?}"),
    }
    assert_eq!(holder.inspect().await.unwrap().state, LockState::Held);
    match (breaker
        .break_lock(Some((holder.owner(), lease.token())))
        .await)
        .unwrap()
    {
        Broken::Broken(lf) => assert_eq!(&*lf.writer_id, holder.owner()),
        other => panic!("{other:?}"),
    }
    assert_eq!(breaker.inspect().await.unwrap().state, LockState::Released);
    assert!(matches!(
        breaker.break_lock(None).await.unwrap(),
        Broken::AlreadyReleased(_)
    ));
    // The next acquisition is free at once and gets a larger token.
    let next = breaker
        .try_acquire()
        .await
        .unwrap()
        .expect("free after the break");
    assert!(next.token() > lease.token());
    // The broken holder finds out at its next heartbeat (1 s).
    for _ in 0..100 {
        if lease.is_lost() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(lease.is_lost(), "the broken holder must see the loss");
}

#[tokio::test]
async fn doctor_passes_memory_and_files_and_cleans_up() {
    let o = opts(30.0);
    let report = doctor("memory://doctor/a", &o).await.unwrap();
    assert!(report.cas_safe(), "{report:#?}");
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("lock").to_str().unwrap().to_string();
    let report = doctor(&uri, &o).await.unwrap();
    assert!(report.cas_safe(), "{report:#?}");
    assert!(report.probes.iter().all(|p| p.ok), "{report:#?}");
    assert!(report.scratch.starts_with(&uri));
    assert!(
        !std::path::Path::new(&report.scratch).exists(),
        "the scratch folder {} was left behind",
        report.scratch
    );
}

/// A store that takes conditional writes and ignores their conditions, as some
/// S3-compatible stores do with If-None-Match and If-Match.
#[derive(Debug)]
struct IgnoresConditions(Arc<dyn LockStore>);

#[async_trait]
impl LockStore for IgnoresConditions {
    async fn read(&self) -> blob_lock::Result<Option<Snapshot>> {
        self.0.read().await
    }
    async fn create(&self, body: Bytes) -> blob_lock::Result<Write> {
        self.0.overwrite(body).await.map(Write::Done)
    }
    async fn update(&self, body: Bytes, _expected: &Version) -> blob_lock::Result<Write> {
        self.0.overwrite(body).await.map(Write::Done)
    }
    async fn overwrite(&self, body: Bytes) -> blob_lock::Result<Version> {
        self.0.overwrite(body).await
    }
    fn uri(&self) -> &str {
        self.0.uri()
    }
    /// Says so, as every store must: what it does with conditions is what the doctor finds.
    async fn conditional_writes(&self, required: bool) -> blob_lock::Result<bool> {
        if required {
            return Err(blob_lock::Error::UnsafeStore {
                uri: self.uri().to_string(),
                check: "it ignores the conditions of its writes".into(),
            });
        }
        Ok(false)
    }
    fn known_conditional_writes(&self) -> Option<bool> {
        Some(false)
    }
}

#[tokio::test]
async fn doctor_finds_a_store_that_ignores_conditions() {
    let o = opts(30.0);
    let inner = store::open("memory://doctor/bad", &store::Access::default(), &o.timing).unwrap();
    let report = doctor_on(
        "memory://doctor/bad",
        "memory://doctor/bad",
        Arc::new(IgnoresConditions(inner)),
    )
    .await
    .unwrap();
    assert!(!report.cas_safe());
    assert!(!report.create_is_conditional && !report.update_is_conditional);
    assert!(report.reads_see_writes, "{report:#?}");
    let failed: Vec<_> = report
        .probes
        .iter()
        .filter(|p| !p.ok)
        .map(|p| p.name)
        .collect();
    assert!(
        failed.contains(&"create again") && failed.contains(&"update with a stale version"),
        "{failed:?}"
    );
}

#[tokio::test]
async fn doctor_reports_a_missing_bucket_as_an_error() {
    let o = opts(30.0);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    // A lock folder under a regular file cannot exist: the first call fails at once.
    let uri = file.join("lock").to_str().unwrap().to_string();
    let e = doctor(&uri, &o).await.unwrap_err();
    assert!(e.to_string().contains("a-file"), "{e}");
}
