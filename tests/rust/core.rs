//! The lock core on its own, without Python: memory stores on tokio's paused clock (so
//! expiry waits cost no real time), and the file store with real threads and processes' view.

use blob_lock::store::{self, LockStore};
use blob_lock::{keep_alive_on, Error, Lock, LockOptions, Protocol, ReleaseStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn opts(protocol: Protocol, expire: f64) -> LockOptions {
    let mut o = LockOptions::new(expire).unwrap();
    o.protocol = Some(protocol);
    o
}

fn memory(name: &str, o: &LockOptions) -> Arc<dyn LockStore> {
    store::open(
        &format!("memory://{name}/lock"),
        &store::Access::default(),
        &o.timing,
    )
    .unwrap()
}

async fn exclusion(store: Arc<dyn LockStore>, protocol: Protocol) {
    let o = opts(protocol, 2.0);
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let lock = Lock::with_store("test", store.clone(), &o);
        let (inside, done) = (inside.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..3 {
                let lease = lock.acquire(None).await.unwrap();
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders at once"
                );
                tokio::time::sleep(Duration::from_millis(30)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                assert!(!lease.is_lost());
                assert_eq!(lease.release().await.unwrap(), ReleaseStatus::Released);
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 18);
}

#[tokio::test(start_paused = true)]
async fn cas_excludes_on_memory() {
    let o = opts(Protocol::Cas, 2.0);
    exclusion(memory("cas-excl", &o), Protocol::Cas).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cas_excludes_on_files() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(Protocol::Cas, 2.0);
    let s = store::open(
        dir.path().to_str().unwrap(),
        &store::Access::default(),
        &o.timing,
    )
    .unwrap();
    exclusion(s, Protocol::Cas).await;
}

#[tokio::test(start_paused = true)]
async fn tokens_grow_and_expired_locks_are_taken_over() {
    let o = opts(Protocol::Cas, 3.0);
    let s = memory("takeover", &o);
    let a = Lock::with_store("t", s.clone(), &o);
    let b = Lock::with_store("t", s.clone(), &o);
    let now = || chrono::Utc::now().timestamp_micros() as u64;
    let before = now();
    let la = a.acquire(None).await.unwrap();
    // A fresh lockfile's first token is its writer's wall clock in microseconds: a floor
    // that only grows, so that tokens grow across a deleted lockfile too.
    assert!((before..=now()).contains(&la.token()), "{}", la.token());
    // A holder that stops renewing (crashed): its lease is not released.
    la.stop().await;
    let start = tokio::time::Instant::now();
    let lb = b.acquire(Some(Duration::from_secs(60))).await.unwrap();
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_secs(3),
        "taken over early: {waited:?}"
    );
    assert!(
        waited < Duration::from_secs(5),
        "taken over late: {waited:?}"
    );
    assert!(lb.token() > la.token());
    assert!(la.is_lost(), "the stopped holder still claims the lock");
    assert_eq!(lb.release().await.unwrap(), ReleaseStatus::Released);
    let kept = a.inspect().await.unwrap().lockfile.unwrap().token;
    assert_eq!(kept, lb.token(), "a release keeps the token");
    let lc = a.acquire(None).await.unwrap();
    assert!(lc.token() > lb.token());
}

#[tokio::test(start_paused = true)]
async fn heartbeats_keep_it_and_waiters_time_out() {
    let o = opts(Protocol::Cas, 2.0);
    let s = memory("hb", &o);
    let a = Lock::with_store("t", s.clone(), &o);
    let b = Lock::with_store("t", s.clone(), &o);
    let la = a.acquire(None).await.unwrap();
    let err = b.acquire(Some(Duration::from_secs(10))).await.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
    assert!(!la.is_lost());
    assert!(b.try_acquire().await.unwrap().is_none());
    // b never held it: its release is refused and writes nothing.
    assert!(matches!(
        b.release_unheld().await.unwrap(),
        ReleaseStatus::HeldByOther(..)
    ));
    assert!(!la.is_lost());
    assert_eq!(la.release().await.unwrap(), ReleaseStatus::Released);
    assert_eq!(la.release().await.unwrap(), ReleaseStatus::AlreadyReleased);
}

#[tokio::test(start_paused = true)]
async fn keep_alive_co_owns_and_refuses_strangers() {
    for protocol in [Protocol::Cas, Protocol::Lww] {
        let o = opts(protocol, 2.0);
        let s = memory(&format!("ka-{}", protocol.as_str()), &o);
        let err = keep_alive_on(s.clone(), "nobody", &o).await.unwrap_err();
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
        let orchestrator = Lock::with_store("t", s.clone(), &o);
        let held = orchestrator.acquire(None).await.unwrap();
        let err = keep_alive_on(s.clone(), "stranger", &o).await.unwrap_err();
        assert!(matches!(err, Error::Stolen { .. }), "{err}");
        let remote = keep_alive_on(s.clone(), orchestrator.owner(), &o)
            .await
            .unwrap();
        assert_eq!(remote.token(), held.token());
        // Both renew for many lifetimes without counting each other's writes as a steal.
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!held.is_lost(), "{:?}", held.lost_reason());
        assert!(!remote.is_lost(), "{:?}", remote.lost_reason());
        // The orchestrator dies; the remote alone keeps it past expiry.
        held.stop().await;
        drop(held);
        let waiter = Lock::with_store("t", s.clone(), &o);
        assert!(waiter.acquire(Some(Duration::from_secs(8))).await.is_err());
        remote.stop().await;
        let next = waiter.acquire(Some(Duration::from_secs(8))).await.unwrap();
        assert!(next.token() > remote.token());
        assert!(remote.is_lost());
    }
}

