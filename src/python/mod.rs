//! The Python bindings: a thin layer over the lock core. Every wait releases the GIL and
//! stays interruptible (Ctrl-C); every core error becomes one class of
//! `blob_lock.exceptions`. The user-facing API (timedelta, context managers, the CLI) is
//! the pure-Python package in python/blob_lock, which wraps these classes.

// mimalloc for the Rust side of the extension (Python keeps its own allocator). A held
// lock's state is made on the thread that acquired it and renewed on the runtime's; with
// glibc's per-thread arenas that left about half a kilobyte a lock stranded (10,000 held
// locks, bench/worker.py scale: 4.3 KB each with glibc, 3.5-3.7 KB with mimalloc). Only
// here, in the bindings: the core leaves the choice to whoever links it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod asyncio;
mod inspect;
mod logs;

use crate::errors::Error;
use crate::lease::{self, Cleanup, Lease, Lock, LockOptions, LossHook};
use crate::lockfile::Protocol;
use crate::runtime::runtime;
use crate::timing::Timing;
use asyncio::{awaitable, OnDrop};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pyo3::import_exception!(blob_lock.exceptions, LockError);
pyo3::import_exception!(blob_lock.exceptions, LockTimeout);
pyo3::import_exception!(blob_lock.exceptions, LockLost);
pyo3::import_exception!(blob_lock.exceptions, LockStolen);
pyo3::import_exception!(blob_lock.exceptions, LockNotFound);
pyo3::import_exception!(blob_lock.exceptions, InvalidLockFile);
pyo3::import_exception!(blob_lock.exceptions, StoreError);
pyo3::import_exception!(blob_lock.exceptions, UnsafeStore);

fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::InvalidArgument(_) => PyValueError::new_err(msg),
        Error::Timeout { uri, .. } => LockTimeout::new_err((msg, uri)),
        Error::Lost { uri, .. } => LockLost::new_err((msg, uri)),
        Error::Stolen { uri, .. } => LockStolen::new_err((msg, uri)),
        Error::NotFound { uri } => LockNotFound::new_err((msg, uri)),
        Error::InvalidLockFile { uri, .. } => InvalidLockFile::new_err((msg, uri)),
        Error::UnsafeStore { uri, .. } => UnsafeStore::new_err((msg, uri)),
        Error::Store { uri, kind, .. } => {
            StoreError::new_err((msg, uri, kind == crate::errors::StoreErrorKind::Transient))
        }
    }
}

