//! A semaphore's configuration (`PREFIX/semaphore.json`) where it goes wrong: unreadable
//! (refused with the fix, a permanent store error, and written over by `set_slots`), lost
//! behind more than a page of other locks under the prefix (still found lost), read while a
//! write is in flight on a store whose writes are not atomic (read again, as lww reads a
//! lockfile), and first written by first-comers where creates are not conditional (each
//! waits by lww's settle rule, on tokio's paused clock: the same schedule every run).

use async_trait::async_trait;
use blob_lock::semaphore::config::CONFIG_NAME;
use blob_lock::semaphore::Opener;
use blob_lock::store::{self, LockStore, Snapshot, Version, Write};
use blob_lock::{Error, LockOptions, Protocol, Semaphore};
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn opts(expire: f64) -> LockOptions {
    let mut o = LockOptions::new(expire).unwrap();
    o.protocol = Some(Protocol::Cas);
    o
}

/// Whether `e` is the permanent store error at `PREFIX/semaphore.json` that names the fix.
fn names_the_fix(e: &Error, prefix: &str) -> bool {
    matches!(e, Error::Store { uri, kind: blob_lock::StoreErrorKind::Permanent, message }
        if *uri == format!("{prefix}/semaphore.json")
            && message.contains(&format!("`blob-lock slots {prefix} N`")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_configuration_is_refused_with_the_fix_and_set_slots_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("quota");
    let prefix = prefix.to_str().unwrap();
    let s = Semaphore::new(prefix, 2, &opts(2.0)).unwrap();
    s.acquire(None).await.unwrap().release().await.unwrap();
    let config = dir.path().join("quota/semaphore.json");
    std::fs::write(&config, b"{\"semaphore\": 1, \"slo").unwrap();
    let other = Semaphore::new(prefix, 5, &opts(2.0)).unwrap();
    for e in [
        other
            .acquire(Some(Duration::from_secs(5)))
            .await
            .unwrap_err(),
        other.try_acquire().await.unwrap_err(),
        other.stored().await.unwrap_err(),
    ] {
        assert!(names_the_fix(&e, prefix), "{e:?}");
        assert!(e.to_string().contains("not JSON"), "{e}");
    }
    assert_eq!(std::fs::read(&config).unwrap(), b"{\"semaphore\": 1, \"slo");
    // The fix the error names: the number stored again, over what was there.
    assert_eq!(other.set_slots(3).await.unwrap().slots, 3);
    let permit = other.acquire(Some(Duration::from_secs(5))).await.unwrap();
    assert!(permit.slot() < 3);
    permit.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_configuration_is_found_behind_more_than_a_page_of_other_locks() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("quota");
    let prefix = prefix.to_str().unwrap();
    let s = Semaphore::new(prefix, 2, &opts(2.0)).unwrap();
    s.acquire(None).await.unwrap().release().await.unwrap();
    // 300 locks that list before `slot-0`: more than any one page of the listing.
    for i in 0..300 {
        let lock = blob_lock::Lock::new(&format!("{prefix}/a-{i:03}"), &opts(2.0)).unwrap();
        lock.acquire(None).await.unwrap().release().await.unwrap();
    }
    std::fs::remove_file(dir.path().join("quota/semaphore.json")).unwrap();
    let e = Semaphore::new(prefix, 5, &opts(2.0))
        .unwrap()
        .acquire(Some(Duration::from_secs(5)))
        .await
        .unwrap_err();
    assert!(names_the_fix(&e, prefix), "{e:?}");
    assert!(
        !dir.path().join("quota/semaphore.json").exists(),
        "written again"
    );
}

/// A store in front of another: its creates land whatever is there (conditions ignored,
/// as s3rver does), its next `torn` reads see half of the object (a read during a write in
/// flight), and each request takes `latency` before it lands and as long to be answered.
#[derive(Debug)]
struct Careless {
    inner: Arc<dyn LockStore>,
    atomic: bool,
    torn: AtomicUsize,
    latency: Duration,
}

impl Careless {
    fn new(inner: Arc<dyn LockStore>, atomic: bool, latency: Duration) -> Arc<Careless> {
        Arc::new(Careless {
            inner,
            atomic,
            torn: AtomicUsize::new(0),
            latency,
        })
    }

    async fn there<T>(&self, request: impl std::future::Future<Output = T>) -> T {
        tokio::time::sleep(self.latency).await;
        let landed = request.await;
        tokio::time::sleep(self.latency).await;
        landed
    }
}

#[async_trait]
impl LockStore for Careless {
    async fn read(&self) -> blob_lock::Result<Option<Snapshot>> {
        let mut snap = self.there(self.inner.read()).await?;
        if let Some(s) = snap.as_mut() {
            let dec = |n: usize| n.checked_sub(1);
            if self
                .torn
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, dec)
                .is_ok()
            {
                s.bytes = s.bytes.slice(..s.bytes.len() / 2);
            }
        }
        Ok(snap)
    }
    async fn create(&self, body: Bytes) -> blob_lock::Result<Write> {
        match self.atomic {
            true => self.there(self.inner.create(body)).await,
            false => Ok(Write::Done(self.overwrite(body).await?)),
        }
    }
    async fn update(&self, body: Bytes, expected: &Version) -> blob_lock::Result<Write> {
        self.there(self.inner.update(body, expected)).await
    }
    async fn overwrite(&self, body: Bytes) -> blob_lock::Result<Version> {
        self.there(self.inner.overwrite(body)).await
    }
    fn uri(&self) -> &str {
        self.inner.uri()
    }
    async fn conditional_writes(&self, _required: bool) -> blob_lock::Result<bool> {
        Ok(self.atomic)
    }
    fn known_conditional_writes(&self) -> Option<bool> {
        Some(self.atomic)
    }
}

/// Each process's semaphore at `name` asking for `asked` slots: its configuration through
/// `config`, its slots in memory, each request to them as far away as the configuration.
fn semaphore(name: &str, asked: usize, config: Arc<Careless>, o: &LockOptions) -> Semaphore {
    let (prefix, timing) = (format!("memory://{name}"), o.timing);
    let slots = prefix.clone();
    let open: Opener = Arc::new(move |object: &str| {
        if object == CONFIG_NAME {
            return config.clone() as Arc<dyn LockStore>;
        }
        let uri = format!("{slots}/{object}");
        let slot = store::open(&uri, &store::Access::default(), &timing).unwrap();
        Careless::new(slot, true, config.latency)
    });
    Semaphore::with_stores(&prefix, asked, o, open).unwrap()
}

fn memory_object(name: &str, o: &LockOptions) -> Arc<dyn LockStore> {
    let uri = format!("memory://{name}/{CONFIG_NAME}");
    let timeout = o.timing.request_timeout();
    store::open_object(&uri, &store::Access::default(), timeout).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_configuration_read_mid_write_is_read_again_where_writes_are_not_atomic() {
    let o = opts(2.0);
    for atomic in [false, true] {
        let name = format!("sem-torn-{atomic}");
        let config = Careless::new(memory_object(&name, &o), atomic, Duration::ZERO);
        let s = semaphore(&name, 2, config.clone(), &o);
        assert_eq!(s.configuration().await.unwrap().slots, 2);
        config.torn.store(3, Ordering::SeqCst);
        let read = s.configuration().await;
        match atomic {
            // s3rver: half of a write in flight, which lands; the number is read again.
            false => assert_eq!(read.unwrap().slots, 2),
            // An atomic store never shows half a write: what it shows is what is there.
            true => {
                let e = read.unwrap_err();
                assert!(names_the_fix(&e, &format!("memory://{name}")), "{e:?}");
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn first_comers_where_creates_are_not_conditional_wait_by_lwws_rule() {
    // Every request lands 0.1 s after it is sent and is answered 0.1 s later. The first
    // comer's read, look for slots (2) and create take 0.8 s; the second starts 0.3 s
    // later, reads before the first's write landed (0.7 s), and its write lands at 1.2 s:
    // after the first's settle asked for (0.1 s at expire 2, so it read back at 0.9 s),
    // within twice what the first's own took (it reads back at 2.4 s).
    let o = opts(2.0);
    let name = "sem-settle";
    let config = Careless::new(memory_object(name, &o), false, Duration::from_millis(100));
    let first = semaphore(name, 2, config.clone(), &o);
    let second = semaphore(name, 3, config.clone(), &o);
    let early = tokio::spawn(async move { first.configuration().await.unwrap().slots });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let late = second.configuration().await.unwrap().slots;
    let early = early.await.unwrap();
    let stored = config.inner.read().await.unwrap().unwrap();
    let stored: serde_json::Value = serde_json::from_slice(&stored.bytes).unwrap();
    assert_eq!(
        (early, late),
        (3, 3),
        "the first-comers used different numbers: {stored}"
    );
}
