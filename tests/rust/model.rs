//! The protocol checked exhaustively within bounds, on the real code: the acquire, heartbeat,
//! hand_off, keep_alive and release of the lock core, on the simulation's store and clocks
//! (tests/rust/sim), with every choice the simulation makes at random turned into a choice
//! point that a depth-first explorer enumerates ([`sim::Dfs`]): each request leg's latency
//! (half its bound, near zero, near the bound) and whether it is slow (3 x expire), each
//! write's fate (lands; lost; lands and reports an error; lands and reports a conflict),
//! each read's failure and staleness, each process's timer rate and wall-clock offset at
//! either edge of their bounds, a pause, a hand-off and when its remote starts, a crash.
//! The first way of each point is the fault-free one; a run takes at most `MODEL_FAULTS`
//! other ways, and every combination within that bound is run once.
//!
//! What the explorer does not drive: tokio's order among tasks woken at the same instant of
//! the paused clock (fixed, first in first out), the jitter inside a clock (seeded), and
//! the spacing of a holder's checks (the finest, 0.01 x expire).
//!
//! `MODEL_FAULTS` (default 1), `MODEL_ROUNDS` (acquisitions per orchestrator, default 2),
//! `MODEL_DEPTH` (choice points per run, default 5,000: more than any run has); `MODEL_REPLAY=c,c,...` runs one
//! schedule and prints its trace.

mod sim;

use blob_lock::protocol::released::Guess;
use blob_lock::{keep_alive_on, Lock, Protocol};
use sim::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The bounds of one exploration.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    /// Ways other than the first taken in one run (faults, far edges).
    faults: u32,
    /// Acquisitions each of the two orchestrators makes.
    rounds: u32,
    /// Choice points per run; after them, the first way only.
    depth: usize,
}

