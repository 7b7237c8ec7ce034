//! A semaphore in the simulated world, for the simulation's campaign and the model check:
//! three contenders on two slots, two of them in one process sharing its `Semaphore` (as the
//! threads or tasks of one orchestrator do), the third in another process that asks for
//! three slots where two are stored. Each acquires a slot, holds it (checking its lease as
//! a holder does), and releases it or crashes; then, every fault healed, a last process
//! must get a slot within a lock's lifetime. The oracle (`semaphore_oracle.rs`): never more
//! holders than the stored number, never two on one slot, each slot's tokens growing.
//!
//! Each run makes one [`Change`] to the configuration while the contenders work: none, the
//! number lowered and raised again by an operator, the configuration deleted or corrupted
//! (and stored again by the operator before the last process comes), or no configuration at
//! first, so that the two processes' first writes race with different numbers.
//!
//! The configuration is read without lag here (the slots keep every fault): the bound on a
//! lowered number rests on a read after `set_slots` returned seeing it, as it does on S3,
//! Azure Blob, GCS and local files.

use super::*;
use blob_lock::semaphore::config::{CONFIG_NAME, SET_TRIES};
use blob_lock::semaphore::Opener;
use blob_lock::Semaphore;

/// What happens to the configuration during a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing.
    Steady,
    /// An operator lowers the number to 1 while the contenders work, then raises it to 2.
    Lowered,
    /// An operator deletes the configuration, and stores it again once the contenders end.
    Deleted,
    /// An operator writes something unreadable over it, and stores it again at the end.
    Corrupted,
    /// No configuration at first: the two processes' first writes (2 and 3 asked) race.
    FirstWrites,
}

impl Change {
    pub const ALL: [Change; 5] = [
        Change::Steady,
        Change::Lowered,
        Change::Deleted,
        Change::Corrupted,
        Change::FirstWrites,
    ];

    /// The change of a campaign's seed.
    pub fn of_seed(seed: u64) -> Change {
        Change::ALL[(seed / 3 % Change::ALL.len() as u64) as usize]
    }
}

/// The number of slots stored before the contenders start.
pub const SLOTS: usize = 2;

/// One process's semaphore: each object under the prefix is its own view of that object's
/// true history in `world`.
pub fn semaphore(p: &Arc<Process>, asked: usize, protocol: Protocol) -> Arc<Semaphore> {
    let views = p.clone();
    let open: Opener = Arc::new(move |name: &str| {
        let salt = name
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
        let mut store = views.store_of(name, salt);
        if name == CONFIG_NAME {
            let view = Arc::get_mut(&mut store).expect("just made");
            view.faults.stale_for = Duration::ZERO;
        }
        store as Arc<dyn LockStore>
    });
    Arc::new(Semaphore::with_stores("sim/sem", asked, &p.options(protocol), open).unwrap())
}

/// The configuration, as the first orchestrator on the prefix would have written it,
/// stored before anyone starts.
pub fn store_configuration(world: &World) {
    let body = serde_json::json!({
        "semaphore": 1, "slots": SLOTS, "set_by": "setup", "set_at": "2026-01-01T00:00:00Z"
    });
    world.object(CONFIG_NAME).lock().unwrap().push(Stored {
        bytes: Bytes::from(body.to_string()),
        version: 1,
        at: Instant::now(),
    });
}