/// Drives `fut` to its end on the calling thread, without the GIL, for at most 100 ms at a
/// time: between slices Python delivers signals. On an exception (KeyboardInterrupt) the
/// future is dropped and `on_cancel` runs in the background.
///
/// On the calling thread, not spawned onto the runtime and waited for: acquire and release
/// on memory:// took 48 µs spawned and waited for, 19 µs driven here (loops of 2,000 from
/// Python), the difference being the hops between threads. Records logged meanwhile are held back and logged after
/// each slice (see `logs`): run on this thread, Python's logging would also run signal
/// handlers, whose exceptions would be lost.
fn wait<T, F>(py: Python<'_>, fut: F, on_cancel: Option<CancelHook>) -> PyResult<T>
where
    T: Send + 'static,
    F: Future<Output = crate::Result<T>> + Send + 'static,
{
    let mut fut = Box::pin(fut);
    loop {
        let (step, held) = py.detach(|| {
            logs::holding_back(|| {
                // The timeout made inside: its timer needs the runtime's context.
                crate::runtime::drive(async {
                    tokio::time::timeout(Duration::from_millis(100), fut.as_mut()).await
                })
            })
        });
        let raised = match logs::replay(py, held) {
            Some(e) => Some(e),
            None if step.is_err() => py.check_signals().err(),
            None => None,
        };
        match (step, raised) {
            (Ok(result), None) => return result.map_err(to_py),
            (step, Some(signal)) => {
                // The future and a result it completed with (a lease) are dropped first, on
                // the runtime and with their records held back; then `on_cancel` releases
                // what was written.
                let (_, held) = py.detach(|| {
                    logs::holding_back(move || {
                        let _runtime = runtime().enter();
                        drop(step);
                        drop(fut);
                    })
                });
                let _ = logs::replay(py, held);
                if let Some(hook) = on_cancel {
                    hook();
                }
                return Err(signal);
            }
            (Err(_elapsed), None) => {}
        }
    }
}

/// What to do when a wait is interrupted, called at once (after its future is dropped).
type CancelHook = Box<dyn FnOnce() + Send>;

fn options(
    expire: f64,
    heartbeat: Option<f64>,
    protocol: &str,
    storage_options: Option<HashMap<String, String>>,
    settle: Option<f64>,
    clock_skew: Option<f64>,
) -> PyResult<LockOptions> {
    let protocol = match protocol {
        "auto" => None,
        "cas" => Some(Protocol::Cas),
        "lww" => Some(Protocol::Lww),
        other => {
            return Err(PyValueError::new_err(format!(
                "protocol must be \"auto\", \"cas\" or \"lww\", got {other:?}"
            )))
        }
    };
    Ok(LockOptions {
        protocol,
        timing: Timing::new(expire, heartbeat, settle, Some(clock_skew)).map_err(to_py)?,
        storage_options: storage_options.unwrap_or_default(),
        clock: crate::clock::system(),
        on_lost: None,
    })
}

/// Calls `callback(LockLost(...))` once when a lease is lost. On a thread of its own: the
/// hook fires on a runtime thread, whose heartbeats a slow callback must not hold up, and
/// taking the GIL there could wait on a thread that waits on the runtime. An exception in
/// the callback goes to `sys.unraisablehook`, as in a `__del__`.
fn loss_hook(callback: Option<Py<PyAny>>) -> Option<LossHook> {
    let callback = Arc::new(callback?);
    Some(LossHook(Arc::new(move |lost: &Error| {
        let (callback, message) = (callback.clone(), lost.to_string());
        let uri = match lost {
            Error::Lost { uri, .. } => uri.clone(),
            _ => String::new(),
        };
        std::thread::spawn(move || {
            Python::attach(|py| {
                let exc = LockLost::new_err((message, uri));
                if let Err(e) = callback.call1(py, (exc.value(py),)) {
                    e.write_unraisable(py, Some(callback.bind(py)));
                }
            })
        });
    })))
}

fn timeout(t: Option<f64>) -> PyResult<Option<Duration>> {
    t.map(|t| crate::timing::timeout(t).map_err(to_py))
        .transpose()
}

/// The native lock behind `blob_lock.BlobLock`.
#[pyclass(frozen, module = "blob_lock._blob_lock")]
struct NativeLock {
    lock: Lock,
    lease: Slot,
    /// The process that made it.
    pid: u32,
    /// Set while an acquisition runs: two acquisitions through one object would share its
    /// owner id, and both could believe they hold the lock. (BlobLock already takes turns;
    /// this keeps the native object safe on its own.)
    acquiring: Arc<AtomicU64>,
}

/// In a child made by fork, an inherited NativeLock is leaked, never dropped, whether or
/// not the child ever used it: its store client holds sockets registered with the
/// parent's epoll instance, which the child shares, and dropping them would deregister them
/// from under the parent.
impl Drop for NativeLock {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // Forgotten clones hold the shared parts (the store client, the lease) for ever.
            std::mem::forget(self.lock.clone());
            std::mem::forget(self.lease.clone());
        }
    }
}

/// The lease a NativeLock holds, shared with its asyncio acquisitions, and why the last one
/// was lost (kept after its release, until the next acquisition).
type Slot = Arc<Mutex<Holding>>;

#[derive(Default)]
struct Holding {
    lease: Option<Arc<Lease>>,
    last_loss: Option<String>,
    /// The asyncio acquisition running, if one is: `abandon` leaves what it owes there.
    in_flight: Option<InFlight>,
}

fn hold(slot: &Slot, lease: Lease) {
    let old = {
        let mut holding = slot.lock().unwrap_or_else(|e| e.into_inner());
        holding.last_loss = None;
        holding.lease.replace(Arc::new(lease))
    };
    // Dropped after the mutex: dropping a lease may log, which takes the GIL, while a
    // thread holding the GIL may wait for this mutex (`held`).
    drop(old);
}

