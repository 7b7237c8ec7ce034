//! The four drafts of the cautionary tale about locks on blob stores without strong
//! consistency or conditional writes, each run on a scripted two-contender schedule that
//! breaks it (two owners hold the lock at once), and blob-lock's cas protocol on the same
//! schedule, which does not break. The drafts are written here only to be broken; the cas
//! side is the real code.
//!
//! Each schedule: contenders A and B, each with exact latencies for the legs of its first
//! requests (out and back), a start time, a wall-clock offset, and a lag of reads and
//! listings behind writes (an eventually consistent store).

mod sim;

use blob_lock::clock::DriftingClock;
use blob_lock::store::LockStore;
use blob_lock::{Lock, LockFile, Protocol};
use sim::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

const HOLD: Duration = Duration::from_millis(600);

struct Contender {
    name: &'static str,
    start: Duration,
    legs: Vec<Duration>,
    wall_offset_ms: i64,
}

struct Schedule {
    a: Contender,
    b: Contender,
    lag: Duration,
}

#[derive(Clone, Copy, Debug)]
enum Draft {
    ReadThenWrite,
    WriteThenReadBack,
    SiblingsAsConflict,
    LowestTimestampWins,
    Cas,
}

/// Sibling objects `lock/<name>` for the drafts that list a folder; listings lag writes by
/// the schedule's lag.
#[derive(Default)]
struct Siblings(Mutex<Vec<(String, f64, Instant, bool)>>);

fn process(world: &Arc<World>, c: &Contender, lag: Duration) -> Process {
    let faults = Faults {
        stale_for: lag,
        exact_lag: true,
        crashes: false,
        latency: ms(5),
        ..Faults::of(Mode::Healthy)
    };
    Process {
        world: world.clone(),
        name: c.name.to_string(),
        clock: Arc::new(DriftingClock::new(
            1.0,
            world.wall_base,
            chrono::Duration::milliseconds(c.wall_offset_ms),
            7,
        )),
        pauses: Default::default(),
        faults,
        seed: 7,
        watched: Default::default(),
        receipts: Default::default(),
    }
}

async fn believe_until(world: &World, owner: &str, token: u64, until: Instant) {
    while Instant::now() < until {
        world.event(Event::Belief {
            owner: owner.to_string(),
            token,
            at: world.t(),
        });
        tokio::time::sleep(ms(20)).await;
    }
}

fn body(p: &Process) -> bytes::Bytes {
    let lf = LockFile::acquired(
        &p.name,
        Duration::from_secs(30),
        0,
        Protocol::Lww.as_str(),
        p.clock.wall(),
    );
    bytes::Bytes::from(lf.encode())
}

async fn free(store: &NodeStore) -> bool {
    match store.read().await.unwrap() {
        None => true,
        Some(s) => LockFile::decode(&s.bytes).map_or(true, |lf| lf.is_released()),
    }
}

async fn contend(p: Process, c: &Contender, draft: Draft, siblings: Arc<Siblings>, lag: Duration) {
    tokio::time::sleep(c.start).await;
    let store = p.scripted_store(1, &c.legs);
    let world = p.world.clone();
    let held = match draft {
        Draft::ReadThenWrite => {
            // Read; if free, write our id: held.
            if free(&store).await {
                store.overwrite(body(&p)).await.unwrap();
                true
            } else {
                false
            }
        }
        Draft::WriteThenReadBack => {
            // Read; if free, write our id, read it back: ours means held.
            if free(&store).await {
                store.overwrite(body(&p)).await.unwrap();
                let back = store.read().await.unwrap().unwrap();
                *LockFile::decode(&back.bytes).unwrap().writer_id == *p.name
            } else {
                false
            }
        }
        Draft::SiblingsAsConflict | Draft::LowestTimestampWins => {
            // Write a sibling lock/<name> (with our wall time), list the folder.
            let stamp = p.clock.wall().timestamp_micros() as f64 / 1e6;
            store.travel().await;
            siblings
                .0
                .lock()
                .unwrap()
                .push((p.name.clone(), stamp, Instant::now(), false));
            store.travel().await;
            store.travel().await;
            let listed: Vec<(String, f64)> = siblings
                .0
                .lock()
                .unwrap()
                .iter()
                .filter(|(_, _, at, gone)| *at + lag <= Instant::now() && !gone)
                .map(|(n, s, _, _)| (n.clone(), *s))
                .collect();
            store.travel().await;
            world.log(&p.name, format!("lists {listed:?}"));
            match draft {
                // Any sibling but ours is a conflict.
                Draft::SiblingsAsConflict => listed.iter().all(|(n, _)| *n == p.name),
                // The lowest timestamp wins.
                _ => listed.iter().all(|(n, s)| *n == p.name || *s > stamp),
            }
        }
        Draft::Cas => {
            let lock = Lock::with_store("sim", store.clone(), &p.options(Protocol::Cas))
                .with_owner(p.name.clone());
            let lease = lock.acquire(Some(Duration::from_secs(60))).await.unwrap();
            world.log(&p.name, format!("acquired token {}", lease.token()));
            world.event(Event::Acquired {
                owner: p.name.clone(),
                token: lease.token(),
                at: world.t(),
            });
            p.hold(
                &lease,
                Instant::now() + HOLD,
                &mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1),
                false,
            )
            .await;
            lease.release().await.unwrap();
            world.log(&p.name, "released");
            return;
        }
    };
    world.log(&p.name, if held { "holds the lock" } else { "backs off" });
    if held {
        believe_until(&world, &p.name, 0, Instant::now() + HOLD).await;
    }
}