impl Bounds {
    fn from_env() -> Bounds {
        let get = |name: &str, default: u64| -> u64 {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Bounds {
            faults: get("MODEL_FAULTS", 1) as u32,
            rounds: get("MODEL_ROUNDS", 2) as u32,
            depth: get("MODEL_DEPTH", 5000) as usize,
        }
    }
}

/// Every fault the simulation has, on: the explorer decides which happen.
fn faults() -> Faults {
    Faults::of(Mode::Eventual)
}

async fn orchestrator(
    world: Arc<World>,
    i: usize,
    protocol: Protocol,
    rounds: u32,
    choose: Shared,
) {
    let faults = faults();
    let p = {
        let mut c = choose.lock().unwrap();
        Process::new(&world, &format!("o{i}"), &faults, &mut *c)
    };
    // Each orchestrator is a process whose locks share its receipts (a fresh lock per
    // round, as users make one per `with`). The second comes with the other guesses a
    // process can have learnt from earlier locks (new locks likely, its last receipt stale),
    // so that it creates first, and reads and compares its receipt, from its first rounds.
    if i == 1 {
        p.receipts.found(Guess::New, true);
        p.receipts.found(Guess::Stale, true);
    }
    let mut remotes = Vec::new();
    for round in 0..rounds {
        let owner = format!("o{i}.{round}");
        let lock = p.lock(round as u64, protocol, &owner);
        p.pauses.wait().await;
        world.log(&p.name, format!("acquire as {owner}"));
        let timeout = Duration::from_secs_f64(8.0 * EXPIRE);
        let acquiring = lock.acquire(Some(timeout));
        let lease = match world
            .within(&p.name, "acquire", p.acquire_bound(timeout), acquiring)
            .await
        {
            Some(Ok(lease)) => Arc::new(lease),
            Some(Err(e)) => {
                world.log(&p.name, format!("acquire failed: {e}"));
                continue;
            }
            None => continue,
        };
        world.log(&p.name, format!("acquired {owner} token {}", lease.token()));
        world.event(Event::Acquired {
            owner: owner.clone(),
            token: lease.token(),
            at: world.t(),
        });
        // The first orchestrator's first acquisition launches a remote, hands it the lock
        // with a launch grace, and may crash right after.
        let mut this_remote = None;
        // (Launching is the first way: a fault-free run has a hand-off in it.)
        let launches = i == 0 && round == 0 && !choose.lock().unwrap().chance(0.5, "no launch");
        if launches {
            let (r, queued) = {
                let mut c = choose.lock().unwrap();
                let r = Process::new(&world, &format!("r{i}"), &faults, &mut *c);
                // Queued past `expire` but within the grace first (0.4 x the grace), then
                // briefly (0.1 x).
                let queued = (0.5 - c.within(0.1, 0.4, true, "the remote's queue")) * GRACE;
                (r, queued)
            };
            let of = owner.clone();
            this_remote = Some(tokio::spawn(remote(r, of, protocol, queued)));
            let at = world.t();
            world.event(Event::HandOffTried { grace: GRACE, at });
            match lease.hand_off(Duration::from_secs_f64(GRACE)).await {
                Ok(())
                    if choose
                        .lock()
                        .unwrap()
                        .chance(0.5, "crash after the hand-off") =>
                {
                    world.log(&p.name, format!("hands {owner} off, then crashes"));
                    world.event(Event::HandedOffAndCrashed {
                        owner: owner.clone(),
                        grace: GRACE,
                        at,
                    });
                    world.event(Event::Crashed);
                    drop(lease);
                    remotes.extend(this_remote);
                    continue;
                }
                Ok(()) => world.log(&p.name, format!("hands {owner} off")),
                Err(e) => world.log(&p.name, format!("hand-off of {owner} failed: {e}")),
            }
        }
        let held_for = choose
            .lock()
            .unwrap()
            .within(0.2, 2.0, false, "how long it holds");
        let until = Instant::now() + Duration::from_secs_f64(held_for * EXPIRE);
        let kept = p.hold(&lease, until, &mut Dfs::default(), false).await;
        if choose.lock().unwrap().chance(0.2, "crash while holding") {
            world.log(&p.name, format!("crashes holding {owner}"));
            world.event(Event::Crashed);
            drop(lease);
            remotes.extend(this_remote);
            continue;
        }
        if let Some(r) = this_remote {
            r.await.unwrap();
        }
        if kept {
            // The first round as `release()` does it, the second as the end of a `with`
            // does (best effort, within its patience).
            let best_effort = round % 2 == 1;
            p.release(&lock, lease, &owner, protocol, best_effort).await;
        }
    }
    for r in remotes {
        r.await.unwrap();
    }
}

async fn remote(p: Process, owner: String, protocol: Protocol, queued: f64) {
    tokio::time::sleep(Duration::from_secs_f64(queued)).await;
    p.pauses.wait().await;
    p.world.event(Event::KeepStarted {
        owner: owner.clone(),
        at: p.world.t(),
    });
    let (options, bound) = (p.options(protocol), p.keep_alive_bound());
    let keeping = keep_alive_on(p.store(7), &owner, &options);
    let lease = match p.world.within(&p.name, "keep_alive", bound, keeping).await {
        Some(Ok(lease)) => lease,
        Some(Err(e)) => {
            p.world
                .log(&p.name, format!("keep_alive {owner} refused: {e}"));
            return;
        }
        None => return,
    };
    p.world.log(&p.name, format!("keeps {owner} alive"));
    let until = Instant::now() + Duration::from_secs_f64(2.0 * EXPIRE);
    p.hold(&lease, until, &mut Dfs::default(), true).await;
    lease.stop().await;
}

/// One run of the scenario under `choose`: the oracle's violations, and the trace.
async fn scenario(
    protocol: Protocol,
    bounds: Bounds,
    choose: Shared,
) -> (Vec<String>, Vec<String>) {
    let world = World::with_explorer(Some(choose.clone()));
    let tasks: Vec<_> = (0..2)
        .map(|i| {
            tokio::spawn(orchestrator(
                world.clone(),
                i,
                protocol,
                bounds.rounds,
                choose.clone(),
            ))
        })
        .collect();
    let done = Arc::new(AtomicBool::new(false));
    // In some runs, decided at the first release; its wall clock ahead of every other (by
    // the most `clock_skew` allows), so that with `--older-than 0` a release is old enough
    // to take at once, and the next lockfile's writer may be the farthest behind it.
    let how = Pruning {
        faults: faults(),
        offset: Some(SKEW / 2.0),
        maybe: true,
        once: true,
    };
    let prune = tokio::spawn(pruner(
        world.clone(),
        protocol,
        choose.clone(),
        done.clone(),
        how,
    ));
    for t in tasks {
        t.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    world.news.notify_waiters();
    if prune.await.unwrap() {
        latecomer(&world, protocol, &choose).await;
    }
    // Every fault off and every request in flight landed; a crashed holder's lock must then
    // be taken over within its lifetime (at the slowest timer rate) plus a poll.
    world.healed.store(true, Ordering::SeqCst);
    tokio::time::sleep(faults().slow_latency * 2 + Duration::from_secs(1)).await;
    let fin = {
        let mut c = choose.lock().unwrap();
        Process::new(&world, "final", &Faults::of(Mode::Healthy), &mut *c)
    };
    let began = world.t();
    let lock = Lock::with_store("sim", fin.store(99), &fin.options(protocol)).with_owner("final");
    let mut violations = Vec::new();
    match lock
        .acquire(Some(Duration::from_secs_f64(EXPIRE * 20.0)))
        .await
    {
        Ok(lease) => {
            let waited = world.t() - began;
            world.event(Event::Acquired {
                owner: "final".into(),
                token: lease.token(),
                at: world.t(),
            });
            let events = world.events.lock().unwrap().clone();
            let handed = events
                .iter()
                .any(|e| matches!(e, Event::HandOffTried { .. }));
            let lifetime = if handed { GRACE } else { EXPIRE };
            let bound = lifetime * (1.0 + DRIFT) / (1.0 - DRIFT) + 1.0;
            if waited > bound {
                violations.push(format!("takeover took {waited:.3}s, more than {bound:.3}s"));
            }
            lease.release().await.unwrap();
        }
        Err(e) => violations.push(format!("final acquisition failed: {e}")),
    }
    let events = world.events.lock().unwrap().clone();
    violations.extend(check(&events, Mode::Eventual));
    violations.extend(world.progress());
    violations.extend(no_revival(&world));
    violations.extend(only_the_holder_deletes(&world));
    violations.extend(told_lost_only_when_lost(&world));
    let trace = world.trace.lock().unwrap().clone();
    (violations, trace)
}

/// A user who takes the lock right after the operator's prune gave it back (its delete,
/// held up, may still be on its way): a process of its own, on a healthy store, holding
/// the lock until any request still in flight has landed. A delete that lands on its
/// lockfile is what prune must never do (`only_the_holder_deletes`).
async fn latecomer(world: &Arc<World>, protocol: Protocol, choose: &Shared) {
    let late = {
        let mut c = choose.lock().unwrap();
        Process::new(world, "late", &Faults::of(Mode::Healthy), &mut *c)
    };
    let lock = Lock::with_store("sim", late.store(98), &late.options(protocol)).with_owner("late");
    world.log(&late.name, "acquire as late");
    let timeout = Duration::from_secs_f64(EXPIRE * 20.0);
    let bound = late.acquire_bound(timeout);
    let lease = match world
        .within(&late.name, "acquire", bound, lock.acquire(Some(timeout)))
        .await
    {
        Some(Ok(lease)) => lease,
        Some(Err(e)) => {
            world.log(&late.name, format!("acquire failed: {e}"));
            return;
        }
        None => return,
    };
    world.log(&late.name, format!("acquired late token {}", lease.token()));
    world.event(Event::Acquired {
        owner: "late".into(),
        token: lease.token(),
        at: world.t(),
    });
    let until = Instant::now() + longest_request(&faults()) + Duration::from_secs(1);
    if late.hold(&lease, until, &mut Dfs::default(), false).await {
        late.release(&lock, Arc::new(lease), "late", protocol, false)
            .await;
    }
}

/// A remote's keep_alive never revives a lock: each write of a remote lands on a write of
/// the same owner and acquisition that is not a release (from the store's true history).
fn no_revival(world: &World) -> Vec<String> {
    let history = world.history.lock().unwrap();
    let decoded: Vec<_> = history
        .iter()
        .map(|s| blob_lock::LockFile::decode(&s.bytes).ok())
        .collect();
    let mut found = Vec::new();
    for pair in decoded.windows(2) {
        let (Some(before), Some(after)) = (&pair[0], &pair[1]) else {
            continue;
        };
        let by_remote = after.writer_name.as_deref() == Some(blob_lock::protocol::REMOTE);
        if by_remote
            && (before.writer_id != after.writer_id
                || before.token != after.token
                || before.is_released())
        {
            found.push(format!(
                "a remote's write revived {} (token {}) over {} (token {}{})",
                after.writer_id,
                after.token,
                before.writer_id,
                before.token,
                if before.is_released() {
                    ", released"
                } else {
                    ""
                }
            ));
        }
    }
    found
}

/// What is explored: a lock's scenario (two orchestrators, a remote, an operator's prune), or
/// a semaphore's (three contenders on two slots, with one change to its configuration,
/// tests/rust/sim/semaphore.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    Lock,
    Semaphore(Change),
}

impl Subject {
    /// `MODEL_SUBJECT`'s value for it: `semaphore:<change>`.
    fn name(&self) -> Option<String> {
        match self {
            Subject::Lock => None,
            Subject::Semaphore(change) => Some(format!("semaphore:{change:?}")),
        }
    }