#[tokio::test(start_paused = true)]
async fn a_holder_whose_lock_was_taken_sees_it_lost() {
    let o = opts(Protocol::Cas, 2.0);
    let s = memory("stolen", &o);
    let a = Lock::with_store("t", s.clone(), &o);
    let la = a.acquire(None).await.unwrap();
    // Someone breaks the lock by hand (a release in a.owner's name, as `break` would).
    assert_eq!(a.release_unheld().await.unwrap(), ReleaseStatus::Released);
    let b = Lock::with_store("t", s.clone(), &o);
    let _lb = b.acquire(None).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(la.is_lost(), "{:?}", la.lost_reason());
    assert!(la.lost_reason().unwrap().contains("taken over"));
}

#[tokio::test]
async fn corrupt_lockfiles_are_reported_not_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(Protocol::Cas, 2.0);
    let lockfile = dir.path().join("lock.json");
    for body in [&b"{not json"[..], b"{}", b"[]", &vec![b'x'; 100_000]] {
        std::fs::write(&lockfile, body).unwrap();
        let s = store::open(
            dir.path().to_str().unwrap(),
            &store::Access::default(),
            &o.timing,
        )
        .unwrap();
        let lock = Lock::with_store("t", s, &o);
        let err = lock.try_acquire().await.unwrap_err();
        assert!(matches!(err, Error::InvalidLockFile { .. }), "{err}");
        assert!(err.to_string().contains("lock.json"), "{err}");
        assert_eq!(std::fs::read(&lockfile).unwrap(), body);
    }
}

/// A blocking caller's lease (driven on the shared runtime, as from Python) files its
/// heartbeat with the runtime's starter instead of spawning it at once; it is renewed all
/// the same.
#[test]
fn a_lease_taken_by_a_blocking_caller_is_renewed() {
    use blob_lock::runtime::drive;
    let o = opts(Protocol::Cas, 1.0); // a renewal every third of a second
    let s = memory("driven", &o);
    let lock = Lock::with_store("t", s.clone(), &o);
    let lease = drive(lock.acquire(None)).unwrap();
    std::thread::sleep(Duration::from_millis(2500)); // two and a half leases
    assert!(!lease.is_lost(), "{:?}", lease.lost_reason());
    let read = drive(s.read()).unwrap().unwrap();
    let body = blob_lock::LockFile::decode(&read.bytes).unwrap();
    assert_eq!(&*body.writer_id, lease.owner());
    assert!(
        body.write_count >= 5,
        "renewed {} times",
        body.write_count - 1
    );
    assert_eq!(drive(lease.release()).unwrap(), ReleaseStatus::Released);
}

/// A store whose writes are not atomic for readers (s3rver): its next `torn` reads see
/// half of the lockfile, as a read during a write in flight would.
#[derive(Debug)]
struct Torn {
    inner: Arc<dyn LockStore>,
    torn: AtomicUsize,
}