/// An asyncio acquisition under way ([`NativeLock::in_flight`]).
struct InFlight {
    /// Its number (as in `NativeLock::acquiring`).
    id: u64,
    /// Set by `abandon`: its caller is gone, so what it acquires or wrote is released.
    owed: Option<Cleanup>,
}

/// Where an asyncio acquisition ends: holds its lease, or, if it was abandoned meanwhile,
/// gives it back in the background. True if held.
fn settle(slot: &Slot, id: u64, acquired: Option<Lease>) -> bool {
    let mut holding = slot.lock().unwrap_or_else(|e| e.into_inner());
    let owed = match holding.in_flight.take() {
        Some(f) if f.id == id => f.owed,
        other => {
            holding.in_flight = other;
            None
        }
    };
    match (acquired, owed) {
        (Some(lease), None) => {
            holding.last_loss = None;
            let old = holding.lease.replace(Arc::new(lease));
            drop(holding);
            drop(old);
            true
        }
        (Some(lease), Some(owed)) => {
            drop(holding);
            owed.give_back(Arc::new(lease));
            false
        }
        // Nothing acquired; what it may have written, the owed cleanup releases (dropped).
        (None, owed) => {
            drop(holding);
            drop(owed);
            false
        }
    }
}

/// Takes the lease out of `slot` (at once, so that a held lock reads as released from now
/// on) and releases it, keeping why it was lost, if it was (found at the release too);
/// holding none, releases whatever acquisition the lockfile shows for `lock`'s owner (an
/// interrupted acquisition may have written it).
fn release_slot(
    lock: Lock,
    slot: &Slot,
) -> impl Future<Output = crate::Result<crate::ReleaseStatus>> + Send + 'static {
    let taken = slot.lock().unwrap_or_else(|e| e.into_inner()).lease.take();
    let slot = slot.clone();
    async move {
        match taken {
            Some(lease) => {
                let released = lease.release().await;
                let loss = lease.lost_reason();
                slot.lock().unwrap_or_else(|e| e.into_inner()).last_loss = loss;
                released
            }
            None => lock.release_unheld().await,
        }
    }
}

/// Clears `NativeLock::acquiring` when the acquisition it numbers ends, however it ends
/// (unless `abandon` cleared it first and another one began).
struct Acquiring(Arc<AtomicU64>, u64);