fn run(s: &Schedule, draft: Draft) -> (Vec<String>, Vec<String>) {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(async {
            let world = World::new();
            let siblings = Arc::new(Siblings::default());
            let (pa, pb) = (process(&world, &s.a, s.lag), process(&world, &s.b, s.lag));
            tokio::join!(
                contend(pa, &s.a, draft, siblings.clone(), s.lag),
                contend(pb, &s.b, draft, siblings.clone(), s.lag)
            );
            let events = world.events.lock().unwrap().clone();
            let acquired = events
                .iter()
                .filter(|e| matches!(e, Event::Acquired { .. }))
                .count();
            let mut v = check(&events, Mode::Faulty);
            if matches!(draft, Draft::Cas) && acquired != 2 {
                v.push(format!("cas: {acquired} of 2 contenders acquired"));
            }
            let trace = world.trace.lock().unwrap().clone();
            (v, trace)
        })
}

fn breaks_and_cas_survives(s: Schedule, draft: Draft) {
    let (v, trace) = run(&s, draft);
    assert!(
        v.iter().any(|x| x.contains("both held")),
        "{draft:?} did not show its failure:\n{}",
        trace.join("\n")
    );
    println!("{draft:?}: {}", v[0]);
    let (v, trace) = run(&s, Draft::Cas);
    assert!(
        v.is_empty(),
        "cas broke on the schedule of {draft:?}: {v:?}\n{}",
        trace.join("\n")
    );
}

fn legs(v: &[u64]) -> Vec<Duration> {
    v.iter().map(|&x| ms(x)).collect()
}

/// Both read "free" before either write lands; both write; both hold.
#[test]
fn draft_1_read_then_write() {
    breaks_and_cas_survives(
        Schedule {
            a: Contender {
                name: "A",
                start: ms(0),
                legs: legs(&[5, 5, 5, 5]),
                wall_offset_ms: 0,
            },
            b: Contender {
                name: "B",
                start: ms(0),
                legs: legs(&[5, 5, 5, 5]),
                wall_offset_ms: 0,
            },
            lag: ms(0),
        },
        Draft::ReadThenWrite,
    );
}

/// B reads "free" just before A's write lands; A reads its id back and holds; B's slow
/// write then lands over A's and B reads its own id back: both hold.
#[test]
fn draft_2_write_then_read_back() {
    breaks_and_cas_survives(
        Schedule {
            a: Contender {
                name: "A",
                start: ms(0),
                legs: legs(&[5, 5, 5, 5, 5, 5]),
                wall_offset_ms: 0,
            },
            b: Contender {
                name: "B",
                start: ms(0),
                legs: legs(&[1, 1, 40, 1, 1, 1]),
                wall_offset_ms: 0,
            },
            lag: ms(0),
        },
        Draft::WriteThenReadBack,
    );
}

/// Each writes its sibling and lists the folder; the listing lags the writes, so each
/// sees only its own sibling: both hold.
#[test]
fn draft_3_siblings_as_conflict() {
    breaks_and_cas_survives(
        Schedule {
            a: Contender {
                name: "A",
                start: ms(0),
                legs: legs(&[5, 5, 5, 5]),
                wall_offset_ms: 0,
            },
            b: Contender {
                name: "B",
                start: ms(0),
                legs: legs(&[5, 5, 5, 5]),
                wall_offset_ms: 0,
            },
            lag: ms(50),
        },
        Draft::SiblingsAsConflict,
    );
}

/// A writes its timestamped sibling, lists, sees the lowest timestamp is its own and holds.
/// B comes later with a clock one second behind: its timestamp is the lowest, so B holds too.
#[test]
fn draft_4_lowest_timestamp_wins() {
    breaks_and_cas_survives(
        Schedule {
            a: Contender {
                name: "A",
                start: ms(0),
                legs: legs(&[5, 5, 5, 5]),
                wall_offset_ms: 0,
            },
            b: Contender {
                name: "B",
                start: ms(100),
                legs: legs(&[5, 5, 5, 5]),
                wall_offset_ms: -1000,
            },
            lag: ms(0),
        },
        Draft::LowestTimestampWins,
    );
}
