//! The simulator shared by tests/rust/simulation.rs and tests/rust/cautionary.rs: a simulated world
//! (the store's true history, a trace, the events the oracle judges), each process's faulty
//! view of the store, its drifting clock and its pauses, and the oracle.
#![allow(dead_code)]

use blob_lock::clock::{Clock, DriftingClock};
use blob_lock::lease::Settings;
use blob_lock::protocol::released::Receipt;
use blob_lock::protocol::watched::Watched;
use blob_lock::store::LockStore;
use blob_lock::{LockOptions, Protocol};
use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

mod choice;
mod faults;
mod liveness;
mod oracle;
mod pruner;
mod semaphore;
mod semaphore_oracle;
mod store;
#[allow(unused_imports)] // each test uses a part
pub use choice::*;
pub use faults::*;
#[allow(unused_imports)] // the simulation and the model only
pub use liveness::*;
#[allow(unused_imports)] // tests/rust/stores.rs uses the simulated store only
pub use oracle::*;
#[allow(unused_imports)] // the simulation and the model only
pub use pruner::*;
#[allow(unused_imports)] // the simulation and the model only
pub use semaphore::*;
pub use semaphore_oracle::*;
pub use store::*;

pub const EXPIRE: f64 = 3.0;
/// Clocks run at a rate within this fraction of true time. The holder's margin of
/// `expire / 10` covers a ratio of rates up to 1/0.9; 4% each way gives at most 1.083.
pub const DRIFT: f64 = 0.04;
/// The wall-clock allowance locks are given (`clock_skew`): the default's ratio to the
/// default expiry (60 s to 30 s), so that the fast path for old lockfiles runs as users run
/// it. Each process's wall clock is off by at most half of it, so any two differ by at most
/// the allowance.
pub const SKEW: f64 = 2.0 * EXPIRE;
/// The launch grace of a hand-off: longer than `EXPIRE`, so that it shows.
pub const GRACE: f64 = 4.0 * EXPIRE;

#[derive(Debug, Clone)]
pub enum Event {
    Acquired {
        owner: String,
        token: u64,
        at: f64,
    },
    Belief {
        owner: String,
        token: u64,
        at: f64,
    },
    Lost {
        owner: String,
        remote: bool,
        at: f64,
    },
    Crashed,
    /// An orchestrator began a hand-off with `grace` seconds of launch grace at `at`.
    HandOffTried {
        grace: f64,
        at: f64,
    },
    /// An orchestrator handed its lock off with `grace` seconds of launch grace at `at`
    /// (when it called; the write started after), then crashed at once.
    HandedOffAndCrashed {
        owner: String,
        grace: f64,
        at: f64,
    },
    /// The remote of `owner` began its keep_alive at `at`: any write of it is later.
    KeepStarted {
        owner: String,
        at: f64,
    },
    /// `owner` released the lock at `at` (its release returned).
    Released {
        owner: String,
        at: f64,
    },
    /// The release of `owner`'s acquisition `token`, begun before its lease's deadline,
    /// answered that the lock was not ours any more (`status`): it found the lock taken
    /// over, released by another, or gone.
    ReleaseRefused {
        owner: String,
        token: u64,
        status: String,
    },
    /// A delete landed at `at` (the store's true history): the next lockfile's tokens start
    /// from its writer's floor.
    Deleted {
        at: f64,
    },
    /// The operator wrote a semaphore's configuration (set it, or wrote it unreadable), its
    /// write landed by `at`.
    ConfigWritten {
        at: f64,
    },
    /// The operator deleted the configuration, or wrote it unreadable, at `at`.
    ConfigLost {
        at: f64,
    },
    /// A contender's acquisition was refused at `at` because the configuration was lost.
    ConfigRefused {
        at: f64,
    },
    /// The acquisition `who` of a semaphore took `slot` with `token` at `at`.
    SlotAcquired {
        who: String,
        slot: usize,
        token: u64,
        at: f64,
    },
    /// ... and still claimed it at `at`.
    SlotBelief {
        who: String,
        slot: usize,
        token: u64,
        at: f64,
    },
}

pub struct Stored {
    pub bytes: Bytes,
    pub version: u64,
    pub at: Instant,
}

/// One object's true history: each write as it landed (a deletion is an empty entry).
pub type History = Arc<Mutex<Vec<Stored>>>;

/// The simulated world: the store's true state, the trace and the events.
pub struct World {
    pub start: Instant,
    pub wall_base: DateTime<Utc>,
    /// The lockfile's true history.
    pub history: History,
    /// The true histories of other objects, by name (a semaphore's slots and configuration).
    pub objects: Mutex<std::collections::BTreeMap<String, History>>,
    pub trace: Mutex<Vec<String>>,
    pub events: Mutex<Vec<Event>>,
    /// Set for the final phase: every fault off.
    pub healed: AtomicBool,
    /// The explorer's chooser, which every view of the store then shares (else each view
    /// draws from a generator of its own).
    pub explorer: Option<Shared>,
    /// Woken at each event.
    pub news: tokio::sync::Notify,
    /// Calls that did not end within their bounds ([`World::within`]).
    pub late: Mutex<Vec<String>>,
}

