//! `NativeSemaphore`, the native side of `blob_lock.BlobSemaphore`: acquisitions blocking
//! and asyncio, each returning the slot taken as a `NativeLock` that holds it (so that a
//! held slot is a held lock in every way: release, hand_off, loss, keep_alive), and the
//! stored number of slots.

use crate::python::args::timeout;
use crate::python::asyncio::awaitable;
use crate::python::driver::wait;
use crate::python::errors::to_py;
use crate::python::lock::NativeLock;
use crate::python::options;
use crate::semaphore::config::Stored;
use crate::semaphore::{Permit, Semaphore};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

/// The native semaphore behind `blob_lock.BlobSemaphore`.
#[pyclass(frozen, module = "blob_lock._blob_lock")]
pub(crate) struct NativeSemaphore {
    semaphore: Arc<Semaphore>,
    timeout: Option<f64>,
    raise_on_lost: bool,
}

/// A semaphore's stored configuration.
#[pyclass(frozen, get_all, module = "blob_lock._blob_lock")]
pub(crate) struct NativeSemaphoreConfig {
    slots: usize,
    set_by: String,
    set_at: String,
}

impl From<Stored> for NativeSemaphoreConfig {
    fn from(s: Stored) -> Self {
        NativeSemaphoreConfig {
            slots: s.slots,
            set_by: s.set_by,
            set_at: s.set_at,
        }
    }
}

#[pymethods]
impl NativeSemaphore {
    /// `options` are BlobSemaphore's keyword arguments as given (a lock's).
    #[new]
    #[pyo3(signature = (prefix, slots, options=None))]
    fn new(
        py: Python<'_>,
        prefix: &str,
        slots: u64,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let parsed = options::parse(py, prefix, options, "BlobSemaphore", None)?;
        let (timeout, raise_on_lost) = (parsed.settings.timeout, parsed.settings.raise_on_lost);
        let slots = crate::semaphore::config::checked_slots(slots).map_err(to_py)?;
        let semaphore = Semaphore::new(prefix, slots, &parsed.lock_options()?).map_err(to_py)?;
        Ok(NativeSemaphore {
            semaphore: Arc::new(semaphore),
            timeout,
            raise_on_lost,
        })
    }

    /// The prefix the slots are under.
    #[getter]
    fn prefix(&self) -> &str {
        self.semaphore.prefix()
    }

    /// The number of slots asked for.
    #[getter]
    fn asked(&self) -> usize {
        self.semaphore.asked()
    }

    /// The `timeout` option: seconds an acquisition waits by default (None: for ever).
    #[getter]
    fn timeout(&self) -> Option<f64> {
        self.timeout
    }

    /// Waits for a slot: its index and the lock holding it; raises LockTimeout. `owner`:
    /// the owner id to write (claim_memo's quota slot takes the memo lock's); None, a new one.
    #[pyo3(signature = (timeout, owner=None))]
    fn acquire(
        &self,
        py: Python<'_>,
        timeout: Option<f64>,
        owner: Option<String>,
    ) -> PyResult<(usize, NativeLock)> {
        let t = self::timeout(timeout)?;
        let semaphore = self.semaphore.clone();
        let owner = owner.unwrap_or_else(crate::lease::new_owner_id);
        let permit = wait(
            py,
            async move { semaphore.acquire_as(&owner, t).await },
            None,
        )?;
        Ok(self.held(permit))
    }

    /// One attempt at every slot; None when all are held.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<Option<(usize, NativeLock)>> {
        let semaphore = self.semaphore.clone();
        let permit = wait(py, async move { semaphore.try_acquire().await }, None)?;
        Ok(permit.map(|p| self.held(p)))
    }

    /// `acquire` as an awaitable; cancelling it releases whatever it may have written.
    #[pyo3(signature = (timeout, owner=None))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
        owner: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let t = self::timeout(timeout)?;
        let semaphore = self.semaphore.clone();
        let (keep, raise_on_lost) = (self.timeout, self.raise_on_lost);
        let owner = owner.unwrap_or_else(crate::lease::new_owner_id);
        awaitable(py, async move {
            let permit = semaphore.acquire_as(&owner, t).await.map_err(to_py)?;
            Ok(held(permit, keep, raise_on_lost))
        })
    }

    /// `try_acquire` as an awaitable (a released `HeldSlot`'s `try_acquire_async`).
    fn try_acquire_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let semaphore = self.semaphore.clone();
        let (keep, raise_on_lost) = (self.timeout, self.raise_on_lost);
        awaitable(py, async move {
            let permit = semaphore.try_acquire().await.map_err(to_py)?;
            Ok(permit.map(|p| held(p, keep, raise_on_lost)))
        })
    }

    /// The stored configuration, written with the number asked for if there is none.
    fn configuration(&self, py: Python<'_>) -> PyResult<NativeSemaphoreConfig> {
        let semaphore = self.semaphore.clone();
        Ok(wait(py, async move { semaphore.configuration().await }, None)?.into())
    }

    /// The stored configuration, if there is one; writes nothing.
    fn stored(&self, py: Python<'_>) -> PyResult<Option<NativeSemaphoreConfig>> {
        let semaphore = self.semaphore.clone();
        Ok(wait(py, async move { semaphore.stored().await }, None)?.map(Into::into))
    }

    /// Stores `slots` as the number of slots.
    fn set_slots(&self, py: Python<'_>, slots: u64) -> PyResult<NativeSemaphoreConfig> {
        let slots = crate::semaphore::config::checked_slots(slots).map_err(to_py)?;
        let semaphore = self.semaphore.clone();
        Ok(wait(py, async move { semaphore.set_slots(slots).await }, None)?.into())
    }
}

impl NativeSemaphore {
    fn held(&self, permit: Permit) -> (usize, NativeLock) {
        held(permit, self.timeout, self.raise_on_lost)
    }
}

fn held(permit: Permit, timeout: Option<f64>, raise_on_lost: bool) -> (usize, NativeLock) {
    let (slot, lock, lease) = permit.into_parts();
    (
        slot,
        NativeLock::holding(lock, lease, timeout, raise_on_lost),
    )
}
