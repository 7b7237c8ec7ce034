//! `NativeLock`, the native side of `blob_lock.BlobLock`: acquisitions blocking and
//! asyncio, their interruption, release, and what the lock shows. The machinery under the
//! methods (one native acquisition at a time, the lease held, fork) is in `machinery.rs`.

mod machinery;

use crate::errors::Error;
use crate::lease::Lock;
use crate::protocol::Protocol;
use crate::python::args::timeout;
use crate::python::asyncio::awaitable;
use crate::python::driver::wait;
use crate::python::errors::{to_py, LockError, LockTimeout};
use crate::python::holding::{abandon_in_flight, release_at_end, release_held, AtEnd, Shared};
use crate::python::options;
use crate::python::results::NativeInspection;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Arc;

/// The native lock behind `blob_lock.BlobLock`.
#[pyclass(frozen, module = "blob_lock._blob_lock")]
pub(crate) struct NativeLock {
    lock: Lock,
    /// What it holds, shared with its asyncio acquisitions (`holding.rs`).
    shared: Arc<Shared>,
    /// The process that made it.
    pid: u32,
    /// The options the core does not use: `timeout` (checked) and `raise_on_lost`.
    timeout: Option<f64>,
    raise_on_lost: bool,
}

#[pymethods]
impl NativeLock {
    /// `options` are BlobLock's keyword arguments as given ([`crate::lease::Settings`]).
    #[new]
    #[pyo3(signature = (uri, options=None))]
    fn new(py: Python<'_>, uri: &str, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let parsed = options::parse(py, uri, options, "BlobLock", None)?;
        let (timeout, raise_on_lost) = (parsed.settings.timeout, parsed.settings.raise_on_lost);
        let opts = parsed.lock_options()?;
        let mut lock = NativeLock::empty(Lock::new(uri, &opts).map_err(to_py)?);
        lock.timeout = timeout;
        lock.raise_on_lost = raise_on_lost;
        Ok(lock)
    }

    /// The `timeout` option: seconds an acquisition waits by default (None: for ever).
    #[getter]
    fn timeout(&self) -> Option<f64> {
        self.timeout
    }

    /// The `raise_on_lost` option.
    #[getter]
    fn raise_on_lost(&self) -> bool {
        self.raise_on_lost
    }

    /// This lock as a child made by fork sees it: the same URI and options, a fresh owner id
    /// (the parent's is the parent's), nothing held, and its own store client (the parent's
    /// connections belong to the parent's runtime, which no thread drives in the child).
    /// This object's own state is leaked in the child when it goes (see `Drop`).
    fn for_child(&self) -> PyResult<NativeLock> {
        let mut child = NativeLock::empty(self.lock.reopened().map_err(to_py)?);
        (child.timeout, child.raise_on_lost) = (self.timeout, self.raise_on_lost);
        Ok(child)
    }

    /// A lock like this one (its URI and options), with an owner id of its own and nothing
    /// held, made without parsing or opening anything again: what `BlobLock` makes for a
    /// local lock made before with the same plain options.
    fn another(&self) -> PyResult<NativeLock> {
        if self.pid != crate::per_process::pid() {
            return self.for_child(); // its store client is the parent's
        }
        let mut other = NativeLock::empty(self.lock.another());
        (other.timeout, other.raise_on_lost) = (self.timeout, self.raise_on_lost);
        Ok(other)
    }

    /// The turn's holder, for Python's cycle collector: a task abandoned while it held the
    /// turn (its coroutine holding the BlobLock that holds this) is then collected.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        if let Ok(turn) = self.shared.try_turn() {
            if let Some(holder) = turn.as_ref() {
                visit.call(holder)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        self.give_turn();
    }

    /// Takes the turn to hold this object for `me` (a thread or task) if it is free: True;
    /// False while another holds it; LockError if `me` does (locks are not reentrant). Who
    /// holds it and whether it is free are one value: no window between the two.
    fn take_turn(&self, me: &Bound<'_, PyAny>) -> PyResult<bool> {
        let mut turn = self.shared.turn();
        let mine = match turn.as_ref() {
            None => {
                *turn = Some(me.clone().unbind());
                return Ok(true);
            }
            Some(holder) => holder.is(me),
        };
        drop(turn);
        if !mine {
            return Ok(false);
        }
        let uri = self.lock.uri();
        Err(LockError::new_err((
            format!("this BlobLock already holds {uri} (or is acquiring it) in this thread; release it first (locks are not reentrant)"),
            uri.to_string(),
        )))
    }