    fn named(name: &str) -> Subject {
        match name.strip_prefix("semaphore") {
            None => Subject::Lock,
            Some(rest) => {
                let change = rest.strip_prefix(':').unwrap_or("Steady");
                let change = Change::ALL.into_iter().find(|c| format!("{c:?}") == change);
                Subject::Semaphore(change.unwrap_or_else(|| {
                    panic!(
                        "MODEL_SUBJECT {name:?}: the change is one of {:?}",
                        Change::ALL
                    )
                }))
            }
        }
    }
}

fn run(
    protocol: Protocol,
    bounds: Bounds,
    prefix: Vec<u32>,
) -> (Vec<Point>, Vec<String>, Vec<String>) {
    run_on(Subject::Lock, protocol, bounds, prefix)
}

fn run_on(
    subject: Subject,
    protocol: Protocol,
    bounds: Bounds,
    prefix: Vec<u32>,
) -> (Vec<Point>, Vec<String>, Vec<String>) {
    let dfs = Arc::new(Mutex::new(Dfs::new(prefix, bounds.faults, bounds.depth)));
    let shared: Shared = dfs.clone();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (violations, trace) = match subject {
        Subject::Lock => runtime.block_on(scenario(protocol, bounds, shared)),
        Subject::Semaphore(change) => runtime.block_on(async {
            let world = World::with_explorer(Some(shared.clone()));
            semaphore_scenario(protocol, faults(), bounds.rounds, shared, world, change).await
        }),
    };
    let points = std::mem::take(&mut dfs.lock().unwrap().points);
    (points, violations, trace)
}

type Counterexample = (Vec<Point>, Vec<String>, Vec<String>);

fn choices(points: &[Point]) -> Vec<u32> {
    points.iter().map(|p| p.taken).collect()
}

/// What an exploration found.
#[derive(Debug)]
struct Explored {
    schedules: u64,
    most_points: usize,
    /// The first violation: its choice points (a replayable schedule), what broke, the
    /// trace.
    counterexample: Option<Counterexample>,
}

/// Runs every schedule of the lock's scenario within `bounds`, depth first, until one
/// violates a property.
fn explore(protocol: Protocol, bounds: Bounds) -> Explored {
    explore_on(Subject::Lock, protocol, bounds)
}

fn explore_on(subject: Subject, protocol: Protocol, bounds: Bounds) -> Explored {
    let mut prefix = Some(Vec::new());
    let (mut schedules, mut most_points) = (0u64, 0usize);
    while let Some(p) = prefix {
        let (points, violations, trace) = run_on(subject, protocol, bounds, p);
        schedules += 1;
        most_points = most_points.max(points.len());
        if !violations.is_empty() {
            return Explored {
                schedules,
                most_points,
                counterexample: Some((points, violations, trace)),
            };
        }
        prefix = Dfs::next(&points);
    }
    Explored {
        schedules,
        most_points,
        counterexample: None,
    }
}

/// A schedule as `MODEL_REPLAY` takes it: `point:way` for each point that did not take its
/// first way (every other point takes its first).
fn choices_text(choices: &[u32]) -> String {
    let taken: Vec<String> = (choices.iter().enumerate())
        .filter(|(_, &c)| c != 0)
        .map(|(i, c)| format!("{i}:{c}"))
        .collect();
    taken.join(",")
}

/// The choices `choices_text` wrote.
fn parse_choices(text: &str) -> Vec<u32> {
    let mut choices = Vec::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let (at, way) = pair.trim().split_once(':').expect("point:way");
        let (at, way): (usize, u32) = (at.parse().unwrap(), way.parse().unwrap());
        if choices.len() <= at {
            choices.resize(at + 1, 0);
        }
        choices[at] = way;
    }
    choices
}

