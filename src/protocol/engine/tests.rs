//! The engine's reads of a lockfile that a write keeps torn (s3rver's writes are not atomic
//! for readers).

use super::*;
use crate::store::{Access, Snapshot};
use crate::timing::TimingSpec;
use async_trait::async_trait;

/// Expire 2 s, the other settings their defaults.
fn timing() -> Timing {
    Timing::new(TimingSpec {
        expire: 2.0,
        heartbeat: None,
        settle: None,
        clock_skew: None,
    })
    .unwrap()
}

/// An lww engine on `store`, as a lock makes it.
fn lww(store: Arc<dyn LockStore>) -> Engine {
    Engine {
        store,
        protocol: Protocol::Lww,
        timing: Arc::new(timing()),
        clock: crate::clock::system(),
        last_release: Default::default(),
        watched: Default::default(),
        wake: None,
        labels: None,
        fence: Default::default(),
    }
}

/// A store whose writes are not atomic for readers (s3rver), holding a lockfile that a
/// write is rewriting for `in_flight` from the test's start: a read answered before
/// then sees half of it. Each read takes `read_time`, answered as it is sent.
#[derive(Debug)]
struct WriteInFlight {
    inner: Arc<dyn LockStore>,
    until: Instant,
    read_time: Duration,
}

#[async_trait]
impl LockStore for WriteInFlight {
    async fn read(&self) -> Result<Option<Snapshot>> {
        let torn = Instant::now() < self.until;
        let mut snap = self.inner.read().await?;
        tokio::time::sleep(self.read_time).await;
        if let Some(s) = snap.as_mut().filter(|_| torn) {
            s.bytes = s.bytes.slice(..s.bytes.len() / 2);
        }
        Ok(snap)
    }
    async fn create(&self, body: Bytes) -> Result<Write> {
        self.inner.create(body).await
    }
    async fn update(&self, body: Bytes, expected: &Version) -> Result<Write> {
        self.inner.update(body, expected).await
    }
    async fn overwrite(&self, body: Bytes) -> Result<Version> {
        self.inner.overwrite(body).await
    }
    fn uri(&self) -> &str {
        self.inner.uri()
    }
    async fn conditional_writes(&self, _required: bool) -> Result<bool> {
        Ok(false)
    }
    fn known_conditional_writes(&self) -> Option<bool> {
        Some(false)
    }
}

/// An lww engine (expire 2 s) over a lockfile that a write keeps torn for `in_flight`,
/// each read taking `read_time`.
async fn torn_for(name: &str, in_flight: Duration, read_time: Duration) -> Engine {
    let uri = format!("memory://{name}/lock");
    let inner = crate::store::open(&uri, &Access::default(), &timing()).unwrap();
    let written = lww(inner.clone());
    let body = written.body(&Arc::from("holder"), 1);
    written
        .overwrite_lockfile(Bytes::from(body.encode()))
        .await
        .unwrap();
    lww(Arc::new(WriteInFlight {
        inner,
        until: Instant::now() + in_flight,
        read_time,
    }))
}

/// A write may be in flight as long as the longest request of the lock (its timeout
/// follows a slow store's latency up to `held_for`), and on a loaded store each read is
/// slow too: the lockfile is read again until a read sent after that, never reported
/// on the strength of the reads' own time. (Bounded by one request timeout counted at
/// the end of each read, it was reported after a second with the write still in flight,
/// and with reads of a third of a second, on the fourth read.)
#[tokio::test(start_paused = true)]
async fn an_lww_read_waits_out_the_longest_write_in_flight() {
    let timing = timing();
    let longest = timing.longest_request();
    assert!(longest > timing.request_timeout(), "{timing:?}");
    for read_time in [Duration::ZERO, timing.request_timeout() / 3] {
        let engine = torn_for("in-flight", longest, read_time).await;
        let read = engine.read().await;
        let (lf, _) = read.unwrap().expect("a lockfile");
        assert_eq!(&*lf.writer_id, "holder");
        assert_eq!(lf.token, 1);
    }
}

/// Still unreadable in a read sent after the longest write: reported, saying so; under
/// cas at once.
#[tokio::test(start_paused = true)]
async fn a_lockfile_unreadable_past_the_longest_write_is_reported() {
    let forever = Duration::from_secs(86_400);
    let engine = torn_for("torn-for-good", forever, Duration::ZERO).await;
    let err = engine.read().await.unwrap_err();
    let Error::InvalidLockFile { reason, .. } = &err else {
        panic!("{err}")
    };
    assert!(reason.contains("not JSON"), "{reason}");
    assert!(
        reason.contains("after the first unreadable read"),
        "{reason}"
    );
    let cas = torn_for("torn-cas", forever, Duration::ZERO)
        .await
        .with_protocol(Protocol::Cas);
    let err = cas.read().await.unwrap_err();
    assert!(matches!(err, Error::InvalidLockFile { .. }), "{err}");
}
