//! A lock and the leases taken on it: the waiting loop around acquisition attempts, the
//! background heartbeat that renews a held lease, and release. Used by orchestrators
//! ([`Lock::acquire`]) and by remotes ([`keep_alive()`]), which renew the same lease as co-owners.
//!
//! The lock and its acquisition (`lock.rs`), the options a user gives it (`settings.rs`)
//! and the configuration made of them (`options.rs`), a held lease and
//! its heartbeat (`held/`), the retries they share (`retry.rs`), the order in which
//! waiters woken together try (`seniority.rs`), a remote's keep-alive (`keep_alive.rs`), the
//! release an interrupted acquisition owes (`owed_release.rs`), and the starter that spawns
//! each beat of a heartbeat when it is due (`starter.rs`).

mod held;
mod keep_alive;
pub mod lifecycle;
mod lock;
mod options;
mod owed_release;
mod retry;
mod seniority;
mod settings;
mod starter;
mod wait;
mod warnings;

pub use held::Lease;
pub use keep_alive::{keep_alive, keep_alive_on};
pub(crate) use lock::Tried;
pub use lock::{Lock, Unanswered, WAIT_ON_OWN_OWNER};
pub use options::{LockOptions, LossHook};
pub use owed_release::Cleanup;
pub(crate) use retry::Backoff;
pub use settings::{External, Field, Given, Kind, Settings};
pub(crate) use wait::{arm, Wait};

use crate::per_process::PerProcess;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

type Wakers = Mutex<HashMap<Arc<str>, std::sync::Weak<Notify>>>;

/// The wakers of the lockfiles that someone in this process waits for, under their
/// identities ([`crate::store::LockStore::identity`]). Held weakly: an entry lives as long
/// as a waiter holds its waker, so a held lock, which waits for nothing, keeps none.
static WAKERS: PerProcess<Wakers> = PerProcess::new(Default::default);

fn wakers() -> std::sync::MutexGuard<'static, HashMap<Arc<str>, std::sync::Weak<Notify>>> {
    WAKERS.get().lock().unwrap_or_else(|e| e.into_inner())
}

/// The waker of the lockfile `identity`, shared by every waiter on it in this process:
/// a release here wakes them at once instead of at their next poll.
pub(crate) fn waker(identity: &Arc<str>) -> Arc<Notify> {
    let mut wakers = wakers();
    if let Some(w) = wakers.get(&**identity).and_then(std::sync::Weak::upgrade) {
        return w;
    }
    if wakers.len() >= 1024 && wakers.len().is_power_of_two() {
        wakers.retain(|_, w| w.strong_count() > 0);
    }
    let w = Arc::new(Notify::new());
    wakers.insert(identity.clone(), Arc::downgrade(&w));
    w
}

/// Wakes whoever in this process waits for the lockfile `identity` (after a release).
pub(crate) fn wake_waiters(identity: &str) {
    let waker = wakers().get(identity).and_then(std::sync::Weak::upgrade);
    if let Some(w) = waker {
        w.notify_waiters();
    }
}

/// Makes a fresh owner id: random, unguessable, without `/`.
pub fn new_owner_id() -> String {
    let mut id = [0u8; uuid::fmt::Simple::LENGTH];
    uuid::Uuid::new_v4()
        .simple()
        .encode_lower(&mut id)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ReleaseStatus;
    use crate::runtime::drive;

    #[test]
    fn a_lease_released_before_its_first_renewal_takes_its_start_back() {
        let options = LockOptions::new(30.0).unwrap();
        let store = crate::store::open("memory://brief/lock", &Default::default(), &options.timing)
            .unwrap();
        let lock = Lock::with_store("t", store, &options);
        for _ in 0..100 {
            let lease = drive(lock.acquire(None)).unwrap();
            assert!(lease.beat_filed(), "filed, not spawned");
            let ticket = lease.filed_ticket();
            assert_eq!(drive(lease.release()).unwrap(), ReleaseStatus::Released);
            assert!(
                !crate::lease::starter::is_filed(ticket),
                "taken back at release"
            );
        }
        let dropped = drive(lock.acquire(None)).unwrap();
        let ticket = dropped.filed_ticket();
        drop(dropped);
        assert!(
            !crate::lease::starter::is_filed(ticket),
            "taken back when dropped"
        );
    }

    /// Between beats a held lease keeps no task: each beat files the next with the starter.
    #[test]
    fn a_held_lease_renews_beat_after_beat_with_its_next_beat_filed_between() {
        // A beat every second: at 0.6 s a cargo test at nice 19 beside a whole make test
        // went without the CPU long enough to lose the lease, and no beat came after.
        let options = LockOptions::new(3.0).unwrap();
        let store = crate::store::open("memory://beats/lock", &Default::default(), &options.timing)
            .unwrap();
        let lock = Lock::with_store("t", store.clone(), &options);
        let lease = drive(lock.acquire(None)).unwrap();
        let writes = || {
            let snap = drive(store.read()).unwrap().expect("a lockfile");
            crate::lockfile::LockFile::decode(&snap.bytes)
                .unwrap()
                .write_count
        };
        let mut tickets = std::collections::HashSet::new();
        let began = std::time::Instant::now();
        while writes() < 5 {
            assert!(
                began.elapsed() < std::time::Duration::from_secs(30),
                "five writes (four renewals) within 30 s"
            );
            tickets.insert(lease.filed_ticket());
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!lease.is_lost());
        assert!(
            tickets.len() >= 3,
            "a new beat filed after each: {}",
            tickets.len()
        );
        let ticket = lease.filed_ticket();
        assert_eq!(drive(lease.release()).unwrap(), ReleaseStatus::Released);
        assert!(
            !crate::lease::starter::is_filed(ticket),
            "the next beat taken back at release"
        );
    }

    /// A held lock keeps no waker (thousands are held); a waiter has one while it waits,
    /// through which a release in this process hands it the lock.
    #[test]
    fn only_a_waiter_keeps_a_waker() {
        let options = LockOptions::new(30.0).unwrap();
        let uri = "memory://wakers/lock";
        let identity = crate::store::open(uri, &Default::default(), &options.timing)
            .unwrap()
            .identity();
        let live = || {
            wakers()
                .get(&*identity)
                .and_then(std::sync::Weak::upgrade)
                .is_some()
        };
        let holder = Lock::new(uri, &options).unwrap();
        let lease = drive(holder.acquire(None)).unwrap();
        assert!(!live(), "a held lock keeps no waker");
        let waiting = std::thread::spawn({
            let options = options.clone();
            move || {
                let waiter = Lock::new(uri, &options).unwrap();
                drive(waiter.acquire(Some(std::time::Duration::from_secs(60))))
            }
        });
        let began = std::time::Instant::now();
        while !live() {
            assert!(
                began.elapsed() < std::time::Duration::from_secs(30),
                "the waiter made a waker"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(drive(lease.release()).unwrap(), ReleaseStatus::Released);
        let taken = waiting.join().unwrap().expect("the waiter took the lock");
        assert!(!live(), "its waker went with its wait");
        drop(taken);
    }
}
