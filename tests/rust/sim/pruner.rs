//! An operator's `blob-lock prune --older-than 0`, in the model check and the simulation:
//! after each release it takes the free lock and deletes its lockfile (a receipt of that
//! release then stale, a lock then new to the next acquisition), through the store's
//! conditional delete, as prune does on every store. Its requests have every fault the
//! others have: a delete held up past prune's lease must not cost a later holder its lock,
//! and the next lockfile's tokens must start above the deleted one's (the oracle's "token
//! did not grow" holds across deletes).

use super::{Chooser, Event, Faults, Process, Shared, World, EXPIRE};
use blob_lock::inventory::{prune_lock, Pruned};
use blob_lock::Protocol;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The pruner's owner ids begin so (one per prune: `pruner.<release>.<try>`).
pub const PRUNER: &str = "pruner.";

/// How an operator prunes.
pub struct Pruning {
    /// The faults its requests have.
    pub faults: Faults,
    /// Its wall clock's offset, or one drawn as every process's is.
    pub offset: Option<f64>,
    /// Asks the chooser at each release whether to start pruning then (the model: each
    /// release a point of its own, the last ones reached among the explorer's first
    /// schedules); else it prunes from the first.
    pub maybe: bool,
    /// Stops after its first prune that took the lock (the model's bound), or prunes after
    /// every release until the orchestrators are done (the simulation).
    pub once: bool,
}

/// Prunes after each release until `done`; whether it ever took the lock.
pub async fn pruner(
    world: Arc<World>,
    protocol: Protocol,
    choose: Shared,
    done: Arc<AtomicBool>,
    how: Pruning,
) -> bool {
    let releases = |w: &World| {
        (w.events.lock().unwrap().iter())
            .filter(|e| matches!(e, Event::Released { .. }))
            .count()
    };
    let (mut seen, mut p, mut took_any) = (0, None, false);
    loop {
        loop {
            let next = world.news.notified();
            if done.load(Ordering::SeqCst) {
                return took_any;
            }
            if releases(&world) > seen {
                seen = releases(&world);
                break;
            }
            next.await;
        }
        if p.is_none() {
            let mut c = choose.lock().unwrap();
            // Asked at each release until it says yes: the explorer varies the latest
            // choices first, so a prune after the last release (the next user then comes
            // while its delete may still be on its way) is among its first schedules.
            if how.maybe && !c.chance(0.3, "an operator prunes after this release") {
                continue;
            }
            p = Some(Process::with_offset(
                &world,
                "pruner",
                &how.faults,
                &mut *c as &mut dyn Chooser,
                how.offset,
            ));
        }
        let p = p.as_ref().unwrap();
        // Each prune a lock of its own, as `prune` opens one per lockfile (its owner id
        // too), on one view of the store.
        let store = p.store(seen as u64);
        // A lockfile whose last acquisition is too recent to delete (its token: the next
        // holder's could be below it) is pruned once it is old enough (within
        // `clock_skew + expire` and the clocks' offsets), unless taken again.
        let mut tries = 0;
        let pruned = loop {
            tries += 1;
            let lock = p.lock_on(store.clone(), protocol, &format!("pruner.{seen}.{tries}"));
            world.log(&p.name, "prunes");
            let pruned = match lock.inspect().await {
                Ok(found) => prune_lock(&lock, &found, Duration::ZERO).await,
                Err(e) => Pruned::Failed(e.to_string()),
            };
            world.log(
                &p.name,
                format!(
                    "pruned: {} {}",
                    pruned.as_str(),
                    pruned.detail().unwrap_or("")
                ),
            );
            if pruned != Pruned::TooRecent || tries > 6 {
                break pruned;
            }
            tokio::time::sleep(Duration::from_secs_f64(EXPIRE)).await;
        };
        // Once it took the lock, one prune is done, whatever it says (its delete may still
        // be on its way); until then, the next release.
        let took = (world.history.lock().unwrap().iter()).any(|w| {
            blob_lock::LockFile::decode(&w.bytes).is_ok_and(|lf| lf.writer_id.starts_with(PRUNER))
        });
        took_any |= took;
        if how.once && (took || pruned == Pruned::Deleted) {
            return took_any;
        }
    }
}

/// A lockfile is deleted only by prune while it holds the lock: each deletion in the
/// store's true history lands on a write of the pruner (its acquisition, or its release of
/// it when the delete's answer was lost), never on another holder's.
pub fn only_the_holder_deletes(world: &World) -> Vec<String> {
    let history = world.history.lock().unwrap();
    let mut found = Vec::new();
    for pair in history.windows(2) {
        if !pair[1].bytes.is_empty() {
            continue;
        }
        match blob_lock::LockFile::decode(&pair[0].bytes) {
            Ok(lf) if lf.writer_id.starts_with(PRUNER) => {}
            Ok(lf) => found.push(format!(
                "a delete removed {}'s lockfile (token {})",
                lf.writer_id, lf.token
            )),
            Err(_) => {}
        }
    }
    found
}

/// The deletes that landed in a run (the store's true history).
pub fn deletes(world: &World) -> usize {
    (world.events.lock().unwrap().iter())
        .filter(|e| matches!(e, Event::Deleted { .. }))
        .count()
}