/// A contender: `rounds` acquisitions as `who.<round>`, each held for a while, then released,
/// or dropped as a crash would drop it.
pub async fn contender(
    p: Arc<Process>,
    semaphore: Arc<Semaphore>,
    who: String,
    rounds: u32,
    choose: Shared,
) {
    let world = p.world.clone();
    for round in 0..rounds {
        let owner = format!("{who}.{round}");
        p.pauses.wait().await;
        world.log(&p.name, format!("{owner} acquires a slot"));
        let timeout = Duration::from_secs_f64(8.0 * EXPIRE);
        let bound = on_slowest_clock(timeout + semaphore.timing().request_timeout());
        let acquiring = semaphore.acquire_as(&owner, Some(timeout));
        let permit = match world.within(&p.name, "acquire_as", bound, acquiring).await {
            None => continue,
            Some(Ok(permit)) => permit,
            Some(Err(e)) => {
                world.log(&p.name, format!("{owner}: acquire failed: {e}"));
                // Refused as lost: the oracle checks that it was (`ConfigRefused`).
                if let blob_lock::Error::Store { uri, kind, .. } = &e {
                    if *kind == blob_lock::StoreErrorKind::Permanent && uri.ends_with(CONFIG_NAME) {
                        world.event(Event::ConfigRefused { at: world.t() });
                    }
                }
                continue;
            }
        };
        let (slot, token) = (permit.slot(), permit.lease().token());
        world.log(&p.name, format!("{owner} took slot {slot}, token {token}"));
        world.event(Event::SlotAcquired {
            who: owner.clone(),
            slot,
            token,
            at: world.t(),
        });
        let held_for = choose
            .lock()
            .unwrap()
            .within(0.2, 2.0, false, "how long it holds");
        let until = Instant::now() + Duration::from_secs_f64(held_for * EXPIRE);
        let mut lost = false;
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_secs_f64(0.01 * EXPIRE)).await;
            p.pauses.wait().await;
            if permit.lease().is_lost() {
                world.log(&p.name, format!("{owner} sees slot {slot} lost"));
                lost = true;
                break;
            }
            world.event(Event::SlotBelief {
                who: owner.clone(),
                slot,
                token,
                at: world.t(),
            });
        }
        if choose.lock().unwrap().chance(0.2, "crash while holding") {
            world.log(&p.name, format!("{owner} crashes holding slot {slot}"));
            drop(permit);
            return;
        }
        if !lost {
            match permit.release().await {
                Ok(status) => world.log(
                    &p.name,
                    format!("{owner} releases slot {slot}: {}", status.as_str()),
                ),
                Err(e) => world.log(&p.name, format!("{owner}: release failed: {e}")),
            }
        }
    }
}

/// The operator's change while the contenders work, on a healthy process of its own (each
/// of its writes lands once, and is counted as the operator's: `Event::ConfigWritten`).
async fn operator(p: Arc<Process>, protocol: Protocol, change: Change, choose: Shared) {
    let world = p.world.clone();
    let sem = semaphore(&p, SLOTS, protocol);
    // (Its `within` draws are the choices of when; made where they are used.)
    let wait = |lo: f64, hi: f64, what: &'static str| {
        let f = choose.lock().unwrap().within(lo, hi, false, what);
        tokio::time::sleep(Duration::from_secs_f64(f * EXPIRE))
    };
    match change {
        Change::Steady | Change::FirstWrites => {}
        Change::Lowered => {
            wait(0.1, 1.5, "when the number is lowered").await;
            set(&world, &sem, 1).await;
            wait(0.5, 2.0, "when it is raised again").await;
            set(&world, &sem, SLOTS).await;
        }
        Change::Deleted | Change::Corrupted => {
            // After the slots were first written by more than a read can lag (`stale_for`,
            // half a lifetime): a loss the contenders can tell from a new semaphore.
            wait(1.0, 2.0, "when the configuration is lost").await;
            let store = p.store_of(CONFIG_NAME, 0);
            let lost = match change {
                Change::Deleted => store.delete().await.map(|_| "deleted"),
                _ => store
                    .overwrite(Bytes::from_static(b"{\"semaphore\": 1, \"slo"))
                    .await
                    .map(|_| "corrupted"),
            };
            world.log(&p.name, format!("the configuration: {lost:?}"));
            world.event(Event::ConfigLost { at: world.t() });
            world.event(Event::ConfigWritten { at: world.t() });
        }
    }
}

/// The operator's `set_slots(n)`, noted when it stored the number; within its bound: its
/// tries, each a read (three, a poll apart, of one unreadable), a write and a pause.
async fn set(world: &World, sem: &Semaphore, n: usize) {
    let t = sem.timing();
    let window = (t.heartbeat / 2 + t.poll_min * 2) * SET_TRIES as u32;
    let bound = on_slowest_clock(window)
        + longest_request(&Faults::of(Mode::Healthy)) * 4 * SET_TRIES as u32;
    let Some(set) = world
        .within("op", "set_slots", bound, sem.set_slots(n))
        .await
    else {
        return;
    };
    world.log(
        "op",
        format!("set_slots({n}): {:?}", set.as_ref().map(|s| s.slots)),
    );
    if set.is_ok() {
        world.event(Event::ConfigWritten { at: world.t() });
    }
}