impl World {
    pub fn new() -> Arc<World> {
        Self::with_explorer(None)
    }

    pub fn with_explorer(explorer: Option<Shared>) -> Arc<World> {
        // Waits behind our own writes are collected per thread, from this run on.
        listen();
        own_waits();
        Arc::new(World {
            start: Instant::now(),
            wall_base: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            history: Default::default(),
            objects: Default::default(),
            trace: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
            healed: AtomicBool::new(false),
            explorer,
            news: tokio::sync::Notify::new(),
            late: Mutex::new(Vec::new()),
        })
    }

    pub fn t(&self) -> f64 {
        (Instant::now() - self.start).as_secs_f64()
    }

    pub fn log(&self, who: &str, what: impl AsRef<str>) {
        let line = format!("{:>9.3}s {who:<8} {}", self.t(), what.as_ref());
        self.trace.lock().unwrap().push(line);
    }

    pub fn event(&self, e: Event) {
        self.events.lock().unwrap().push(e);
        self.news.notify_waiters();
    }

    /// Notes a release that answered `status`, when it said the lock was not ours any more
    /// though it began `in_time` (before the lease's deadline: the block the lease guarded
    /// ran under the lock).
    pub fn refused(
        &self,
        owner: &str,
        token: u64,
        in_time: bool,
        status: &blob_lock::ReleaseStatus,
    ) {
        if in_time && *status != blob_lock::ReleaseStatus::Released {
            self.event(Event::ReleaseRefused {
                owner: owner.into(),
                token,
                status: status.as_str().into(),
            });
        }
    }

    /// The true history of the object `name` (made empty on first use).
    pub fn object(&self, name: &str) -> History {
        let mut objects = self.objects.lock().unwrap();
        objects.entry(name.to_string()).or_default().clone()
    }

    pub fn wall_at(&self, at: Instant) -> DateTime<Utc> {
        self.wall_base + chrono::Duration::from_std(at - self.start).unwrap()
    }
}

/// A process's pauses (GC, VM): windows of true time in which it neither sends, receives
/// nor acts.
#[derive(Default)]
pub struct Pauses(pub Mutex<Vec<(Instant, Instant)>>);

impl Pauses {
    pub async fn wait(&self) {
        loop {
            let now = Instant::now();
            let end = self
                .0
                .lock()
                .unwrap()
                .iter()
                .find(|(s, e)| *s <= now && now < *e)
                .map(|(_, e)| *e);
            match end {
                Some(e) => tokio::time::sleep_until(e).await,
                None => return,
            }
        }
    }
}

/// One simulated process: its clock, its pauses and its randomness.
pub struct Process {
    pub world: Arc<World>,
    pub name: String,
    pub clock: Arc<dyn Clock>,
    pub pauses: Arc<Pauses>,
    pub faults: Faults,
    pub seed: u64,
    /// What this process has seen of the lockfile between acquisitions (its own table:
    /// the simulated processes share one real process).
    pub watched: Watched,
    /// The receipt of this process's own last release and its guesses, shared by all its
    /// locks as a real process's are.
    pub receipts: Receipt,
}

impl Process {
    pub fn new(world: &Arc<World>, name: &str, faults: &Faults, rng: &mut dyn Chooser) -> Process {
        Self::with_offset(world, name, faults, rng, None)
    }

    /// A process whose wall clock is `offset` seconds off the store's, or a drawn offset.
    pub fn with_offset(
        world: &Arc<World>,
        name: &str,
        faults: &Faults,
        rng: &mut dyn Chooser,
        offset: Option<f64>,
    ) -> Process {
        let rate = 1.0 + rng.within(-DRIFT, DRIFT, true, "a clock's rate");
        let pauses = Arc::new(Pauses::default());
        if faults.pauses && rng.chance(0.3, "a process pauses") {
            let at = Instant::now()
                + Duration::from_secs_f64(rng.within(0.0, 12.0, false, "when") * EXPIRE);
            let len = Duration::from_secs_f64(rng.within(0.5, 3.0, false, "how long") * EXPIRE);
            pauses.0.lock().unwrap().push((at, at + len));
            world.log(
                name,
                format!(
                    "will pause at {:.3}s for {:.3}s",
                    (at - world.start).as_secs_f64(),
                    len.as_secs_f64()
                ),
            );
        }
        let seed = rng.seed();
        // Random: from a stream of its own, so that every other draw, and so each named
        // seed's schedule, is what it was before wall clocks had offsets.
        let offset = match (offset, world.explorer.as_ref()) {
            (Some(offset), _) => offset,
            (None, None) => {
                StdRng::seed_from_u64(seed ^ 0x0ff5e7).random_range(-SKEW / 2.0..=SKEW / 2.0)
            }
            (None, Some(_)) => rng.within(-SKEW / 2.0, SKEW / 2.0, true, "a wall clock's offset"),
        };
        Process {
            world: world.clone(),
            name: name.to_string(),
            clock: Arc::new(DriftingClock::new(
                rate,
                world.wall_at(Instant::now()),
                chrono::Duration::milliseconds((offset * 1000.0) as i64),
                seed,
            )),
            pauses,
            faults: faults.clone(),
            seed,
            watched: Watched::Shared(Default::default()),
            receipts: Receipt::default(),
        }
    }