fn print_counterexample(protocol: Protocol, c: &Counterexample) {
    print_counterexample_on(Subject::Lock, protocol, c)
}

fn print_counterexample_on(subject: Subject, protocol: Protocol, c: &Counterexample) {
    let mut protocol_env = if protocol == Protocol::Lww {
        "MODEL_PROTOCOL=lww ".to_string()
    } else {
        String::new()
    };
    if let Some(name) = subject.name() {
        protocol_env.push_str(&format!("MODEL_SUBJECT={name} "));
    }
    println!(
        "{}: {}\nreplay: {protocol_env}MODEL_REPLAY={} cargo test --release --test model replay -- --ignored --nocapture",
        protocol.as_str(),
        c.1[0],
        choices_text(&choices(&c.0))
    );
    for (i, p) in c.0.iter().enumerate().filter(|(_, p)| p.taken != 0) {
        println!("  point {i} ({}): way {} of {}", p.what, p.taken, p.ways);
    }
    for line in &c.2 {
        println!("  {line}");
    }
}

#[test]
fn cas_keeps_every_property_in_every_schedule_within_the_bounds() {
    let bounds = Bounds::from_env();
    let began = std::time::Instant::now();
    let found = explore(Protocol::Cas, bounds);
    println!(
        "model cas: {bounds:?}: {} schedules, up to {} choice points each, {:.1}s",
        found.schedules,
        found.most_points,
        began.elapsed().as_secs_f64()
    );
    if let Some(c) = &found.counterexample {
        print_counterexample(Protocol::Cas, c);
        panic!("cas: {}", c.1[0]);
    }
    #[cfg(feature = "mutations")]
    every_branch_reached();
}

