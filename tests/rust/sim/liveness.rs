//! Progress, checked as exclusion is (the model check and the simulation): no acquisition
//! waits behind a write of its own, and every call ends within its bound on true (virtual)
//! time, faults and pauses included.
//!
//! A wait behind our own write is told by the core itself: an acquisition that finds its
//! own owner id on a lockfile it cannot resolve as one of its writes logs it under
//! `blob_lock::lease::WAIT_ON_OWN_OWNER` (the scenarios never reuse an owner id for a second
//! acquisition, so every such record is a wait behind ourselves). Each run is on one
//! thread (a current-thread runtime), which collects the records of that target.

use super::{Event, Faults, Process, World, DRIFT};
use blob_lock::lease::WAIT_ON_OWN_OWNER;
use blob_lock::{Lease, Lock, Protocol};
use std::cell::RefCell;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

thread_local! {
    /// What was logged, and when (virtual time).
    static OWN_WAITS: RefCell<Vec<(tokio::time::Instant, String)>> = const { RefCell::new(Vec::new()) };
}

struct Collect;

impl log::Log for Collect {
    fn enabled(&self, metadata: &log::Metadata) -> bool {
        metadata.target() == WAIT_ON_OWN_OWNER
    }

    fn log(&self, line: &log::Record) {
        if self.enabled(line.metadata()) {
            let line = line.args().to_string();
            let at = tokio::time::Instant::now();
            OWN_WAITS.with(|w| w.borrow_mut().push((at, line)));
        }
    }

    fn flush(&self) {}
}

/// Collects, on every thread of this test process, what acquisitions log when they wait on
/// their own owner id. Called before each run (once takes effect).
pub fn listen() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if log::set_logger(&Collect).is_ok() {
            log::set_max_level(log::LevelFilter::Debug);
        }
    });
}

/// What acquisitions on this thread logged of waits on their own owner id since the last
/// call: when, and the line.
pub fn own_waits() -> Vec<(tokio::time::Instant, String)> {
    OWN_WAITS.with(|w| std::mem::take(&mut *w.borrow_mut()))
}

/// A logged wait on our own owner id: the lock's URI, the owner and the token it named.
fn parse_wait(line: &str) -> Option<(&str, &str, u64)> {
    let (uri, rest) = line.split_once(": the lockfile is a write of our own owner id ")?;
    let (owner, rest) = rest.split_once(" (token ")?;
    let (token, _) = rest.split_once(')')?;
    Some((uri, owner, token.parse().ok()?))
}

/// The longest one request takes under `faults`: both legs at their slowest.
pub fn longest_request(faults: &Faults) -> Duration {
    faults.latency.max(faults.slow_latency) * 2
}

/// A duration of a process's clock in true time at the slowest rate, with a few
/// milliseconds for the tasks woken at the same instant.
pub fn on_slowest_clock(d: Duration) -> Duration {
    d.div_f64(1.0 - DRIFT) + Duration::from_millis(20)
}

impl Process {
    /// How long this process is paused in all (it neither sends nor receives meanwhile).
    pub fn paused_for(&self) -> Duration {
        let pauses = self.pauses.0.lock().unwrap();
        pauses.iter().map(|(from, to)| *to - *from).sum()
    }

    /// A call's bound: `window` of this process's clock, `requests` requests at their
    /// slowest, and its pauses.
    pub fn bound(&self, window: Duration, requests: u32) -> Duration {
        on_slowest_clock(window) + longest_request(&self.faults) * requests + self.paused_for()
    }

    /// How long `acquire(Some(timeout))` may take: its timeout and one request timeout (the
    /// cutoff of an attempt in flight at the timeout), by this process's clock. Requests
    /// and pauses add nothing: the cutoff abandons what is still running.
    pub fn acquire_bound(&self, timeout: Duration) -> Duration {
        on_slowest_clock(timeout + self.options(Protocol::Cas).timing.request_timeout())
    }

