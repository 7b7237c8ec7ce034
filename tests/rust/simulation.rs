//! Deterministic simulation of both lock protocols under adversarial timing.
//!
//! The real acquire / heartbeat / keep_alive / release code runs on tokio's paused clock (a
//! current-thread runtime: virtual time jumps whenever every task waits), against an
//! in-memory store whose faults a seed chooses:
//! - request latency from 0 to several times `expire`, different per request;
//! - writes that land but report an error, writes that fail without landing, transient read
//!   errors, and writes that land but come back as a conflict (a retried request);
//! - holders paused past `expire` (a GC or VM pause) and resumed, and holders that crash;
//! - each process's clock running fast or slow, within `DRIFT` of true time;
//! - in the eventual mode, reads that return a version up to `expire / 2` old.
//!
//! Orchestrators acquire, hold, sometimes start a remote that keeps the lock alive as a
//! co-owner (in half the seeds after sitting in a queue, with the lock handed off with a
//! launch grace, its orchestrator sometimes dying right after), and release or crash. The
//! oracle checks, on true virtual time: no two owners believe they hold the lock at the
//! same instant; tokens grow from holder to holder; a crashed holder's lock is taken over
//! within `expire` plus a poll (within the grace, after a hand-off), and not before the
//! grace unless its remote began writing; and on a healthy store no running holder is told
//! it lost the lock.
//!
//! `cargo test --release --test simulation` runs `SIM_SEEDS` seeds per protocol (default
//! 200) and prints `simulation <protocol>: <N> seeds, <V> violations`. A violation prints
//! the run's trace; `SIM_SEED=<seed>` replays exactly that run, trace included (with
//! `SIM_MODE=...` as the trace's first line says, for runs of the fault matrix).
//! `fault_matrix` runs each fault alone for `SIM_MATRIX_SEEDS` seeds per protocol and
//! prints the table of the guarantees (docs/guarantees.md).

mod sim;