/// Every branch of the paths that decide who holds a lock and save requests
/// (src/protocol/cas/, the receipts of src/protocol/released.rs) was reached by the exploration
/// just run on this thread: how many runs reached each, and none never.
#[cfg(feature = "mutations")]
fn every_branch_reached() {
    let reached = blob_lock::mutation::take_reached();
    let mut never = Vec::new();
    for (branch, runs) in &reached {
        println!("  reached {branch:?}: {runs}");
        if *runs == 0 {
            never.push(*branch);
        }
    }
    assert!(
        never.is_empty(),
        "branches the model never reached: {never:?}"
    );
}

/// The explorer can find a violation: lww's documented ones (a request slower than the
/// settle wait, a stale read) are within one fault.
#[test]
fn the_explorer_finds_lwws_documented_violation_and_its_trace_replays() {
    let bounds = Bounds {
        faults: 1,
        ..Bounds::from_env()
    };
    let found = explore(Protocol::Lww, bounds);
    let c = found
        .counterexample
        .as_ref()
        .expect("lww breaks within one fault");
    println!("model lww: a violation after {} schedules", found.schedules);
    print_counterexample(Protocol::Lww, c);
    let (_, again, trace) = run(
        Protocol::Lww,
        bounds,
        parse_choices(&choices_text(&choices(&c.0))),
    );
    assert_eq!(again, c.1, "the choices replay the same violation");
    assert_eq!(trace, c.2, "and the same trace");
}

/// A semaphore on the same lockfiles and protocol: three contenders on two slots (two of
/// them tasks of one process), with every fault within the bounds and each change to its
/// configuration in turn (none; lowered to 1 and raised again while they wait; deleted;
/// corrupted; racing first writes), never have more holders than the stored number allows
/// (no slot at or above a lowered number taken anew), never two on one slot, each slot's
/// tokens grow, the configuration is never written again by a contender once lost; a
/// crashed holder's slot is taken within a lock's lifetime once the faults heal.
#[test]
fn a_semaphore_keeps_its_bound_in_every_schedule_within_the_bounds() {
    let bounds = Bounds::from_env();
    for change in Change::ALL {
        let began = std::time::Instant::now();
        let subject = Subject::Semaphore(change);
        let found = explore_on(subject, Protocol::Cas, bounds);
        println!(
            "model semaphore ({change:?}): {bounds:?}: {} schedules, up to {} choice points each, {:.1}s",
            found.schedules,
            found.most_points,
            began.elapsed().as_secs_f64()
        );
        if let Some(c) = &found.counterexample {
            print_counterexample_on(subject, Protocol::Cas, c);
            panic!("semaphore ({change:?}): {}", c.1[0]);
        }
    }
}

