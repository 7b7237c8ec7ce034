//! The simulator shared by tests/simulation.rs and tests/cautionary.rs: a simulated world
//! (the store's true history, a trace, the events the oracle judges), each process's faulty
//! view of the store, its drifting clock and its pauses, and the oracle.
#![allow(dead_code)]

use async_trait::async_trait;
use blob_lock::clock::{Clock, DriftingClock};
use blob_lock::store::{LockStore, Snapshot, Version, Write};
use blob_lock::watched::Watched;
use blob_lock::{Error, LockOptions, Protocol, StoreErrorKind, Timing};
use bytes::Bytes;
use chrono::{DateTime, TimeZone, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

mod choice;
mod oracle;
#[allow(unused_imports)] // each test uses a part
pub use choice::*;
#[allow(unused_imports)] // tests/stores.rs uses the simulated store only
pub use oracle::*;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Small latencies and clock drift only.
    Healthy,
    /// Every fault but stale reads.
    Faulty,
    /// Every fault, and reads that may return an older version.
    Eventual,
    /// Healthy but for a few requests delayed up to 3 x expire (lww's first weakness).
    SlowWriter,
    /// Healthy but for reads that may return a version up to expire / 2 old (lww's second).
    StaleReads,
    /// Healthy (drift and crashes included) plus one fault at the rate `Faulty` has it:
    /// the rows of docs/guarantees.md's table of which protocol survives which fault.
    Only(Fault),
}

/// The faults one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A few requests delayed up to 3 x expire.
    SlowRequests,
    /// Writes that fail without landing.
    LostWrites,
    /// Writes that land but report an error.
    GhostWrites,
    /// Writes that land but come back as a conflict (a retried request).
    EchoedConflicts,
    /// Reads that fail transiently.
    ReadErrors,
    /// Processes paused past expire, then resumed.
    Pauses,
    /// Reads that may return a version up to expire / 2 old (eventual consistency).
    StaleReads,
}

#[derive(Debug, Clone)]
pub struct Faults {
    pub latency: Duration,
    pub slow_p: f64,
    pub slow_latency: Duration,
    pub lost_write_p: f64,
    pub ghost_write_p: f64,
    pub echo_conflict_p: f64,
    pub read_error_p: f64,
    pub stale_for: Duration,
    /// Reads lag by exactly `stale_for` rather than up to it (scripted schedules).
    pub exact_lag: bool,
    pub pauses: bool,
    pub crashes: bool,
}

impl Mode {
    /// Every mode, for `SIM_MODE` (written as the replay hint prints it).
    pub fn all() -> Vec<Mode> {
        let mut all = vec![
            Mode::Healthy,
            Mode::Faulty,
            Mode::Eventual,
            Mode::SlowWriter,
            Mode::StaleReads,
        ];
        all.extend(
            [
                Fault::SlowRequests,
                Fault::LostWrites,
                Fault::GhostWrites,
                Fault::EchoedConflicts,
                Fault::ReadErrors,
                Fault::Pauses,
                Fault::StaleReads,
            ]
            .map(Mode::Only),
        );
        all
    }

    /// The mode named `name` as `{:?}` prints it.
    pub fn named(name: &str) -> Option<Mode> {
        Mode::all().into_iter().find(|m| format!("{m:?}") == name)
    }
}

impl Faults {
    pub fn of(mode: Mode) -> Faults {
        let expire = Duration::from_secs_f64(EXPIRE);
        let healthy = Faults {
            latency: Duration::from_millis(30),
            slow_p: 0.0,
            slow_latency: Duration::ZERO,
            lost_write_p: 0.0,
            ghost_write_p: 0.0,
            echo_conflict_p: 0.0,
            read_error_p: 0.0,
            stale_for: Duration::ZERO,
            exact_lag: false,
            pauses: false,
            crashes: true,
        };
        let faulty = Faults {
            latency: Duration::from_millis(80),
            slow_p: 0.04,
            slow_latency: expire * 3,
            lost_write_p: 0.03,
            ghost_write_p: 0.03,
            echo_conflict_p: 0.03,
            read_error_p: 0.03,
            pauses: true,
            ..healthy.clone()
        };
        let calm = Faults {
            crashes: false,
            ..healthy.clone()
        };
        match mode {
            Mode::SlowWriter => Faults {
                slow_p: 0.04,
                slow_latency: expire * 3,
                ..calm
            },
            Mode::StaleReads => Faults {
                stale_for: expire / 2,
                ..calm
            },
            Mode::Healthy => healthy,
            Mode::Only(fault) => {
                let mut one = healthy;
                match fault {
                    Fault::SlowRequests => {
                        one.slow_p = faulty.slow_p;
                        one.slow_latency = faulty.slow_latency;
                    }
                    Fault::LostWrites => one.lost_write_p = faulty.lost_write_p,
                    Fault::GhostWrites => one.ghost_write_p = faulty.ghost_write_p,
                    Fault::EchoedConflicts => one.echo_conflict_p = faulty.echo_conflict_p,
                    Fault::ReadErrors => one.read_error_p = faulty.read_error_p,
                    Fault::Pauses => one.pauses = true,
                    Fault::StaleReads => one.stale_for = expire / 2,
                }
                one
            }
            Mode::Faulty => faulty,
            Mode::Eventual => Faults {
                stale_for: expire / 2,
                ..faulty
            },
        }
    }
}

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
}