    /// A fresh lock as users make one for every `with`, sharing this process's receipts.
    pub fn lock(&self, salt: u64, protocol: Protocol, owner: &str) -> blob_lock::Lock {
        self.lock_on(self.store(salt), protocol, owner)
    }

    /// [`Process::lock`] on a view of the store made before.
    pub fn lock_on(
        &self,
        store: Arc<dyn LockStore>,
        protocol: Protocol,
        owner: &str,
    ) -> blob_lock::Lock {
        blob_lock::Lock::with_store("sim", store, &self.options(protocol))
            .with_owner(owner)
            .with_watched(self.watched.clone())
            .with_receipt(self.receipts.clone())
    }

    pub fn store(&self, salt: u64) -> Arc<dyn LockStore> {
        self.scripted_store(salt, &[])
    }

    /// This process's view of the object `name` (a semaphore's slot or configuration).
    pub fn store_of(&self, name: &str, salt: u64) -> Arc<NodeStore> {
        let mut store = self.scripted_store(salt, &[]);
        let view = Arc::get_mut(&mut store).expect("just made");
        view.history = self.world.object(name);
        view.object = name.to_string();
        store
    }

    /// A view of the store whose next request legs take exactly `legs`.
    pub fn scripted_store(&self, salt: u64, legs: &[Duration]) -> Arc<NodeStore> {
        Arc::new(NodeStore {
            script: Arc::new(Mutex::new(legs.iter().copied().collect())),
            history: self.world.history.clone(),
            object: String::new(),
            world: self.world.clone(),
            name: self.name.clone(),
            faults: self.faults.clone(),
            rng: match self.world.explorer.as_ref() {
                Some(shared) => shared.clone(),
                None => Arc::new(Mutex::new(StdRng::seed_from_u64(self.seed ^ salt))),
            },
            pauses: self.pauses.clone(),
        })
    }

    pub fn options(&self, protocol: Protocol) -> LockOptions {
        let mut o = LockOptions::new(EXPIRE).unwrap();
        o.protocol = Some(protocol);
        let asked = Settings {
            clock_skew: Some(SKEW),
            ..Settings::with_expire(EXPIRE)
        };
        o.timing = asked.timing().unwrap();
        o.clock = self.clock.clone();
        o
    }

    /// Acts as a holder until `until` (true time) or loss: each step, a process that is
    /// running checks its lease and, if it still claims the lock, records that belief.
    pub async fn hold(
        &self,
        lease: &blob_lock::Lease,
        until: Instant,
        rng: &mut dyn Chooser,
        remote: bool,
    ) -> bool {
        while Instant::now() < until {
            let step = Duration::from_secs_f64(rng.step(0.01, 0.15) * EXPIRE);
            tokio::time::sleep(step).await;
            self.pauses.wait().await;
            if lease.is_lost() {
                self.world.log(
                    &self.name,
                    format!(
                        "sees the lock lost: {}",
                        lease.lost_reason().unwrap_or_default()
                    ),
                );
                self.world.event(Event::Lost {
                    owner: lease.owner().to_string(),
                    remote,
                    at: self.world.t(),
                });
                return false;
            }
            self.world.event(Event::Belief {
                owner: lease.owner().to_string(),
                token: lease.token(),
                at: self.world.t(),
            });
        }
        true
    }
}

/// `run` once per seeded bug (src/mutation.rs), each on a thread of its own with that bug
/// seeded (a seeded bug is per thread), side by side; the results in `Mutation::ALL`'s order.
/// `MODEL_MUTATIONS=Name,Name` runs only those (to look again at a few).
#[cfg(feature = "mutations")]
pub fn each_seeded_bug<T: Send>(
    run: impl Fn() -> T + Sync,
) -> Vec<(blob_lock::mutation::Mutation, T)> {
    use blob_lock::mutation::{seed, Mutation};
    let only = std::env::var("MODEL_MUTATIONS").unwrap_or_default();
    let chosen = |m: &Mutation| {
        only.is_empty() || only.split(',').any(|name| name.trim() == format!("{m:?}"))
    };
    let run = &run;
    std::thread::scope(|scope| {
        let runs: Vec<_> = (Mutation::ALL.iter())
            .filter(|m| chosen(m))
            .map(|&m| {
                scope.spawn(move || {
                    seed(Some(m));
                    (m, run())
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    })
}