    /// How long a remote's `keep_alive` may take to start: retried for a heartbeat, and the
    /// last try, a read and a renewal (8 writes, a read after each).
    pub fn keep_alive_bound(&self) -> Duration {
        self.bound(self.options(Protocol::Cas).timing.heartbeat, 1 + 2 * 8)
    }

    /// Releases `lease` (of `lock`) as `release()` does or, `best_effort`, as the end of a
    /// `with` does, each within its bound; notes what it found.
    pub async fn release(
        &self,
        lock: &Lock,
        lease: Arc<Lease>,
        owner: &str,
        protocol: Protocol,
        best_effort: bool,
    ) {
        let world = &self.world;
        let in_time = !lease.remaining().is_zero();
        let timing = self.options(protocol).timing;
        let released = if best_effort {
            let bound = on_slowest_clock(timing.release_patience());
            let releasing = lock.release_best_effort(lease.clone(), timing.release_patience());
            let what = "release at the end of a block";
            match world.within(&self.name, what, bound, releasing).await {
                Some(Ok(status)) => Ok(status),
                Some(Err(unanswered)) => Err(unanswered.to_string()),
                None => return,
            }
        } else {
            // Retried within the lease (or a heartbeat), and the last try: 8 writes at
            // most, a read before and after each, two reads again a poll apart; before it,
            // a renewal in flight (8 writes, a read after each).
            let window = timing.held_for().max(timing.heartbeat) + timing.poll_max * 2;
            let bound = self.bound(window, 3 * 8 + 2 + 2 * 8);
            match world
                .within(&self.name, "release", bound, lease.release())
                .await
            {
                Some(released) => released.map_err(|e| e.to_string()),
                None => return,
            }
        };
        match released {
            Ok(status) => {
                world.log(&self.name, format!("release {owner}: {}", status.as_str()));
                world.refused(owner, lease.token(), in_time, &status);
                world.event(Event::Released {
                    owner: owner.to_string(),
                    at: world.t(),
                });
            }
            Err(e) => world.log(&self.name, format!("release {owner} failed: {e}")),
        }
    }
}

impl World {
    /// Runs `call` (`what`, by `who`), and notes a violation of progress when it has not
    /// ended within `bound` of true time: it is then abandoned (`None`), so that a call
    /// that would never end fails the run instead of hanging it.
    pub async fn within<T>(
        &self,
        who: &str,
        what: &str,
        bound: Duration,
        call: impl Future<Output = T>,
    ) -> Option<T> {
        let began = self.t();
        match tokio::time::timeout(bound, call).await {
            Ok(done) => Some(done),
            Err(_) => {
                let line = format!(
                    "{who}'s {what}, begun at {began:.3}s, had not ended {:.3}s later, its bound",
                    bound.as_secs_f64()
                );
                self.log(who, &line);
                self.late.lock().unwrap().push(line);
                None
            }
        }
    }

    /// The violations of progress noted in this run ([`World::within`]) and the waits
    /// behind our own writes logged on this thread: each a wait on a lockfile that in the
    /// store's true history was then our own unreleased write (a read that lags the store
    /// may show one of ours released since; the acquisition cannot tell, and reads again).
    pub fn progress(&self) -> Vec<String> {
        let mut found = std::mem::take(&mut *self.late.lock().unwrap());
        for (at, line) in own_waits() {
            let Some((uri, owner, token)) = parse_wait(&line) else {
                found.push(format!("an unparsed wait on our own owner id: {line}"));
                continue;
            };
            let history = match uri.strip_prefix("sim/sem/") {
                Some(object) => self.object(object),
                None => self.history.clone(),
            };
            let history = history.lock().unwrap();
            let current = history.iter().rev().find(|s| s.at <= at);
            let ours = current
                .and_then(|s| blob_lock::LockFile::decode(&s.bytes).ok())
                .is_some_and(|lf| {
                    &*lf.writer_id == owner && lf.token == token && !lf.is_released()
                });
            if ours {
                found.push(format!(
                    "an acquisition waited behind its own write: {line}"
                ));
            }
        }
        found
    }
}