/// One run: the contenders (and the operator's `change`), then the last acquisition once
/// every fault is healed; what the oracle found, and the trace.
pub async fn semaphore_scenario(
    protocol: Protocol,
    faults: Faults,
    rounds: u32,
    choose: Shared,
    world: Arc<World>,
    change: Change,
) -> (Vec<String>, Vec<String>) {
    if change != Change::FirstWrites {
        store_configuration(&world);
    }
    let process = |name: &str, faults: &Faults| {
        let mut c = choose.lock().unwrap();
        Arc::new(Process::new(&world, name, faults, &mut *c))
    };
    let (a, b) = (process("a", &faults), process("b", &faults));
    // An operator only where it changes something: each process makes choices (its clock).
    let op = matches!(
        change,
        Change::Lowered | Change::Deleted | Change::Corrupted
    )
    .then(|| {
        let mut c = choose.lock().unwrap();
        let mut op = Process::new(&world, "op", &Faults::of(Mode::Healthy), &mut *c);
        // Lowering, its store (or a proxy before it) may refuse every update-if-match. (In
        // the random campaign from a stream of its own: each named seed keeps its schedule.)
        if change == Change::Lowered {
            op.faults.refuse_updates = match world.explorer {
                Some(_) => c.chance(0.2, "the store refuses every update"),
                None => StdRng::seed_from_u64(op.seed ^ 0x4ef05e).random::<f64>() < 0.2,
            };
        }
        Arc::new(op)
    });
    let (shared, other) = (
        semaphore(&a, SLOTS, protocol),
        semaphore(&b, SLOTS + 1, protocol),
    );
    let operating = op
        .clone()
        .map(|op| tokio::spawn(operator(op, protocol, change, choose.clone())));
    let tasks = [
        (a.clone(), shared.clone(), "a1"),
        (a.clone(), shared, "a2"),
        (b, other, "b"),
    ]
    .map(|(p, s, who)| tokio::spawn(contender(p, s, who.into(), rounds, choose.clone())));
    for t in tasks {
        t.await.unwrap();
    }
    if let Some(operating) = operating {
        operating.await.unwrap();
    }
    if let (Some(op), Change::Deleted | Change::Corrupted) = (&op, change) {
        // The operator stores the number again, as the error told everyone to.
        set(&world, &semaphore(op, SLOTS, protocol), SLOTS).await;
    }
    world
        .healed
        .store(true, std::sync::atomic::Ordering::SeqCst);
    tokio::time::sleep(faults.slow_latency * 2 + Duration::from_secs(1)).await;
    let last = {
        let mut c = choose.lock().unwrap();
        Arc::new(Process::new(
            &world,
            "last",
            &Faults::of(Mode::Healthy),
            &mut *c,
        ))
    };
    let began = world.t();
    let mut violations = Vec::new();
    match semaphore(&last, SLOTS, protocol)
        .acquire_as("last", Some(Duration::from_secs_f64(EXPIRE * 20.0)))
        .await
    {
        Ok(permit) => {
            let waited = world.t() - began;
            let bound = EXPIRE * (1.0 + DRIFT) / (1.0 - DRIFT) + 1.0;
            if waited > bound {
                violations.push(format!(
                    "the last acquisition waited {waited:.3}s for a slot, more than {bound:.3}s"
                ));
            }
            world.event(Event::SlotAcquired {
                who: "last".into(),
                slot: permit.slot(),
                token: permit.lease().token(),
                at: world.t(),
            });
            permit.release().await.unwrap();
        }
        Err(e) => violations.push(format!("the last acquisition failed: {e}")),
    }
    violations.extend(check_semaphore(&world, change, faults.stale_for));
    violations.extend(world.progress());
    let trace = world.trace.lock().unwrap().clone();
    (violations, trace)
}
