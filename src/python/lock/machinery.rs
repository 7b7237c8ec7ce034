//! What NativeLock's methods stand on: one native acquisition running on an object's owner
//! id at a time (`Running`), the lease it holds and a loss read from it, the cleanup a dropped or
//! interrupted acquisition owes, and an inherited lock leaked in a fork child.

use super::NativeLock;
use crate::lease::{Lease, Lock};
use crate::python::driver::CancelHook;
use crate::python::errors::LockError;
use crate::python::holding::{hold, Flight, Landing, Shared};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
/// In a child made by fork, an inherited NativeLock is leaked, never dropped, whether or
/// not the child ever used it: its store client holds sockets registered with the
/// parent's epoll instance, which the child shares, and dropping them would deregister them
/// from under the parent.
impl Drop for NativeLock {
    fn drop(&mut self) {
        if self.pid != crate::per_process::pid() {
            // Forgotten clones hold the shared parts (the store client, the lease) for ever.
            std::mem::forget(self.lock.clone());
            std::mem::forget(self.shared.clone());
        }
    }
}

/// Clears `Shared::running` when the acquisition it numbers ends, however it ends (unless
/// `abandon` cleared it first and another one began): why that is not the turn, see there.
pub(super) struct Running(Arc<Shared>, pub(super) u64);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self
            .0
            .running
            .compare_exchange(self.1, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Numbers acquisitions (never 0, which means none).
pub(super) static ACQUISITIONS: AtomicU64 = AtomicU64::new(1);

impl NativeLock {
    pub(super) fn lease(&self) -> Option<Arc<Lease>> {
        self.shared.holding().lease.clone()
    }

    /// Why the current lease, or the last one released, was lost.
    pub(super) fn loss(&self) -> Option<String> {
        match self.lease() {
            Some(lease) => lease.lost_reason(),
            None => self.shared.holding().last_loss.as_deref().map(String::from),
        }
    }

    /// The hand-off of the lease held, checked before any request.
    pub(super) fn handing_off(
        &self,
        grace: f64,
    ) -> PyResult<impl std::future::Future<Output = crate::Result<()>> + Send + 'static> {
        let grace = crate::timing::seconds("grace", grace)?;
        crate::timing::Timing::check_grace(grace)?;
        let Some(lease) = self.lease() else {
            let uri = self.lock.uri().to_string();
            let why = match self.loss() {
                Some(reason) => format!("it was lost ({reason})"),
                None => "nothing is held".to_string(),
            };
            return Err(LockError::new_err((
                format!("{uri}: hand_off needs a held lock and {why}; call it inside `with BlobLock(...)` after acquiring"),
                uri,
            )));
        };
        Ok(async move { lease.hand_off(grace).await })
    }

    pub(super) fn hold(&self, lease: Lease) {
        hold(&self.shared, lease)
    }

    /// The native lock of a slot a semaphore acquisition took: `lock` (with the owner id
    /// it wrote) holding `lease`, with the semaphore's options.
    pub(crate) fn holding(
        lock: Lock,
        lease: Lease,
        timeout: Option<f64>,
        raise_on_lost: bool,
    ) -> NativeLock {
        let mut native = NativeLock::empty(lock);
        (native.timeout, native.raise_on_lost) = (timeout, raise_on_lost);
        native.hold(lease);
        native
    }

    pub(super) fn empty(lock: Lock) -> NativeLock {
        NativeLock {
            lock,
            shared: Default::default(),
            pid: crate::per_process::pid(),
            timeout: None,
            raise_on_lost: true,
        }
    }

    /// Marks an acquisition as running; refuses it while another runs or the lock is held.
    /// (What an interrupted acquisition wrote is released by the core before this lock's
    /// next acquisition begins: see `Lock::release_in_background`.)
    pub(super) fn begin_running(&self) -> PyResult<Running> {
        let id = ACQUISITIONS.fetch_add(1, Ordering::Relaxed);
        let began = self
            .shared
            .running
            .compare_exchange(0, id, Ordering::SeqCst, Ordering::SeqCst);
        if began.is_err() {
            return Err(LockError::new_err((
                format!(
                    "another acquisition of {} through this BlobLock is under way; wait for it to end",
                    self.lock.uri()
                ),
                self.lock.uri().to_string(),
            )));
        }
        let guard = Running(self.shared.clone(), id);
        self.refuse_if_held()?;
        Ok(guard)
    }

    pub(super) fn refuse_if_held(&self) -> PyResult<()> {
        match self.lease() {
            Some(l) if !l.is_lost() => Err(LockError::new_err((
                format!(
                    "this BlobLock already holds {}; release it first (locks are not reentrant)",
                    self.lock.uri()
                ),
                self.lock.uri().to_string(),
            ))),
            _ => Ok(()),
        }
    }

    /// An interrupted acquisition may have written the lockfile: the core releases it in
    /// the background, before this lock's next acquisition.
    pub(super) fn cancel_hook(&self) -> CancelHook {
        let lock = self.lock.clone();
        Box::new(move || lock.release_in_background())
    }

    /// Marks an asyncio acquisition as in flight; the landing it returns ends
    /// it (`Landing::land`), or, dropped with its future (cancelled), releases what the
    /// acquisition may have written.
    pub(super) fn in_flight(&self, running: &Running) -> Landing {
        Flight::start(&self.shared, &self.lock, running.1)
    }
}
