//! A semaphore in the simulated world, for the simulation's campaign and the model check:
//! three contenders on two slots, two of them in one process sharing its `Semaphore` (as the
//! threads or tasks of one orchestrator do), the third in another process that asks for
//! three slots where two are stored. Each acquires a slot, holds it (checking its lease as
//! a holder does), and releases it or crashes; then, every fault healed, a last process
//! must get a slot within a lock's lifetime. The oracle: never more holders than the stored
//! number, never two on one slot, each slot's tokens growing.

use super::*;
use blob_lock::semaphore::Opener;
use blob_lock::Semaphore;

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
        views.store_of(name, salt) as Arc<dyn LockStore>
    });
    Arc::new(Semaphore::with_stores("sim/sem", asked, &p.options(protocol), open).unwrap())
}

/// The configuration, as the first orchestrator on the prefix would have written it,
/// stored before anyone starts.
pub fn store_configuration(world: &World) {
    let body = serde_json::json!({
        "semaphore": 1, "slots": SLOTS, "set_by": "setup", "set_at": "2026-01-01T00:00:00Z"
    });
    world
        .object(blob_lock::semaphore::config::CONFIG_NAME)
        .lock()
        .unwrap()
        .push(Stored {
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
        let permit = match semaphore
            .acquire_as(&owner, Some(Duration::from_secs_f64(8.0 * EXPIRE)))
            .await
        {
            Ok(permit) => permit,
            Err(e) => {
                world.log(&p.name, format!("{owner}: acquire failed: {e}"));
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

/// One run: the contenders, then the last acquisition once every fault is healed; what the
/// oracle found, and the trace.
pub async fn semaphore_scenario(
    protocol: Protocol,
    faults: Faults,
    rounds: u32,
    choose: Shared,
    world: Arc<World>,
) -> (Vec<String>, Vec<String>) {
    store_configuration(&world);
    let process = |name: &str| {
        let mut c = choose.lock().unwrap();
        Arc::new(Process::new(&world, name, &faults, &mut *c))
    };
    let (a, b) = (process("a"), process("b"));
    let (shared, other) = (
        semaphore(&a, SLOTS, protocol),
        semaphore(&b, SLOTS + 1, protocol),
    );
    let tasks = [
        (a.clone(), shared.clone(), "a1"),
        (a.clone(), shared, "a2"),
        (b, other, "b"),
    ]
    .map(|(p, s, who)| tokio::spawn(contender(p, s, who.into(), rounds, choose.clone())));
    for t in tasks {
        t.await.unwrap();
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
    violations.extend(check_slots(&world.events.lock().unwrap(), SLOTS));
    let trace = world.trace.lock().unwrap().clone();
    (violations, trace)
}

/// The semaphore's oracle: at most `limit` holders at any moment, at most one per slot,
/// and each slot's tokens growing (checked on the events of true time).
pub fn check_slots(events: &[Event], limit: usize) -> Vec<String> {
    // Each acquisition's belief: its slot, token and first and last moment.
    let mut spans: Vec<(&str, usize, u64, f64, f64)> = Vec::new();
    for e in events {
        if let Event::SlotBelief {
            who,
            slot,
            token,
            at,
        } = e
        {
            match spans.iter_mut().find(|s| s.0 == who.as_str()) {
                Some(s) => s.4 = s.4.max(*at),
                None => spans.push((who, *slot, *token, *at, *at)),
            }
        }
    }
    let mut v = Vec::new();
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if a.1 == b.1 && a.3 <= b.4 && b.3 <= a.4 {
                v.push(format!(
                    "{} (token {}) and {} (token {}) both held slot {} in [{:.3}s, {:.3}s]",
                    a.0,
                    a.2,
                    b.0,
                    b.2,
                    a.1,
                    a.3.max(b.3),
                    a.4.min(b.4)
                ));
            }
        }
        let at_once: Vec<_> = (spans.iter())
            .filter(|b| b.3 <= a.3 && a.3 <= b.4)
            .map(|b| format!("{} on slot {}", b.0, b.1))
            .collect();
        if at_once.len() > limit {
            v.push(format!(
                "{} holders of {limit} slots at {:.3}s: {}",
                at_once.len(),
                a.3,
                at_once.join(", ")
            ));
        }
    }
    let mut acquired: Vec<(f64, &str, usize, u64)> = (events.iter())
        .filter_map(|e| match e {
            Event::SlotAcquired {
                who,
                slot,
                token,
                at,
            } => Some((*at, who.as_str(), *slot, *token)),
            _ => None,
        })
        .collect();
    acquired.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (i, later) in acquired.iter().enumerate() {
        let earlier = acquired[..i].iter().rev().find(|e| e.2 == later.2);
        if let Some(earlier) = earlier.filter(|e| later.3 <= e.3) {
            v.push(format!(
                "slot {}'s token did not grow: {} got {} at {:.3}s after {} got {} at {:.3}s",
                later.2, later.1, later.3, later.0, earlier.1, earlier.3, earlier.0
            ));
        }
    }
    v
}