#[async_trait::async_trait]
impl LockStore for Torn {
    async fn read(&self) -> blob_lock::Result<Option<store::Snapshot>> {
        let mut snap = self.inner.read().await?;
        if let Some(s) = snap.as_mut() {
            let torn = self
                .torn
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if torn.is_ok() {
                s.bytes = s.bytes.slice(..s.bytes.len() / 2);
            }
        }
        Ok(snap)
    }
    async fn create(&self, body: bytes::Bytes) -> blob_lock::Result<store::Write> {
        self.inner.create(body).await
    }
    async fn update(
        &self,
        body: bytes::Bytes,
        expected: &store::Version,
    ) -> blob_lock::Result<store::Write> {
        self.inner.update(body, expected).await
    }
    async fn overwrite(&self, body: bytes::Bytes) -> blob_lock::Result<store::Version> {
        self.inner.overwrite(body).await
    }
    fn uri(&self) -> &str {
        self.inner.uri()
    }
    async fn conditional_writes(&self, required: bool) -> blob_lock::Result<bool> {
        self.inner.conditional_writes(required).await
    }
    fn known_conditional_writes(&self) -> Option<bool> {
        self.inner.known_conditional_writes()
    }
}

/// Under lww a half-written lockfile is a write in flight: read again, not reported as a
/// corrupt lockfile to delete by hand. Under cas (atomic stores) it is corruption.
#[tokio::test(start_paused = true)]
async fn lww_reads_a_torn_lockfile_again_and_cas_reports_it() {
    for protocol in [Protocol::Lww, Protocol::Cas] {
        let o = opts(protocol, 2.0);
        let inner = memory(&format!("torn-{}", protocol.as_str()), &o);
        let first = Lock::with_store("t", inner.clone(), &o);
        let first = first.acquire(None).await.unwrap();
        first.release().await.unwrap();
        let torn = Arc::new(Torn {
            inner,
            torn: AtomicUsize::new(3),
        });
        let lock = Lock::with_store("t", torn.clone(), &o);
        match protocol {
            Protocol::Lww => {
                let lease = lock.acquire(Some(Duration::from_secs(5))).await.unwrap();
                assert!(lease.token() > first.token());
                assert_eq!(
                    torn.torn.load(Ordering::SeqCst),
                    0,
                    "read again until whole"
                );
            }
            _ => {
                let err = lock.try_acquire().await.unwrap_err();
                assert!(matches!(err, Error::InvalidLockFile { .. }), "{err}");
            }
        }
    }
    // Bounded: a lockfile that stays unreadable is reported under lww too.
    let o = opts(Protocol::Lww, 2.0);
    let inner = memory("torn-for-good", &o);
    Lock::with_store("t", inner.clone(), &o)
        .acquire(None)
        .await
        .unwrap();
    let torn = Arc::new(Torn {
        inner,
        torn: AtomicUsize::new(usize::MAX),
    });
    let started = tokio::time::Instant::now();
    let err = Lock::with_store("t", torn, &o)
        .acquire(None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidLockFile { .. }), "{err}");
    // After a read sent the longest request after the first unreadable one (the clock is
    // paused: only the sleeps between reads pass).
    let waited = started.elapsed();
    assert!(waited >= o.timing.longest_request(), "{waited:?}");
    assert!(
        waited <= o.timing.longest_request() + o.timing.poll_min,
        "{waited:?}"
    );
}

/// A release finds the lock taken after us and released since: the lock was taken from us
/// (a loss, by a takeover), said as such, the later holder named as gone. Without a lease in
/// hand there is no "after us": nobody holds it.
#[tokio::test(start_paused = true)]
async fn a_release_after_a_later_acquisition_released_says_the_lock_was_taken() {
    let o = opts(Protocol::Cas, 2.0);
    let s = memory("released-by-other", &o);
    let a = Lock::with_store("t", s.clone(), &o);
    let la = a.acquire(None).await.unwrap();
    la.stop().await; // a crashed holder: its lease expires
    let b = Lock::with_store("t", s.clone(), &o);
    let lb = b.acquire(None).await.unwrap();
    assert_eq!(lb.release().await.unwrap(), ReleaseStatus::Released);
    match la.release().await.unwrap() {
        ReleaseStatus::HeldByOther(who, token) => {
            assert!(who.ends_with(", released since"), "{who}");
            assert_eq!(token, lb.token());
        }
        other => panic!("{other:?}"),
    }
    assert!(la.lost_reason().unwrap().contains("released since"));
    assert_eq!(
        a.release_unheld().await.unwrap(),
        ReleaseStatus::AlreadyReleased
    );
}

