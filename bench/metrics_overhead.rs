//! What the metrics cost, beside what they measure: `cargo run --release --example
//! metrics_overhead`. Times the recording an acquire+release makes (an acquisition, its
//! requests, the hold) and the one a heartbeat makes (a renewal, its request), each many
//! times on one thread and then from two threads at once (contended atomics), and prints
//! them beside an uncontended acquire+release on memory:// timed in the same run.

use blob_lock::metrics::{self, Acquired, Request};
use blob_lock::{runtime::runtime, Lock, LockOptions};
use std::time::{Duration, Instant};

const N: u32 = 1_000_000;

fn per_call(threads: u32, record: fn()) -> Duration {
    let began = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                for _ in 0..N {
                    record();
                }
            });
        }
    });
    began.elapsed() / N
}

fn write_done() -> blob_lock::Result<blob_lock::store::Write> {
    Ok(blob_lock::store::Write::Conflict { resent: false })
}

/// What one acquire+release records: an acquisition, a read, a write, a release write,
/// the hold.
fn acquire_release() {
    let rt = futures_ready(metrics::request(Request::Read, async { write_done() }));
    std::hint::black_box(rt.is_ok());
    let w = futures_ready(metrics::request(Request::Create, async { write_done() }));
    std::hint::black_box(w.is_ok());
    let r = futures_ready(metrics::request(Request::Update, async { write_done() }));
    std::hint::black_box(r.is_ok());
    metrics::acquisition(Acquired::Acquired, Duration::from_micros(150));
    metrics::released(Duration::from_millis(40));
}

/// What one heartbeat records: its write and the renewal.
fn heartbeat() {
    let w = futures_ready(metrics::request(Request::Update, async { write_done() }));
    std::hint::black_box(w.is_ok());
    metrics::renewed(Duration::from_millis(3), Duration::from_secs(20));
}

/// Polls a future that is ready at once.
fn futures_ready<T>(f: impl std::future::Future<Output = T>) -> T {
    let mut f = std::pin::pin!(f);
    let waker = std::task::Waker::noop();
    match f.as_mut().poll(&mut std::task::Context::from_waker(waker)) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => unreachable!("ready at once"),
    }
}

fn main() {
    let options = LockOptions::new(30.0).unwrap();
    let lock = Lock::new("memory://metrics-overhead/lock", &options).unwrap();
    let rounds = 20_000;
    let lock_time = runtime().block_on(async {
        let began = Instant::now();
        for _ in 0..rounds {
            lock.acquire(None).await.unwrap().release().await.unwrap();
        }
        began.elapsed() / rounds
    });
    println!("acquire+release on memory://, the whole of it: {lock_time:?}");
    for (what, record) in [
        ("acquire+release", acquire_release as fn()),
        ("heartbeat", heartbeat as fn()),
    ] {
        let one = per_call(1, record);
        let two = per_call(2, record);
        println!(
            "{what}'s recording: {one:?} on one thread, {two:?} with two threads at once ({:.2}% of the acquire+release above)",
            one.as_secs_f64() / lock_time.as_secs_f64() * 100.0
        );
    }
}