/// A tool, not a test: `MODEL_REPLAY=point:way,...` (and `MODEL_PROTOCOL=lww`,
/// `MODEL_SUBJECT=semaphore`) runs that schedule and prints its trace.
#[test]
#[ignore = "a tool: MODEL_REPLAY=point:way,... cargo test --release --test model replay -- --ignored --nocapture"]
fn replay() {
    let text = std::env::var("MODEL_REPLAY").expect(
        "MODEL_REPLAY names the schedule to replay: point:way,... as a counterexample prints it",
    );
    let choices = parse_choices(&text);
    let protocol = match std::env::var("MODEL_PROTOCOL").as_deref() {
        Ok("lww") => Protocol::Lww,
        _ => Protocol::Cas,
    };
    // MODEL_MUTATION=<name> (with --features mutations): the schedule with that bug seeded.
    #[cfg(feature = "mutations")]
    if let Ok(name) = std::env::var("MODEL_MUTATION") {
        use blob_lock::mutation::{seed, Mutation};
        let m = (Mutation::ALL.iter()).find(|m| format!("{m:?}") == name);
        seed(Some(*m.unwrap_or_else(|| {
            panic!("MODEL_MUTATION {name:?} is none of {:?}", Mutation::ALL)
        })));
    }
    let subject = Subject::named(&std::env::var("MODEL_SUBJECT").unwrap_or_default());
    let (points, violations, trace) = run_on(subject, protocol, Bounds::from_env(), choices);
    for line in trace {
        println!("  {line}");
    }
    // Every choice point of the run, for writing the next schedule to replay.
    for (i, p) in points.iter().enumerate() {
        println!("  point {i} ({}): way {} of {}", p.what, p.taken, p.ways);
    }
    println!("violations: {violations:?}");
}

/// Each seeded bug (src/mutation.rs) is caught: the explorer finds a schedule that breaks a
/// property, within the bounds. Run by `make model` (`--features mutations`).
#[cfg(feature = "mutations")]
#[test]
fn every_seeded_bug_is_caught() {
    let bounds = Bounds::from_env();
    // The fewest faults first: a bug one fault shows is caught in the hundreds of schedules
    // of that bound, not deep in the much larger one (the time goes to the cas run).
    let found = each_seeded_bug(|| {
        let (mut faults, mut tried) = (0, 0);
        use blob_lock::mutation::{seeded, Mutation};
        let subject = match seeded() {
            Some(Mutation::SemaphoreSharedOwner | Mutation::SemaphoreAskedNumber) => {
                Subject::Semaphore(Change::Steady)
            }
            Some(Mutation::SemaphoreUncheckedSlot | Mutation::ConfigWriteUnbounded) => {
                Subject::Semaphore(Change::Lowered)
            }
            Some(Mutation::SemaphoreConfigRecreated) => Subject::Semaphore(Change::Deleted),
            Some(Mutation::SemaphoreConfigReplaced) => Subject::Semaphore(Change::Corrupted),
            Some(Mutation::SemaphoreConfigOverwritten | Mutation::SemaphoreLostUnread) => {
                Subject::Semaphore(Change::FirstWrites)
            }
            _ => Subject::Lock,
        };
        loop {
            faults += 1;
            let found = explore_on(subject, Protocol::Cas, Bounds { faults, ..bounds });
            tried += found.schedules;
            if found.counterexample.is_some() || faults >= bounds.faults {
                return (faults, tried, found);
            }
        }
    });
    let mut missed = Vec::new();
    for (m, (faults, tried, found)) in &found {
        match &found.counterexample {
            Some(c) => println!(
                "seeded {m:?}: caught at {faults} fault(s), after {tried} schedules in all: {} (MODEL_REPLAY={})",
                c.1[0],
                choices_text(&choices(&c.0))
            ),
            None => missed.push(*m),
        }
    }
    assert!(
        missed.is_empty(),
        "seeded bugs not caught within {bounds:?}: {missed:?}"
    );
}