/// An interrupted acquisition owes a release; the lock's next acquisition (the same owner
/// id, which the release would match) waits for it instead of being released by it.
#[tokio::test(start_paused = true)]
async fn an_owed_cleanup_runs_before_the_next_acquisition_never_after() {
    let o = opts(Protocol::Cas, 2.0);
    let s = memory("owed-cleanup", &o);
    let lock = Lock::with_store("t", s.clone(), &o);
    // An acquisition that got the lock just as its caller went away.
    let abandoned = lock.acquire(None).await.unwrap();
    let first = abandoned.token();
    let owed = lock.owe_cleanup();
    let next = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire(Some(Duration::from_secs(60))).await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !next.is_finished(),
        "the next acquisition waits for the cleanup"
    );
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "so does a single attempt"
    );
    owed.give_back(Arc::new(abandoned));
    let held = next.await.unwrap().unwrap();
    assert!(
        held.token() > first,
        "acquired after the release, not the abandoned lease"
    );
    tokio::time::sleep(Duration::from_secs(5)).await; // renewals run; nothing releases it
    assert!(!held.is_lost());
    let seen = lock.inspect().await.unwrap();
    assert_eq!(
        seen.lockfile.map(|lf| (lf.token, lf.is_released())),
        Some((held.token(), false))
    );
    assert_eq!(held.release().await.unwrap(), ReleaseStatus::Released);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_once_lands_once_and_refuses_what_is_not_an_object() {
    let timing = LockOptions::new(30.0).unwrap().timing;
    let none = store::Access::default();
    let dir = tempfile::tempdir().unwrap();
    let file = format!("{}/memo/result", dir.path().display());
    for uri in [file.as_str(), "memory://write-once/memo/result"] {
        let once = |data: &'static [u8]| {
            blob_lock::write_once(uri, bytes::Bytes::from_static(data), &none, &timing)
        };
        assert!(once(b"first").await.unwrap(), "{uri}");
        assert!(!once(b"second").await.unwrap(), "{uri}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"first");
    let folder = dir.path().join("memo").display().to_string();
    for uri in [
        folder.as_str(),
        "memory://write-once",
        "memory://write-once/memo/",
    ] {
        let refused = blob_lock::write_once(uri, bytes::Bytes::new(), &none, &timing).await;
        assert!(
            matches!(&refused, Err(Error::InvalidArgument(m)) if m.contains("not an object")),
            "{uri}: {refused:?}"
        );
    }
}

/// Waits cut into single attempts, each through a fresh lock object (as mops's lease waiter
/// polls `acquire(block=0)`), take over an abandoned lock once it has been unchanged for
/// `expire`, as one long wait would: the process remembers since when it has seen the
/// lockfile's version. (Each attempt alone has watched nothing; without that memory only the
/// wall clock, after `expire + clock_skew`, would let one in.)
#[tokio::test(start_paused = true)]
async fn repeated_single_attempts_take_over_after_expire_as_a_wait_does() {
    let o = opts(Protocol::Cas, 2.0);
    let uri = "memory://single-attempts/lock";
    let holder = Lock::new(uri, &o).unwrap();
    let lease = holder.acquire(None).await.unwrap();
    lease.stop().await; // the holder is gone: no more renewals, no release
    let began = tokio::time::Instant::now();
    let taken = loop {
        if let Some(lease) = Lock::new(uri, &o).unwrap().try_acquire().await.unwrap() {
            break lease;
        }
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "never taken over"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(4),
        "taken over after {waited:?}, not after about the 2 s expiry"
    );
    assert!(taken.token() > lease.token());
}

/// A store that cannot answer whether it honours conditional writes at first (its probe
/// failed), and then says it does not: counts how often it is asked.
#[derive(Debug)]
struct Undecided {
    inner: Arc<dyn LockStore>,
    asked: AtomicUsize,
}

#[async_trait::async_trait]
impl LockStore for Undecided {
    async fn read(&self) -> blob_lock::Result<Option<store::Snapshot>> {
        self.inner.read().await
    }
    async fn create(&self, body: bytes::Bytes) -> blob_lock::Result<store::Write> {
        self.inner.create(body).await
    }
    async fn update(
        &self,
        body: bytes::Bytes,
        expected: &store::Version,
    ) -> blob_lock::Result<store::Write> {
        self.inner.update(body, expected).await
    }
    async fn overwrite(&self, body: bytes::Bytes) -> blob_lock::Result<store::Version> {
        self.inner.overwrite(body).await
    }
    fn uri(&self) -> &str {
        self.inner.uri()
    }
    async fn conditional_writes(&self, _required: bool) -> blob_lock::Result<bool> {
        match self.asked.fetch_add(1, Ordering::SeqCst) {
            0 => Err(Error::Store {
                uri: self.uri().to_string(),
                message: "the probe got no answer".into(),
                kind: blob_lock::StoreErrorKind::Permanent,
            }),
            _ => Ok(false),
        }
    }
    fn known_conditional_writes(&self) -> Option<bool> {
        (self.asked.load(Ordering::SeqCst) > 1).then_some(false)
    }
}

/// An auto lock asks its store which protocol to run until the store has decided (a probe
/// that failed decides nothing), and then keeps that protocol without asking again.
#[tokio::test(start_paused = true)]
async fn an_auto_lock_asks_its_store_until_it_has_decided_then_never_again() {
    let mut o = LockOptions::new(2.0).unwrap();
    o.protocol = None;
    let store = Arc::new(Undecided {
        inner: memory("undecided", &o),
        asked: AtomicUsize::new(0),
    });
    let lock = Lock::with_store("t", store.clone(), &o);
    let err = lock.try_acquire().await.unwrap_err();
    assert!(matches!(err, Error::Store { .. }), "{err}");
    for _ in 0..3 {
        let lease = lock.try_acquire().await.unwrap().expect("free");
        assert_eq!(lease.release().await.unwrap(), ReleaseStatus::Released);
    }
    assert_eq!(store.asked.load(Ordering::SeqCst), 2, "asked until decided");
    let lf = lock.inspect().await.unwrap().lockfile.expect("a lockfile");
    assert_eq!(
        lf.protocol.as_deref(),
        Some("lww"),
        "auto on this store is lww"
    );
}

/// A store whose next `lose` creates and updates land but lose their answer: the writer
/// gets a transient error (a timeout after sending).
#[derive(Debug)]
struct AnswersLost {
    inner: Arc<dyn LockStore>,
    lose: AtomicUsize,
}

impl AnswersLost {
    fn lost<T>(&self, landed: blob_lock::Result<T>) -> blob_lock::Result<T> {
        // The wall clock's floor moves on before the next write (the paused tokio clock
        // holds back no real time): a confirmation then raises the token.
        std::thread::sleep(Duration::from_millis(2));
        let lose =
            (self.lose).fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        match (landed, lose) {
            (Ok(_), Ok(_)) => Err(Error::Store {
                uri: self.uri().to_string(),
                message: "timed out after sending".into(),
                kind: blob_lock::StoreErrorKind::Transient,
            }),
            (other, _) => other,
        }
    }
}

#[async_trait::async_trait]
impl LockStore for AnswersLost {
    async fn read(&self) -> blob_lock::Result<Option<store::Snapshot>> {
        self.inner.read().await
    }
    async fn create(&self, body: bytes::Bytes) -> blob_lock::Result<store::Write> {
        self.lost(self.inner.create(body).await)
    }
    async fn update(
        &self,
        body: bytes::Bytes,
        expected: &store::Version,
    ) -> blob_lock::Result<store::Write> {
        self.lost(self.inner.update(body, expected).await)
    }
    async fn overwrite(&self, body: bytes::Bytes) -> blob_lock::Result<store::Version> {
        self.inner.overwrite(body).await
    }
    fn uri(&self) -> &str {
        self.inner.uri()
    }
    async fn conditional_writes(&self, required: bool) -> blob_lock::Result<bool> {
        self.inner.conditional_writes(required).await
    }
    fn known_conditional_writes(&self) -> Option<bool> {
        self.inner.known_conditional_writes()
    }
}

/// An acquisition's create lands unanswered; the next attempt finds it and confirms it with
/// its token raised to the wall clock's floor, and that renewal lands unanswered too. The
/// attempt after finds the raised token: its own write, held at once, not another holder's
/// to wait out for a lifetime (the wait would end in a timeout here, and release nothing).
#[tokio::test(start_paused = true)]
async fn an_acquisition_never_waits_behind_its_own_confirmation() {
    let o = opts(Protocol::Cas, 2.0);
    let store = Arc::new(AnswersLost {
        inner: memory("raised-token", &o),
        lose: AtomicUsize::new(2),
    });
    let lock = Lock::with_store("t", store.clone(), &o);
    let lease = (lock.acquire(Some(Duration::from_secs(1))).await)
        .expect("acquired within the timeout, not waiting behind itself");
    assert_eq!(
        store.lose.load(Ordering::SeqCst),
        0,
        "both answers were lost"
    );
    let found = blob_lock::LockFile::decode(&store.inner.read().await.unwrap().unwrap().bytes);
    assert_eq!(found.unwrap().token, lease.token());
    assert_eq!(lease.release().await.unwrap(), ReleaseStatus::Released);
}