pub struct Stored {
    pub bytes: Bytes,
    pub version: u64,
    pub at: Instant,
}

/// The simulated world: the store's true state, the trace and the events.
pub struct World {
    pub start: Instant,
    pub wall_base: DateTime<Utc>,
    pub history: Mutex<Vec<Stored>>,
    pub trace: Mutex<Vec<String>>,
    pub events: Mutex<Vec<Event>>,
    /// Set for the final phase: every fault off.
    pub healed: AtomicBool,
    /// The explorer's chooser, which every view of the store then shares (else each view
    /// draws from a generator of its own).
    pub explorer: Option<Shared>,
}

impl World {
    pub fn new() -> Arc<World> {
        Self::with_explorer(None)
    }

    pub fn with_explorer(explorer: Option<Shared>) -> Arc<World> {
        Arc::new(World {
            start: Instant::now(),
            wall_base: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            history: Mutex::new(Vec::new()),
            trace: Mutex::new(Vec::new()),
            events: Mutex::new(Vec::new()),
            healed: AtomicBool::new(false),
            explorer,
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

/// One process's view of the store, with its own faults. Cloned, it is the same view: a
/// write travels on a task of its own, so that it lands even if the caller stops waiting
/// for it (as a request on the wire does).
#[derive(Clone)]
pub struct NodeStore {
    /// Exact latencies for the legs of the next requests (two legs a request: there and
    /// back), before the random ones resume: how scripted schedules are written.
    pub script: Arc<Mutex<std::collections::VecDeque<Duration>>>,
    pub world: Arc<World>,
    pub name: String,
    pub faults: Faults,
    pub rng: Shared,
    pub pauses: Arc<Pauses>,
}

impl std::fmt::Debug for NodeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeStore({})", self.name)
    }
}

pub enum Fate {
    Normal,
    Lost,
    Ghost,
    Echo,
}

pub fn transient(msg: &str) -> Error {
    Error::Store {
        uri: "sim".into(),
        message: msg.into(),
        kind: StoreErrorKind::Transient,
    }
}

impl NodeStore {
    fn healed(&self) -> bool {
        self.world.healed.load(Ordering::SeqCst)
    }

    /// One leg of a request's trip: latency, then waiting out any pause of this process.
    pub async fn travel(&self) {
        let scripted = self.script.lock().unwrap().pop_front();
        if let Some(d) = scripted {
            tokio::time::sleep(d).await;
        } else if !self.healed() {
            let (slow, r) = {
                let mut rng = self.rng.lock().unwrap();
                (
                    rng.chance(self.faults.slow_p, "a slow leg"),
                    rng.fraction("a leg's latency"),
                )
            };
            let bound = if slow {
                self.faults.slow_latency
            } else {
                self.faults.latency
            };
            tokio::time::sleep(bound.mul_f64(r)).await;
        }
        self.pauses.wait().await;
    }

    fn fate(&self) -> Fate {
        if self.healed() {
            return Fate::Normal;
        }
        let f = &self.faults;
        let weights = [f.lost_write_p, f.ghost_write_p, f.echo_conflict_p];
        match self.rng.lock().unwrap().pick(&weights, "a write's fate") {
            Some(0) => Fate::Lost,
            Some(1) => Fate::Ghost,
            Some(_) => Fate::Echo,
            None => Fate::Normal,
        }
    }

    fn describe(bytes: &[u8]) -> String {
        match blob_lock::LockFile::decode(bytes) {
            Ok(lf) if lf.is_released() => format!("{} t{} released", lf.writer_id, lf.token),
            Ok(lf) => format!("{} t{} #{}", lf.writer_id, lf.token, lf.write_count),
            Err(e) => format!("invalid: {e}"),
        }
    }

    async fn write(
        &self,
        op: &str,
        body: Bytes,
        expected: Option<Option<u64>>,
    ) -> Result<Write, Error> {
        let fate = self.fate();
        if matches!(fate, Fate::Lost) {
            self.travel().await;
            self.travel().await;
            self.world.log(
                &self.name,
                format!("{op} {} -> lost before landing", Self::describe(&body)),
            );
            return Err(transient("connection reset before the write landed"));
        }
        let wire = self.clone();
        let sent = body.clone();
        let there = tokio::spawn(async move { wire.land(sent, expected).await });
        let outcome = there.await.expect("a write's trip does not panic");
        let landed = match &outcome {
            Write::Done(v) => format!("landed v{}", v.e_tag.as_deref().unwrap_or("?")),
            Write::Conflict => "conflict".to_string(),
        };
        self.travel().await;
        let (said, result) = match fate {
            Fate::Ghost => (
                "reported as an error",
                Err(transient("timed out after sending")),
            ),
            Fate::Echo if matches!(outcome, Write::Done(_)) => {
                ("reported as a conflict", Ok(Write::Conflict))
            }
            _ => ("", Ok(outcome)),
        };
        self.world.log(
            &self.name,
            format!("{op} {} -> {landed} {said}", Self::describe(&body)),
        );
        result
    }

    /// The write's trip there, and its landing (or refusal).
    async fn land(&self, body: Bytes, expected: Option<Option<u64>>) -> Write {
        self.travel().await;
        {
            let mut history = self.world.history.lock().unwrap();
            let current = history.last().map(|s| s.version);
            let allowed = match expected {
                None => true,                  // overwrite
                Some(want) => want == current, // None: create; Some(v): update
            };
            if allowed {
                let version = history.len() as u64 + 1;
                history.push(Stored {
                    bytes: body.clone(),
                    version,
                    at: Instant::now(),
                });
                Write::Done(Version {
                    e_tag: Some(version.to_string()),
                    version: None,
                })
            } else {
                Write::Conflict
            }
        }
    }
}

pub fn version_number(v: &Version) -> u64 {
    v.e_tag.as_deref().and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[async_trait]
impl LockStore for NodeStore {
    /// Its creates and updates check their condition where they land, as a store that
    /// honours conditions does (lww runs on it too, writing unconditionally).
    async fn conditional_writes(&self, _required: bool) -> blob_lock::Result<bool> {
        Ok(true)
    }

    fn known_conditional_writes(&self) -> Option<bool> {
        Some(true)
    }

    async fn read(&self) -> blob_lock::Result<Option<Snapshot>> {
        let fail = !self.healed()
            && (self.rng.lock().unwrap()).chance(self.faults.read_error_p, "a read fails");
        let lag = if self.healed() {
            Duration::ZERO
        } else {
            self.faults.stale_for.mul_f64(if self.faults.exact_lag {
                1.0
            } else if self.faults.stale_for.is_zero() {
                // No draw where nothing is stale: keeps the random stream (a draw times
                // zero) and spares the explorer a point.
                let mut rng = self.rng.lock().unwrap();
                rng.spare();
                0.0
            } else {
                self.rng.lock().unwrap().extent("how stale a read is")
            })
        };
        self.travel().await;
        let seen = {
            let history = self.world.history.lock().unwrap();
            let now = Instant::now();
            history
                .iter()
                .rev()
                .find(|s| s.at + lag <= now)
                .map(|s| Snapshot {
                    bytes: s.bytes.clone(),
                    version: Version {
                        e_tag: Some(s.version.to_string()),
                        version: None,
                    },
                    last_modified: self.world.wall_at(s.at),
                })
        };
        self.travel().await;
        if fail {
            self.world.log(&self.name, "read -> 503");
            return Err(transient("503 Slow Down"));
        }
        let what = seen.as_ref().map_or("absent".to_string(), |s| {
            format!(
                "v{} {}",
                version_number(&s.version),
                Self::describe(&s.bytes)
            )
        });
        self.world.log(&self.name, format!("read -> {what}"));
        Ok(seen)
    }

    async fn create(&self, body: Bytes) -> blob_lock::Result<Write> {
        self.write("create", body, Some(None)).await
    }

    async fn update(&self, body: Bytes, expected: &Version) -> blob_lock::Result<Write> {
        let op = format!("update@v{}", version_number(expected));
        self.write(&op, body, Some(Some(version_number(expected))))
            .await
    }

    async fn overwrite(&self, body: Bytes) -> blob_lock::Result<Version> {
        match self.write("overwrite", body, None).await? {
            Write::Done(v) => Ok(v),
            Write::Conflict => Err(transient("conflict on an overwrite")),
        }
    }

    fn uri(&self) -> &str {
        "sim"
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
    /// What this process has seen of the lockfile between acquisitions (its own record:
    /// the simulated processes share one real process).
    pub watched: Watched,
}

impl Process {
    pub fn new(world: &Arc<World>, name: &str, faults: &Faults, rng: &mut dyn Chooser) -> Process {
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
        let offset = match world.explorer.as_ref() {
            None => StdRng::seed_from_u64(seed ^ 0x0ff5e7).random_range(-SKEW / 2.0..=SKEW / 2.0),
            Some(_) => rng.within(-SKEW / 2.0, SKEW / 2.0, true, "a wall clock's offset"),
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
            watched: Watched::Slot(Default::default()),
        }
    }

    pub fn store(&self, salt: u64) -> Arc<dyn LockStore> {
        self.scripted_store(salt, &[])
    }

    /// A view of the store whose next request legs take exactly `legs`.
    pub fn scripted_store(&self, salt: u64, legs: &[Duration]) -> Arc<NodeStore> {
        Arc::new(NodeStore {
            script: Arc::new(Mutex::new(legs.iter().copied().collect())),
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
        o.timing = Timing::new(EXPIRE, None, None, Some(SKEW)).unwrap();
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