use blob_lock::{keep_alive_on, Lock, Protocol};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sim::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// `best_effort`: every other release is the end of a `with` (best effort, in its patience).
async fn orchestrator(
    world: Arc<World>,
    i: usize,
    protocol: Protocol,
    faults: Faults,
    seed: u64,
    best_effort: bool,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    let p = Process::new(&world, &format!("o{i}"), &faults, &mut rng);
    let mut remotes = Vec::new();
    for round in 0..4 {
        let owner = format!("o{i}.{round}");
        let lock = p.lock(round, protocol, &owner);
        p.pauses.wait().await;
        let timeout = Duration::from_secs_f64(rng.random_range(0.5..6.0) * EXPIRE);
        world.log(&p.name, format!("acquire as {owner}"));
        // Half the orchestrators wait in slices (as claim_memo does, checking for a result
        // between them), which what the process watched joins into one wait. From the
        // seed's bits, so that the other draws of each seed stay as they were.
        let slice = ((seed >> 7) & 1 == 1)
            .then(|| Duration::from_secs_f64((0.05 + ((seed >> 8) % 8) as f64 * 0.05) * EXPIRE));
        let acquiring = async {
            match slice {
                Some(slice) => acquire_in_slices(&lock, timeout, slice).await,
                None => lock.acquire(Some(timeout)).await,
            }
        };
        let bound = p.acquire_bound(timeout);
        let Some(acquired) = world.within(&p.name, "acquire", bound, acquiring).await else {
            continue;
        };
        let lease = match acquired {
            Ok(lease) => Arc::new(lease),
            Err(e) => {
                world.log(&p.name, format!("acquire failed: {e}"));
                tokio::time::sleep(Duration::from_secs_f64(rng.random_range(0.0..1.0) * EXPIRE))
                    .await;
                continue;
            }
        };
        world.log(&p.name, format!("acquired {owner} token {}", lease.token()));
        world.event(Event::Acquired {
            owner: owner.clone(),
            token: lease.token(),
            at: world.t(),
        });
        // Sometimes a remote keeps the lock alive too. The orchestrator releases only after
        // its remote's work ended, as the protocol asks; if it crashes, the remote goes on.
        let mut this_remote = None;
        // In half the seeds a launched remote sits in a queue first, and its orchestrator
        // hands the lock off with a launch grace (and sometimes dies right after). Drawn
        // from a generator of their own, so that the other draws of each seed stay as they
        // were; and from seed bit 4, which the named seeds below do not have.
        let mut hrng = StdRng::seed_from_u64(seed ^ 0x6a0f ^ round);
        let hand_off = (seed >> 4) & 1 == 1 && hrng.random::<f64>() < 0.6;
        let queued = if hand_off {
            Duration::from_secs_f64(hrng.random_range(0.3..1.5) * GRACE)
        } else {
            Duration::ZERO
        };
        if rng.random::<f64>() < 0.4 {
            let r = Process::new(&world, &format!("r{i}.{round}"), &faults, &mut rng);
            let live = Duration::from_secs_f64(rng.random_range(0.5..5.0) * EXPIRE);
            let (of, rseed) = (owner.clone(), rng.random());
            this_remote = Some(tokio::spawn(async move {
                remote(r, of, protocol, queued, live, rseed).await
            }));
            if hand_off {
                let at = world.t();
                // Tried: a hand-off that fails may still land (an error after the write),
                // and then holds the lock for the grace as a successful one does.
                world.event(Event::HandOffTried { grace: GRACE, at });
                match lease.hand_off(Duration::from_secs_f64(GRACE)).await {
                    Ok(()) if faults.crashes && hrng.random::<f64>() < 0.5 => {
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
        }
        let until = Instant::now() + Duration::from_secs_f64(rng.random_range(0.0..3.0) * EXPIRE);
        let kept = p.hold(&lease, until, &mut rng, false).await;
        if faults.crashes && rng.random::<f64>() < 0.2 {
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
            let best_effort = best_effort && round % 2 == 1;
            p.release(&lock, lease, &owner, protocol, best_effort).await;
        }
        tokio::time::sleep(Duration::from_secs_f64(rng.random_range(0.0..1.0) * EXPIRE)).await;
    }
    for r in remotes {
        r.await.unwrap();
    }
}

/// A wait cut into slices of at most `slice`, as a caller that checks something between
/// them makes it.
async fn acquire_in_slices(
    lock: &Lock,
    timeout: Duration,
    slice: Duration,
) -> blob_lock::Result<blob_lock::Lease> {
    let end = Instant::now() + timeout;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match lock.acquire(Some(slice.min(left))).await {
            Err(blob_lock::Error::Timeout { .. }) if Instant::now() < end => continue,
            other => return other,
        }
    }
}

async fn remote(
    p: Process,
    owner: String,
    protocol: Protocol,
    queued: Duration,
    live: Duration,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    if !queued.is_zero() {
        tokio::time::sleep(queued).await;
    }
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
    p.world.log(
        &p.name,
        format!("keeps {owner} alive, token {}", lease.token()),
    );
    p.hold(&lease, Instant::now() + live, &mut rng, true).await;
    lease.stop().await;
    p.world.log(&p.name, format!("stops keeping {owner} alive"));
}

fn mode_of(seed: u64) -> Mode {
    match seed % 4 {
        0 => Mode::Healthy,
        3 => Mode::Eventual,
        _ => Mode::Faulty,
    }
}

async fn simulate(seed: u64, protocol: Protocol, mode: Mode) -> Outcome {
    let world = World::new();
    let faults = Faults::of(mode);
    let mut rng = StdRng::seed_from_u64(seed);
    let n = rng.random_range(2..=4);
    world.log(
        "sim",
        format!(
            "seed {seed} protocol {} mode {mode:?}, {n} orchestrators",
            protocol.as_str()
        ),
    );
    // In a quarter of the seeds (bits 5 and 6, which no named seed below has both of),
    // every other release is the end of a `with`.
    let best_effort = (seed >> 5) & 3 == 3;
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            tokio::spawn(orchestrator(
                world.clone(),
                i,
                protocol,
                faults.clone(),
                rng.random(),
                best_effort,
            ))
        })
        .collect();
    // In the seeds with bit 3 (none of the named seeds below has it), an operator prunes
    // after each release, its choices from a generator of their own so that every other
    // draw of the seed stays as it was.
    let done = Arc::new(AtomicBool::new(false));
    let prune = ((seed >> 3) & 1 == 1).then(|| {
        let choose: Shared = Arc::new(Mutex::new(StdRng::seed_from_u64(seed ^ 0x9e1e7e)));
        let how = Pruning {
            faults: faults.clone(),
            offset: None,
            maybe: false,
            once: false,
        };
        tokio::spawn(pruner(world.clone(), protocol, choose, done.clone(), how))
    });
    for t in tasks {
        t.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    world.news.notify_waiters();
    if let Some(prune) = prune {
        prune.await.unwrap();
    }
    // Final phase: faults off, requests in flight landed; a crashed holder's lock must then
    // be taken over within expire plus a poll.
    world.healed.store(true, Ordering::SeqCst);
    tokio::time::sleep(faults.slow_latency * 2 + Duration::from_secs(1)).await;
    let mut final_rng = StdRng::seed_from_u64(seed ^ 0xf1);
    let fin = Process::new(&world, "final", &Faults::of(Mode::Healthy), &mut final_rng);
    let began = world.t();
    let lock = Lock::with_store("sim", fin.store(99), &fin.options(protocol)).with_owner("final");
    let mut violations = Vec::new();
    match lock
        .acquire(Some(Duration::from_secs_f64(EXPIRE * 20.0)))
        .await
    {
        Ok(lease) => {
            let waited = world.t() - began;
            world.log(
                "final",
                format!("acquired token {} after {waited:.3}s", lease.token()),
            );
            world.event(Event::Acquired {
                owner: "final".into(),
                token: lease.token(),
                at: world.t(),
            });
            // Within expire plus a poll, counted from the first sighting (no wall clock
            // here); the grace instead when the last holder handed off (its last write
            // may carry it).
            let events = world.events.lock().unwrap().clone();
            let last_acquired = events.iter().rev().find_map(|e| match e {
                Event::Acquired { owner, at, .. } if owner != "final" => Some(*at),
                _ => None,
            });
            let handed = events.iter().any(|e| {
                matches!(e, Event::HandOffTried { at, .. } if last_acquired.is_some_and(|t| *at >= t))
            });
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
    violations.extend(check(&events, mode));
    violations.extend(told_lost_only_when_lost(&world));
    violations.extend(only_the_holder_deletes(&world));
    let trace = world.trace.lock().unwrap().clone();
    Outcome {
        mode,
        violations,
        progress: world.progress(),
        trace,
        deletes: deletes(&world),
    }
}

fn run_one(seed: u64, protocol: Protocol, mode: Mode) -> Outcome {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(simulate(seed, protocol, mode))
}

/// What a campaign found.
struct Campaign {
    seeds: u64,
    /// The seeds whose runs broke safety.
    unsafe_seeds: Vec<u64>,
    /// The seeds whose runs broke progress.
    late_seeds: Vec<u64>,
    /// Lockfiles deleted by prune.
    deletes: usize,
}

/// Runs the seeds of one protocol.
fn campaign(protocol: Protocol, print_failures: bool) -> Campaign {
    if let Ok(one) = std::env::var("SIM_SEED") {
        let seed: u64 = one.parse().expect("SIM_SEED is a number");
        // The campaigns pick the mode from the seed; the fault matrix names it.
        let mode = match std::env::var("SIM_MODE") {
            Ok(name) => Mode::named(&name)
                .unwrap_or_else(|| panic!("SIM_MODE {name:?} is none of {:?}", Mode::all())),
            Err(_) => mode_of(seed),
        };
        let out = run_one(seed, protocol, mode);
        report(seed, protocol, &out);
        let seeds_if = |broken: bool| if broken { vec![seed] } else { vec![] };
        return Campaign {
            seeds: 1,
            unsafe_seeds: seeds_if(!out.violations.is_empty()),
            late_seeds: seeds_if(!out.progress.is_empty()),
            deletes: out.deletes,
        };
    }
    let n: u64 = std::env::var("SIM_SEEDS")
        .ok()
        .map(|s| s.parse().expect("SIM_SEEDS is a number"))
        .unwrap_or(200);
    let (mut unsafe_seeds, mut late_seeds) = (Vec::new(), Vec::new());
    let modes = [Mode::Healthy, Mode::Faulty, Mode::Eventual];
    let mut per_mode = [(0u64, 0u64, 0u64); 3];
    let (mut pruned_runs, mut deletes) = (0, 0);
    for seed in 0..n {
        let mode = mode_of(seed);
        let out = run_one(seed, protocol, mode);
        let m = modes.iter().position(|x| *x == mode).unwrap();
        per_mode[m].0 += 1;
        pruned_runs += u64::from(out.deletes > 0);
        deletes += out.deletes;
        let (broke, late) = (!out.violations.is_empty(), !out.progress.is_empty());
        if print_failures && (broke || late) && unsafe_seeds.is_empty() && late_seeds.is_empty() {
            report(seed, protocol, &out);
        }
        if broke {
            per_mode[m].1 += 1;
            unsafe_seeds.push(seed);
        }
        if late {
            per_mode[m].2 += 1;
            late_seeds.push(seed);
        }
    }
    for (mode, (runs, broken, late)) in modes.iter().zip(per_mode) {
        println!(
            "simulation {} {mode:?}: {broken} of {runs} seeds with violations of safety, {late} of progress",
            protocol.as_str()
        );
    }
    println!(
        "simulation {}: {deletes} lockfiles deleted by prune in {pruned_runs} of {n} seeds",
        protocol.as_str()
    );
    Campaign {
        seeds: n,
        unsafe_seeds,
        late_seeds,
        deletes,
    }
}

/// A tool, not a test: lists the first seeds at which lww breaks in `mode`, for finding
/// regression seeds.
#[test]
#[ignore = "a tool: SIM_FIND=slow|stale|<mode> cargo test --release --test simulation find -- --ignored --nocapture"]
fn find() {
    let mode = match std::env::var("SIM_FIND").as_deref() {
        Ok("slow") => Mode::SlowWriter,
        Ok("stale") => Mode::StaleReads,
        Ok(name) => Mode::named(name).unwrap_or_else(|| {
            panic!(
                "SIM_FIND {name:?} is none of slow, stale, {:?}",
                Mode::all()
            )
        }),
        Err(_) => panic!(
            "SIM_FIND names the mode to search: slow, stale, or one of {:?}",
            Mode::all()
        ),
    };
    let bad: Vec<u64> = (0..2000)
        .filter(|&s| !run_one(s, Protocol::Lww, mode).violations.is_empty())
        .take(5)
        .collect();
    println!("lww {mode:?}: violating seeds {bad:?}");
}

#[test]
fn simulation_cas() {
    let Campaign {
        seeds: n,
        unsafe_seeds,
        late_seeds,
        deletes,
    } = campaign(Protocol::Cas, true);
    println!(
        "simulation cas: {n} seeds, {} with violations of safety, {} of progress",
        unsafe_seeds.len(),
        late_seeds.len()
    );
    assert!(
        unsafe_seeds.is_empty(),
        "cas violated the oracle at seeds {unsafe_seeds:?}"
    );
    assert!(
        late_seeds.is_empty(),
        "cas broke progress at seeds {late_seeds:?}"
    );
    // Tokens are checked across deletes only where prune deleted something.
    assert!(
        n < 100 || deletes > 0,
        "prune deleted no lockfile in {n} seeds: tokens were never checked across a delete"
    );
}

/// The semaphore's campaign: `SIM_SEEDS / 4` seeds (`SIM_SEED` replays one) of the semaphore's
/// scenario (tests/rust/sim/semaphore.rs) in the campaigns' modes, three rounds each; the
/// seeds run and those with violations (the first one's trace printed if `print_failures`).
fn semaphore_campaign(print_failures: bool) -> (u64, Vec<u64>) {
    let seeds: Vec<u64> = match std::env::var("SIM_SEED") {
        Ok(one) => vec![one.parse().expect("SIM_SEED is a number")],
        Err(_) => {
            let n: u64 = std::env::var("SIM_SEEDS")
                .ok()
                .map(|s| s.parse().expect("SIM_SEEDS is a number"))
                .unwrap_or(200);
            (0..n / 4).collect()
        }
    };
    let mut bad = Vec::new();
    for &seed in &seeds {
        let out = run_semaphore(seed);
        if !out.violations.is_empty() {
            if print_failures && bad.is_empty() {
                report(seed, Protocol::Cas, &out);
            }
            bad.push(seed);
        }
    }
    (seeds.len() as u64, bad)
}

/// One seed of the semaphore's campaign: its mode and change from the seed.
fn run_semaphore(seed: u64) -> Outcome {
    let mode = mode_of(seed);
    let choose: Shared = Arc::new(std::sync::Mutex::new(StdRng::seed_from_u64(seed)));
    let (violations, trace) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(semaphore_scenario(
            Protocol::Cas,
            Faults::of(mode),
            3,
            choose,
            World::new(),
            Change::of_seed(seed),
        ));
    Outcome {
        mode,
        violations,
        progress: Vec::new(), // among the violations: the model's scenario checks both
        trace,
        deletes: 0,
    }
}

/// A slot is never reported held once its lease ran out while the acquisition read the
/// number above it. At these seeds (found at 10,000) a contender won slot 1, its read of the
/// number took several lifetimes (a slow answer), another took the slot over meanwhile with
/// a larger token, and the first was then reported holding it with the smaller one.
#[test]
fn a_slot_whose_lease_ran_out_during_the_number_check_is_not_reported_held() {
    for seed in [557, 587, 1053] {
        let out = run_semaphore(seed);
        if !out.violations.is_empty() {
            report(seed, Protocol::Cas, &out);
            panic!("semaphore at seed {seed}: {}", out.violations[0]);
        }
    }
}

/// A semaphore on random faults: three contenders on two slots. Never more holders than
/// slots, never two on one slot, tokens growing per slot, and a slot for the last comer
/// within a lock's lifetime.
#[test]
fn simulation_semaphore() {
    let (n, bad) = semaphore_campaign(true);
    println!(
        "simulation semaphore: {n} seeds, {} with violations",
        bad.len()
    );
    assert!(bad.is_empty(), "the semaphore broke at seeds {bad:?}");
}

/// lww is best effort: it has violations under these faults (docs/guarantees.md), and the
/// ones we understand are kept as named tests below. A campaign of 100 seeds or more must
/// show them (a quarter of the seeds do), or the simulation no longer injects what breaks
/// lww and its clean cas runs would prove nothing.
#[test]
fn simulation_lww() {
    let Campaign {
        seeds: n,
        unsafe_seeds: bad,
        late_seeds,
        ..
    } = campaign(Protocol::Lww, false);
    println!(
        "simulation lww: {n} seeds, {} with violations of safety, {} of progress",
        bad.len(),
        late_seeds.len()
    );
    if !bad.is_empty() {
        println!(
            "simulation lww: first violating seeds {:?}",
            &bad[..bad.len().min(10)]
        );
    }
    if n >= 100 {
        assert!(
            bad.len() as u64 >= n / 20,
            "lww broke at only {} of {n} seeds: the faults that break it are no longer injected",
            bad.len()
        );
    }
}

/// Which protocol survives which fault: for each fault alone (and all together),
/// `SIM_MATRIX_SEEDS` seeds per protocol, printed as the table in docs/guarantees.md.
/// cas must survive every row; lww's counts are what it really does. The default is small,
/// for a quick run; the test command runs it with more, optimised (the `sim` profile).
#[test]
fn fault_matrix() {
    let n: u64 = std::env::var("SIM_MATRIX_SEEDS")
        .ok()
        .map(|s| s.parse().expect("SIM_MATRIX_SEEDS is a number"))
        .unwrap_or(5);
    let rows = [
        (
            "none: latency up to 30 ms, clock drift within 4%, crashed holders",
            Mode::Healthy,
        ),
        (
            "4% of requests delayed up to 3 x expire",
            Mode::Only(Fault::SlowRequests),
        ),
        (
            "3% of writes lost before landing",
            Mode::Only(Fault::LostWrites),
        ),
        (
            "3% of writes land but report an error",
            Mode::Only(Fault::GhostWrites),
        ),
        (
            "3% of writes land but report a conflict (retried request)",
            Mode::Only(Fault::EchoedConflicts),
        ),
        ("3% of reads fail", Mode::Only(Fault::ReadErrors)),
        (
            "holders paused 0.5-3 x expire (GC, VM), then resumed",
            Mode::Only(Fault::Pauses),
        ),
        (
            "reads up to expire / 2 stale (eventual consistency)",
            Mode::Only(Fault::StaleReads),
        ),
        ("all of the above but stale reads", Mode::Faulty),
        ("all of the above", Mode::Eventual),
    ];
    // Printed in one piece at the end: the campaigns run beside it and print too.
    let mut table = format!(
        "| fault ({n} seeds each) | cas: runs with a violation (of safety or progress) | lww: runs with a violation of safety |\n"
    );
    table += "|---|---|---|\n";
    let mut cas_bad = Vec::new();
    let mut lww_unbroken = Vec::new();
    for (name, mode) in rows {
        let count = |protocol| {
            (0..n)
                .filter(|&seed| {
                    let out = run_one(seed, protocol, mode);
                    // cas: safety and progress; lww: its documented breaks, safety.
                    let bad = !out.violations.is_empty()
                        || (protocol == Protocol::Cas && !out.progress.is_empty());
                    if bad && protocol == Protocol::Cas {
                        report(seed, protocol, &out);
                    }
                    bad
                })
                .count()
        };
        let (cas, lww) = (count(Protocol::Cas), count(Protocol::Lww));
        table += &format!("| {name} | {cas} | {lww} |\n");
        if cas > 0 {
            cas_bad.push(format!("{mode:?}: {cas} seeds"));
        }
        // The rows that break lww as documented (a fifth of their seeds or more at 1,000):
        // they must still show it at 20 seeds or more, or the fault is no longer injected.
        let breaks_lww = matches!(mode, Mode::Only(Fault::SlowRequests | Fault::StaleReads))
            || matches!(mode, Mode::Faulty | Mode::Eventual);
        if breaks_lww && n >= 20 && lww == 0 {
            lww_unbroken.push(format!("{mode:?}"));
        }
    }
    print!("{table}");
    assert!(
        cas_bad.is_empty(),
        "cas violated the oracle (traces above): {cas_bad:?}"
    );
    assert!(
        lww_unbroken.is_empty(),
        "lww never broke in rows that break it: {lww_unbroken:?}"
    );
}

fn assert_lww_breaks_and_cas_holds(seed: u64, mode: Mode) {
    let lww = run_one(seed, Protocol::Lww, mode);
    if lww.violations.is_empty() {
        report(seed, Protocol::Lww, &lww);
        panic!("lww no longer shows its known failure at seed {seed} ({mode:?})");
    }
    println!("lww at seed {seed} ({mode:?}): {}", lww.violations[0]);
    if std::env::var("SIM_TRACE").is_ok() {
        report(seed, Protocol::Lww, &lww);
    }
    let cas = run_one(seed, Protocol::Cas, mode);
    if !cas.violations.is_empty() {
        report(seed, Protocol::Cas, &cas);
        panic!("cas broke on the schedule that breaks lww");
    }
}

/// lww's first weakness: a request delayed longer than the settle wait (here a slow read,
/// then a write based on it) lands after another writer has read back its own id and
/// claimed the lock. Smallest seed showing two holders at once (SIM_FIND=slow: 16 showed
/// it until acquisitions that time out release what they may have written whatever they
/// read last, and 12 since).
#[test]
fn lww_two_holders_when_a_request_is_delayed_past_the_settle_wait() {
    assert_lww_breaks_and_cas_holds(12, Mode::SlowWriter);
}

/// lww's second weakness: on an eventually consistent store, two writers each read back
/// their own id. Smallest seed showing it.
#[test]
fn lww_two_holders_on_an_eventually_consistent_store() {
    assert_lww_breaks_and_cas_holds(0, Mode::StaleReads);
}

/// A write of unknown outcome, which a read shows landed, counts only once a conditional
/// renewal on it lands too. At this seed an orchestrator waiting in slices had a write
/// released by its own earlier slice; a stale read showed that write (same owner, same
/// token) and the next slice took it for its own, beside the real holder. Kept because it
/// broke cas before the confirmation.
#[test]
fn cas_does_not_take_a_stale_read_of_its_own_released_write_for_an_acquisition() {
    let out = run_one(1063, Protocol::Cas, Mode::Eventual);
    if !out.violations.is_empty() {
        report(1063, Protocol::Cas, &out);
        panic!("cas: {}", out.violations[0]);
    }
}

/// A release whose answer was lost is never told lost by a read older than its own
/// acquisition. At this seed (found at 10,000 seeds) o1.3's release (token 5) landed and was
/// reported as an error, its resend was refused, and the reads that followed went back in
/// time to the previous holder's release (token 4): the release answered `already_released`,
/// telling a holder whose release had landed that it had lost the lock. A read with a token
/// below ours now leaves the release unknown (read again within its time), never lost.
#[test]
fn cas_does_not_take_a_read_older_than_its_acquisition_for_a_loss_at_release() {
    let out = run_one(9047, Protocol::Cas, Mode::Eventual);
    if !out.violations.is_empty() {
        report(9047, Protocol::Cas, &out);
        panic!("cas: {}", out.violations[0]);
    }
}

/// A release whose write landed and whose answer was lost is not told lost when prune
/// deletes the released lockfile before the release reads again. At this seed (found at
/// 10,000 seeds, once prune ran in the simulation) o1.0's release landed and came back as
/// an error, its resends were refused while reads lagged behind, prune took the released
/// lock and deleted it, and the release then found no lockfile: it answered `no_lockfile`,
/// telling a holder whose release had landed that it had lost the lock.
#[test]
fn cas_does_not_take_a_pruned_lockfile_for_a_loss_after_its_release_landed() {
    let out = run_one(5291, Protocol::Cas, Mode::Eventual);
    if !out.violations.is_empty() {
        report(5291, Protocol::Cas, &out);
        panic!("cas: {}", out.violations[0]);
    }
}

/// The seeded bugs of the model check (tests/rust/model.rs, src/mutation.rs) against this random
/// campaign at `SIM_SEEDS` seeds: at how many seeds it finds each (docs/guarantees.md sets
/// the two side by side). A report, not a test: `make model` prints it.
#[cfg(feature = "mutations")]
#[test]
#[ignore = "a report: make model (cargo test --release --no-default-features --features mutations --test simulation seeded -- --ignored --nocapture)"]
fn seeded_bugs_in_the_random_campaign() {
    use blob_lock::mutation::{seeded, Mutation};
    // The semaphore's bugs against the semaphore's campaign, the lock's against the lock's.
    let found = each_seeded_bug(|| match seeded() {
        Some(
            Mutation::SemaphoreSharedOwner
            | Mutation::SemaphoreAskedNumber
            | Mutation::SemaphoreUncheckedSlot
            | Mutation::SemaphoreConfigRecreated
            | Mutation::SemaphoreConfigReplaced
            | Mutation::SemaphoreConfigOverwritten
            | Mutation::SemaphoreLostUnread
            | Mutation::ConfigWriteUnbounded,
        ) => semaphore_campaign(false),
        _ => {
            let found = campaign(Protocol::Cas, false);
            let mut bad = found.unsafe_seeds;
            bad.extend(found.late_seeds);
            bad.sort();
            bad.dedup();
            (found.seeds, bad)
        }
    });
    for (m, (n, bad)) in found {
        println!(
            "seeded {m:?}: the random simulation found it at {} of {n} seeds (first: {:?})",
            bad.len(),
            bad.first()
        );
    }
}
