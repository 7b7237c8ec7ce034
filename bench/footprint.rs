//! Where a held lock's memory goes, from the Rust side: `cargo run --release --example
//! footprint [LOCKS]`. Holds LOCKS locks (10,000) on memory:// for three heartbeats and
//! prints the heap bytes still allocated per lock, by allocation size, after `Lock::new`
//! and after acquiring, then the growth of anonymous resident memory per lock. A counting
//! allocator sees every Rust allocation; Python's objects are not in these figures (see
//! `make bench` for the whole process).

#![cfg_attr(feature = "python", allow(dead_code, unused_imports))]

use blob_lock::{runtime::drive, Lock, LockOptions};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::time::Duration;

/// Allocations by size (the last slot takes every larger one): live count and bytes.
const SIZES: usize = 8192;
static COUNT: [AtomicI64; SIZES] = [const { AtomicI64::new(0) }; SIZES];
static BYTES: AtomicI64 = AtomicI64::new(0);

struct Counting;

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        COUNT[layout.size().min(SIZES - 1)].fetch_add(1, Relaxed);
        BYTES.fetch_add(layout.size() as i64, Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        COUNT[layout.size().min(SIZES - 1)].fetch_sub(1, Relaxed);
        BYTES.fetch_sub(layout.size() as i64, Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

// The python feature brings its own allocator (mimalloc); this one must see every
// allocation, so the example counts only without it (`cargo run`'s default).
#[cfg(not(feature = "python"))]
#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn counts() -> Vec<i64> {
    COUNT.iter().map(|c| c.load(Relaxed)).collect()
}

fn anon_kb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// Prints what `after` holds beyond `before`, per lock: every size that at least half of
/// the locks hold one more of (one-off allocations, such as a vector of all locks, are left
/// out of the list but counted in the total).
fn report(what: &str, before: (&[i64], i64), after: (&[i64], i64), locks: usize) {
    let n = locks as f64;
    println!(
        "{what}: {:.0} bytes per lock",
        (after.1 - before.1) as f64 / n
    );
    let mut rows: Vec<(usize, f64)> = (0..SIZES)
        .map(|s| (s, (after.0[s] - before.0[s]) as f64 / n))
        .filter(|(_, per)| per.abs() >= 0.5)
        .collect();
    rows.sort_by(|a, b| (b.0 as f64 * b.1).total_cmp(&(a.0 as f64 * a.1)));
    for (size, per) in rows {
        println!("  {size:>5} B x {per:.2} = {:>4.0} B", size as f64 * per);
    }
}

fn main() {
    if cfg!(feature = "python") {
        eprintln!("footprint counts allocations only in a build without the python feature");
        std::process::exit(2);
    }
    let locks: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("LOCKS is a number"))
        .unwrap_or(10_000);
    let options = LockOptions::new(3.0).expect("valid expire");
    let warm = Lock::new("memory://footprint/warm", &options).expect("a memory URI");
    // `drive`, as the Python bindings' blocking calls do: heartbeats on the shared runtime.
    drive(async {
        let lease = warm.try_acquire().await.unwrap().expect("free");
        lease.release().await.unwrap();
    });

    let (anon0, c0, b0) = (anon_kb(), counts(), BYTES.load(Relaxed));
    let all: Vec<Lock> = (0..locks)
        .map(|i| Lock::new(&format!("memory://footprint/{i}"), &options).expect("a memory URI"))
        .collect();
    let (c1, b1) = (counts(), BYTES.load(Relaxed));
    let leases = drive(async {
        let mut leases = Vec::with_capacity(all.len());
        for lock in &all {
            leases.push(lock.try_acquire().await.unwrap().expect("free"));
        }
        leases
    });
    std::thread::sleep(Duration::from_secs(3)); // three heartbeats (expire 3 s)
    let (c2, b2, anon2) = (counts(), BYTES.load(Relaxed), anon_kb());

    report("Lock::new", (&c0, b0), (&c1, b1), locks);
    report(
        "acquired, after three heartbeats",
        (&c1, b1),
        (&c2, b2),
        locks,
    );
    println!(
        "resident anonymous memory: {:.0} bytes per lock",
        (anon2 - anon0) * 1024.0 / locks as f64
    );
    let lost = leases.iter().filter(|l| l.is_lost()).count();
    println!("{} held, {lost} lost", leases.len() - lost);
}