    /// Gives the turn back, whoever holds it.
    fn give_turn(&self) {
        // Dropped after the mutex: the last reference to a thread or task may run Python.
        let holder = self.shared.turn().take();
        drop(holder);
    }

    /// Waits for the lock; False on timeout, or raises LockTimeout when `raise_timeout`.
    #[pyo3(signature = (timeout, raise_timeout))]
    fn acquire(&self, py: Python<'_>, timeout: Option<f64>, raise_timeout: bool) -> PyResult<bool> {
        let _running = self.begin_running()?;
        let t = self::timeout(timeout)?;
        let lock = self.lock.clone();
        match wait(
            py,
            async move { lock.acquire(t).await },
            Some(self.cancel_hook()),
        ) {
            Ok(lease) => {
                self.hold(lease);
                Ok(true)
            }
            Err(e) if !raise_timeout && e.is_instance_of::<LockTimeout>(py) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// One attempt; never waits.
    fn try_acquire(&self, py: Python<'_>) -> PyResult<bool> {
        let _running = self.begin_running()?;
        let lock = self.lock.clone();
        match wait(
            py,
            async move { lock.try_acquire().await },
            Some(self.cancel_hook()),
        )? {
            Some(lease) => {
                self.hold(lease);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Releases; returns the status name.
    fn release(&self, py: Python<'_>) -> PyResult<&'static str> {
        let status = wait(py, release_held(self.lock.clone(), &self.shared), None)?;
        Ok(status.as_str())
    }

    /// The release at the end of a block whose work is done: best effort, waiting at most
    /// `patience` seconds (`None`: the lock's, two request timeouts; 0: not at all). The
    /// status word, or `None` and what happened when it was not answered in time (it goes
    /// on in the background; warned about in the `blob_lock` log when `warn`). Never raises
    /// a store error.
    #[pyo3(signature = (patience=None, warn=true))]
    fn release_at_end(&self, py: Python<'_>, patience: Option<f64>, warn: bool) -> PyResult<AtEnd> {
        let patience = (patience.map(|p| crate::timing::timeout_named("patience", p)))
            .transpose()
            .map_err(to_py)?;
        let releasing = release_at_end(self.lock.clone(), &self.shared, patience, warn);
        wait(py, async move { Ok(releasing.await) }, None)
    }

    /// `release_at_end` as an awaitable.
    #[pyo3(signature = (patience=None, warn=true))]
    fn release_at_end_async<'py>(
        &self,
        py: Python<'py>,
        patience: Option<f64>,
        warn: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let patience = (patience.map(|p| crate::timing::timeout_named("patience", p)))
            .transpose()
            .map_err(to_py)?;
        let releasing = release_at_end(self.lock.clone(), &self.shared, patience, warn);
        awaitable(py, async move { Ok(releasing.await) })
    }

    /// `acquire` as an awaitable; cancelling it releases whatever it may have written.
    #[pyo3(signature = (timeout, raise_timeout))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
        raise_timeout: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let running = self.begin_running()?;
        let t = self::timeout(timeout)?;
        let landing = self.in_flight(&running);
        let lock = self.lock.clone();
        awaitable(py, async move {
            let _running = running; // kept until the acquisition has landed
            let result = lock.acquire(t).await;
            match result {
                Ok(lease) => Ok(landing.land(Some(lease))),
                Err(e) => {
                    landing.land(None);
                    match e {
                        Error::Timeout { .. } if !raise_timeout => Ok(false),
                        e => Err(to_py(e)),
                    }
                }
            }
        })
    }

    /// `try_acquire` as an awaitable.
    fn try_acquire_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let running = self.begin_running()?;
        let landing = self.in_flight(&running);
        let lock = self.lock.clone();
        awaitable(py, async move {
            let _running = running;
            let result = lock.try_acquire().await;
            match result {
                Ok(acquired) => Ok(landing.land(acquired)),
                Err(e) => {
                    landing.land(None);
                    Err(to_py(e))
                }
            }
        })
    }

    /// After an asyncio acquisition was cancelled (Python's `CancelledError`), before the
    /// caller's next acquisition may begin: the release of what it acquired or wrote is owed
    /// from now on (that next acquisition waits for it), and run when the acquisition ends
    /// or its future is dropped; a lease it already holds (acquired just before the
    /// cancellation) is released at once, in the background, without the event loop.
    fn abandon(&self) {
        let mut holding = self.shared.holding();
        if abandon_in_flight(&self.shared, &mut holding, &self.lock) {
            return;
        }
        let taken = holding.lease.take();
        drop(holding);
        if let Some(lease) = taken {
            self.lock.owe_cleanup().give_back(lease);
        }
    }

    /// `release` as an awaitable.
    fn release_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let releasing = release_held(self.lock.clone(), &self.shared);
        awaitable(py, async move {
            releasing.await.map(|s| s.as_str()).map_err(to_py)
        })
    }

    /// Hands the held lock to a remote that may take up to `grace` seconds to start
    /// (`Lease::hand_off`). `LockError` when nothing is held, `LockLost` when it was lost.
    fn hand_off(&self, py: Python<'_>, grace: f64) -> PyResult<()> {
        let handing = self.handing_off(grace)?;
        wait(py, handing, None)
    }

    /// `hand_off` as an awaitable.
    fn hand_off_async<'py>(&self, py: Python<'py>, grace: f64) -> PyResult<Bound<'py, PyAny>> {
        let handing = self.handing_off(grace)?;
        awaitable(py, async move { handing.await.map_err(to_py) })
    }

