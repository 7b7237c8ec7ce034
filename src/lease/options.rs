//! How a lock is configured.

use super::Settings;
use crate::clock::{self, Clock};
use crate::errors::{Error, Result};
use crate::lockfile::Labels;
use crate::protocol::Engine;
use crate::protocol::Protocol;
use crate::store::{Access, LockStore};
use crate::timing::Timing;
use std::sync::{Arc, Mutex, TryLockError};

/// How a lock is configured.
#[derive(Debug, Clone)]
pub struct LockOptions {
    /// The protocol; `None` (auto) lets the store decide: `cas` where it honours
    /// conditional writes, `lww` where it does not ([`crate::store::probe`]).
    pub protocol: Option<Protocol>,
    /// Timing.
    pub timing: Timing,
    /// How to reach the store: object_store configuration keys on top of the environment,
    /// and credentials.
    pub store: Access,
    /// The clocks; the system's unless a simulation brings its own.
    pub clock: Arc<dyn Clock>,
    /// Called once when a lease of this lock is lost.
    pub on_lost: Option<LossHook>,
    /// Labels written into the lockfile by every acquisition ([`crate::lockfile::labels`]).
    pub labels: Option<Labels>,
}

/// A function called once when a held lease is lost, with the `Error::Lost` that says why.
/// It runs on the runtime's thread that noticed the loss: hand slow work elsewhere.
#[derive(Clone)]
pub struct LossHook(pub Arc<dyn Fn(&Error) + Send + Sync>);

impl std::fmt::Debug for LossHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LossHook")
    }
}

impl LockOptions {
    /// Defaults for `expire` seconds.
    pub fn new(expire: f64) -> Result<Self> {
        Self::from_settings(&Settings::with_expire(expire), Access::default())
    }

    /// What `settings` configure, checked together (the timing's bounds, the timeout), on
    /// the store `store` reaches, with the system's clocks.
    pub fn from_settings(settings: &Settings, store: Access) -> Result<Self> {
        if let Some(t) = settings.timeout {
            crate::timing::timeout(t)?;
        }
        Ok(LockOptions {
            protocol: settings.protocol,
            timing: settings.timing()?,
            store,
            clock: clock::system(),
            on_lost: settings.on_lost.clone(),
            labels: settings.labels.clone(),
        })
    }
}

impl LockOptions {
    /// The engine these options run on `store`: the protocol asked for (`cas` in place of
    /// auto until the store decides), no receipt, nothing watched and no waker yet.
    pub(crate) fn engine(&self, store: Arc<dyn LockStore>) -> Engine {
        Engine {
            store,
            protocol: self.protocol.unwrap_or(Protocol::Cas),
            timing: shared(&self.timing),
            clock: self.clock.clone(),
            last_release: Default::default(),
            watched: Default::default(),
            wake: None,
            labels: self.labels.clone(),
            fence: Default::default(),
        }
    }
}

/// The timing as an `Arc` shared with the last lock made with the same one: a process holds
/// thousands of locks, most with one configuration, and each lease carries its engine's.
/// Not waited for: a child made by fork while a parent thread held the mutex, or a thread
/// that finds it taken, makes its own.
fn shared(timing: &Timing) -> Arc<Timing> {
    static LAST: Mutex<Option<Arc<Timing>>> = Mutex::new(None);
    let mut last = match LAST.try_lock() {
        Ok(last) => last,
        Err(TryLockError::Poisoned(e)) => e.into_inner(),
        Err(TryLockError::WouldBlock) => return Arc::new(*timing),
    };
    match &*last {
        Some(same) if **same == *timing => same.clone(),
        _ => last.insert(Arc::new(*timing)).clone(),
    }
}