impl Drop for Acquiring {
    fn drop(&mut self) {
        let _ = self
            .0
            .compare_exchange(self.1, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// Numbers acquisitions (never 0, which means none).
static ACQUISITIONS: AtomicU64 = AtomicU64::new(1);

impl NativeLock {
    fn lease(&self) -> Option<Arc<Lease>> {
        self.lease
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .lease
            .clone()
    }

    /// Why the current lease, or the last one released, was lost.
    fn loss(&self) -> Option<String> {
        match self.lease() {
            Some(lease) => lease.lost_reason(),
            None => self
                .lease
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .last_loss
                .clone(),
        }
    }

    fn hold(&self, lease: Lease) {
        hold(&self.lease, lease)
    }

    fn empty(lock: Lock) -> NativeLock {
        NativeLock {
            lock,
            lease: Default::default(),
            pid: std::process::id(),
            acquiring: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Refuses a second acquisition through this object while one runs or is held. (What
    /// an interrupted acquisition wrote is released by the core before this lock's next
    /// acquisition begins: see `Lock::release_in_background`.)
    fn begin_acquiring(&self) -> PyResult<Acquiring> {
        let id = ACQUISITIONS.fetch_add(1, Ordering::Relaxed);
        let began = self
            .acquiring
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
        let guard = Acquiring(self.acquiring.clone(), id);
        self.refuse_if_held()?;
        Ok(guard)
    }

    fn refuse_if_held(&self) -> PyResult<()> {
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
    fn cancel_hook(&self) -> CancelHook {
        let lock = self.lock.clone();
        Box::new(move || lock.release_in_background())
    }

    /// Marks an asyncio acquisition as in flight in the slot, and makes the hook that
    /// cleans up if its future is dropped before it ends (cancelled): the cleanup `abandon`
    /// left, or else a release of whatever the lockfile shows for this lock's owner.
    fn in_flight(&self, acquiring: &Acquiring) -> OnDrop {
        let id = acquiring.1;
        self.lease
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .in_flight = Some(InFlight { id, owed: None });
        let (slot, lock) = (self.lease.clone(), self.lock.clone());
        OnDrop::new(Box::new(move || {
            let mut holding = slot.lock().unwrap_or_else(|e| e.into_inner());
            let owed = match holding.in_flight.take() {
                Some(f) if f.id == id => f.owed,
                other => {
                    holding.in_flight = other;
                    return;
                }
            };
            drop(holding);
            match owed {
                Some(owed) => owed.release_unheld(),
                None => lock.release_in_background(),
            }
        }))
    }
}

#[pymethods]
impl NativeLock {
    #[new]
    #[pyo3(signature = (uri, *, expire, heartbeat, protocol, storage_options, settle, clock_skew, on_lost))]
    #[allow(clippy::too_many_arguments)] // the keyword arguments of BlobLock
    fn new(
        uri: &str,
        expire: f64,
        heartbeat: Option<f64>,
        protocol: &str,
        storage_options: Option<HashMap<String, String>>,
        settle: Option<f64>,
        clock_skew: Option<f64>,
        on_lost: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let mut opts = options(
            expire,
            heartbeat,
            protocol,
            storage_options,
            settle,
            clock_skew,
        )?;
        opts.on_lost = loss_hook(on_lost);
        Ok(NativeLock::empty(Lock::new(uri, &opts).map_err(to_py)?))
    }

    /// This lock as a child made by fork sees it: the same URI and options, a fresh owner id
    /// (the parent's is the parent's), nothing held, and its own store client (the parent's
    /// connections belong to the parent's runtime, which no thread drives in the child).
    /// This object's own state is leaked in the child when it goes (see `Drop`).
    fn for_child(&self) -> PyResult<NativeLock> {
        Ok(NativeLock::empty(self.lock.reopened().map_err(to_py)?))
    }

    /// Waits for the lock; False on timeout, or raises LockTimeout when `raise_timeout`.
    #[pyo3(signature = (timeout, raise_timeout))]
    fn acquire(&self, py: Python<'_>, timeout: Option<f64>, raise_timeout: bool) -> PyResult<bool> {
        let _acquiring = self.begin_acquiring()?;
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
        let _acquiring = self.begin_acquiring()?;
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
        let status = wait(py, release_slot(self.lock.clone(), &self.lease), None)?;
        Ok(status.as_str())
    }

    /// `acquire` as an awaitable; cancelling it releases whatever it may have written.
    #[pyo3(signature = (timeout, raise_timeout))]
    fn acquire_async<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
        raise_timeout: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let acquiring = self.begin_acquiring()?;
        let t = self::timeout(timeout)?;
        let dropped = self.in_flight(&acquiring);
        let (lock, slot) = (self.lock.clone(), self.lease.clone());
        awaitable(py, async move {
            let result = lock.acquire(t).await;
            dropped.disarm();
            let id = acquiring.1;
            drop(acquiring);
            match result {
                Ok(lease) => Ok(settle(&slot, id, Some(lease))),
                Err(e) => {
                    settle(&slot, id, None);
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
        let acquiring = self.begin_acquiring()?;
        let dropped = self.in_flight(&acquiring);
        let (lock, slot) = (self.lock.clone(), self.lease.clone());
        awaitable(py, async move {
            let result = lock.try_acquire().await;
            dropped.disarm();
            let id = acquiring.1;
            drop(acquiring);
            match result {
                Ok(acquired) => Ok(settle(&slot, id, acquired)),
                Err(e) => {
                    settle(&slot, id, None);
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
        let mut holding = self.lease.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = holding.in_flight.as_mut() {
            if f.owed.is_none() {
                f.owed = Some(self.lock.owe_cleanup());
            }
            // The object is free for the next acquisition, which waits for the cleanup.
            let _ = self
                .acquiring
                .compare_exchange(f.id, 0, Ordering::SeqCst, Ordering::SeqCst);
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
        let releasing = release_slot(self.lock.clone(), &self.lease);
        awaitable(py, async move {
            releasing.await.map(|s| s.as_str()).map_err(to_py)
        })
    }

    /// Reads the lockfile once; a dict of what it shows. Never writes.
    fn inspect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let lock = self.lock.clone();
        let seen = wait(py, async move { lock.inspect().await }, None)?;
        inspect::inspection_dict(py, &seen)
    }

    /// `inspect` as an awaitable.
    fn inspect_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lock = self.lock.clone();
        awaitable(py, async move {
            let seen = lock.inspect().await.map_err(to_py)?;
            Python::attach(|py| inspect::inspection_dict(py, &seen).map(Bound::unbind))
        })
    }

    /// Waits until the lock is free to take (takes nothing); the dict of what was seen last.
    #[pyo3(signature = (timeout))]
    fn wait_free<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let t = self::timeout(timeout)?;
        let lock = self.lock.clone();
        let seen = wait(py, async move { lock.wait_free(t).await }, None)?;
        inspect::inspection_dict(py, &seen)
    }

    /// Marks the lock released whoever holds it (only the acquisition `owner`/`token` name,
    /// when given): `(outcome, lockfile dict or None)`.
    #[pyo3(signature = (owner=None, token=None))]
    fn break_lock<'py>(
        &self,
        py: Python<'py>,
        owner: Option<String>,
        token: Option<u64>,
    ) -> PyResult<(&'static str, Option<Bound<'py, PyDict>>)> {
        let lock = self.lock.clone();
        let broken = wait(
            py,
            async move {
                let expect = owner.as_deref().zip(token);
                lock.break_lock(expect).await
            },
            None,
        )?;
        inspect::broken_tuple(py, &broken)
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
    fn token(&self) -> Option<u64> {
        self.lease().map(|l| l.token())
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

/// The native handle behind `blob_lock.keep_alive`.
#[pyclass(frozen, module = "blob_lock._blob_lock")]
struct NativeKeepAlive {
    lease: Arc<Lease>,
    uri: String,
}

#[pymethods]
impl NativeKeepAlive {
    /// Leaks this object in a child made by fork (see `NativeLock::for_child`).
    fn leak_in_child(slf: &Bound<'_, Self>) {
        std::mem::forget(slf.clone().unbind());
    }

    /// Stops heartbeating (never releases).
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let lease = self.lease.clone();
        wait(
            py,
            async move {
                lease.stop().await;
                Ok(())
            },
            None,
        )
    }

    /// `stop` as an awaitable.
    fn stop_async<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lease = self.lease.clone();
        awaitable(py, async move {
            lease.stop().await;
            Ok(())
        })
    }

    #[getter]
    fn owner(&self) -> &str {
        self.lease.owner()
    }

    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    #[getter]
    fn token(&self) -> u64 {
        self.lease.token()
    }

    #[getter]
    fn lost(&self) -> bool {
        self.lease.is_lost()
    }

    #[getter]
    fn lost_reason(&self) -> Option<String> {
        self.lease.lost_reason()
    }
}

/// Starts keeping `owner`'s lock at `uri` alive.
#[pyfunction]
#[pyo3(signature = (uri, owner, *, storage_options, protocol, on_lost))]
fn keep_alive(
    py: Python<'_>,
    uri: &str,
    owner: &str,
    storage_options: Option<HashMap<String, String>>,
    protocol: &str,
    on_lost: Option<Py<PyAny>>,
) -> PyResult<NativeKeepAlive> {
    // The lockfile's own expire_s governs the heartbeat; this expire only sizes the client.
    let mut opts = options(30.0, None, protocol, storage_options, None, None)?;
    opts.on_lost = loss_hook(on_lost);
    let (uri_owned, owner) = (uri.to_string(), owner.to_string());
    let lease = wait(
        py,
        async move { lease::keep_alive(&uri_owned, &owner, &opts).await },
        None,
    )?;
    Ok(NativeKeepAlive {
        lease: Arc::new(lease),
        uri: uri.to_string(),
    })
}

/// `keep_alive` as an awaitable.
#[pyfunction]
#[pyo3(signature = (uri, owner, *, storage_options, protocol, on_lost))]
fn keep_alive_async<'py>(
    py: Python<'py>,
    uri: &str,
    owner: &str,
    storage_options: Option<HashMap<String, String>>,
    protocol: &str,
    on_lost: Option<Py<PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut opts = options(30.0, None, protocol, storage_options, None, None)?;
    opts.on_lost = loss_hook(on_lost);
    let (uri, owner) = (uri.to_string(), owner.to_string());
    awaitable(py, async move {
        let lease = lease::keep_alive(&uri, &owner, &opts)
            .await
            .map_err(to_py)?;
        Ok(NativeKeepAlive {
            lease: Arc::new(lease),
            uri,
        })
    })
}

/// Probes the store behind `uri` on a scratch lockfile, and with `race` (racers, rounds)
/// races independent clients beside it; a dict of the report.
#[pyfunction]
#[pyo3(signature = (uri, *, storage_options, expire, race=None))]
fn doctor<'py>(
    py: Python<'py>,
    uri: &str,
    storage_options: Option<HashMap<String, String>>,
    expire: f64,
    race: Option<(usize, usize)>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = options(expire, None, "cas", storage_options, None, None)?;
    let uri = uri.to_string();
    let (report, raced) = wait(
        py,
        async move {
            let report = crate::doctor::doctor(&uri, &opts).await?;
            let raced = match race {
                Some((racers, rounds)) => {
                    Some(crate::race::race(&uri, &opts, racers, rounds).await?)
                }
                None => None,
            };
            Ok((report, raced))
        },
        None,
    )?;
    let d = inspect::report_dict(py, &report)?;
    d.set_item(
        "race",
        raced.map(|r| inspect::race_dict(py, &r)).transpose()?,
    )?;
    Ok(d)
}

/// Checks a timeout as `acquire` would take it: ValueError if it is not one.
#[pyfunction]
fn check_timeout(timeout: f64) -> PyResult<()> {
    self::timeout(Some(timeout)).map(drop)
}

/// Waits up to `timeout` seconds for the releases that interrupted acquisitions left running
/// in the background (called at interpreter exit).
#[pyfunction]
fn drain(py: Python<'_>, timeout: f64) {
    py.detach(|| crate::cleanup::drain(Duration::from_secs_f64(timeout.clamp(0.0, 60.0))));
}

/// From now on no blob-lock awaitable completes (called at interpreter exit).
#[pyfunction]
fn close_async() {
    asyncio::close();
}

/// Removes now the replaced lockfiles still queued for removal (called at interpreter exit,
/// after the releases).
#[pyfunction]
fn sweep(py: Python<'_>) {
    py.detach(crate::sweeper::flush);
}

/// A panic inside an object_store request becomes a `StoreError` (`store::gate`); the
/// default hook would still print it, with a backtrace, over the user's terminal.
fn quiet_guarded_panics() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !crate::store::gate::in_guarded_request() {
            previous(info);
        }
    }));
}

#[pymodule]
fn _blob_lock(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Rust log records go to Python's `logging` under the logger "blob_lock".
    logs::install(m.py())?;
    quiet_guarded_panics();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<NativeLock>()?;
    m.add_class::<NativeKeepAlive>()?;
    m.add_function(wrap_pyfunction!(keep_alive, m)?)?;
    m.add_function(wrap_pyfunction!(keep_alive_async, m)?)?;
    m.add_function(wrap_pyfunction!(doctor, m)?)?;
    m.add_function(wrap_pyfunction!(close_async, m)?)?;
    m.add_function(wrap_pyfunction!(sweep, m)?)?;
    m.add_function(wrap_pyfunction!(drain, m)?)?;
    m.add_function(wrap_pyfunction!(check_timeout, m)?)?;
    Ok(())
}