    /// True while the lease held was handed off (`hand_off`).
    #[getter]
    fn handed_off(&self) -> bool {
        self.lease().is_some_and(|l| l.handed_off())
    }

    /// Stops renewing the lease held, without releasing it (left to the remote after a
    /// hand-off); keeps why it was lost, if it was. Writes nothing.
    fn let_go(&self) {
        let taken = {
            let mut holding = self.shared.holding();
            holding.lease.take()
        };
        // Read with the holding mutex free: finding the loss logs it and calls on_lost.
        let loss = taken.as_ref().and_then(|l| l.lost_reason());
        if loss.is_some() {
            let mut holding = self.shared.holding();
            holding.last_loss = loss.map(String::into_boxed_str);
        }
        if let Some(lease) = taken {
            lease.let_go();
            log::info!(
                "{}: left to the remote of owner {} (token {}), not released: it expires once nobody renews it",
                self.lock.uri(),
                lease.owner(),
                lease.token()
            );
        }
    }

    /// Reads the lockfile once: what it shows. Never writes.
    fn inspect(&self, py: Python<'_>) -> PyResult<NativeInspection> {
        let lock = self.lock.clone();
        let seen = wait(py, async move { lock.inspect().await }, None)?;
        Ok(NativeInspection::of(&seen))
    }

    /// `inspect` as an awaitable.
    fn inspect_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        awaitable(py, async move {
            let seen = lock.inspect().await.map_err(to_py)?;
            Ok(NativeInspection::of(&seen))
        })
    }

    #[getter]
    fn owner(&self) -> &str {
        self.lock.owner()
    }

    #[getter]
    fn uri(&self) -> &str {
        self.lock.uri()
    }

    #[getter]
    fn state(&self) -> &'static str {
        match self.lease() {
            Some(l) => l.state().as_str(),
            None => "unheld",
        }
    }

    /// `cas` or `lww`; `auto` while the store has not decided (before its first write).
    #[getter]
    fn protocol(&self) -> &'static str {
        self.lock.protocol().map_or("auto", Protocol::as_str)
    }

    #[getter]
    fn expire(&self) -> f64 {
        self.lock.timing().expire.as_secs_f64()
    }

    #[getter]
    fn heartbeat(&self) -> f64 {
        self.lock.timing().heartbeat.as_secs_f64()
    }

    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (k, v) in self.lock.labels().iter().flat_map(|m| m.iter()) {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    #[getter]
    fn token(&self) -> Option<u64> {
        self.lease().map(|l| l.token())
    }

    /// The holder whose expired lease the current acquisition wrote over (its lockfile
    /// described), if it took the lock over; None when it found the lock free.
    #[getter]
    fn took_over(&self) -> Option<String> {
        self.lease()
            .and_then(|l| l.taken_over_from().map(String::from))
    }

    #[getter]
    fn held(&self) -> bool {
        self.lease().is_some_and(|l| !l.is_lost())
    }

    /// True once the held lease was lost; after its release, until the next acquisition,
    /// whether it was.
    #[getter]
    fn lost(&self) -> bool {
        self.loss().is_some()
    }

    #[getter]
    fn lost_reason(&self) -> Option<String> {
        self.loss()
    }
}

impl NativeLock {
    /// Its release, to be run with others (at interpreter exit, [`super::exit`]).
    pub(crate) fn releasing(
        &self,
    ) -> impl std::future::Future<Output = crate::Result<crate::ReleaseStatus>> + Send + 'static
    {
        release_held(self.lock.clone(), &self.shared)
    }
}
