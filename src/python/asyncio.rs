//! The asyncio bridge: a Rust future of the lock core becomes a Python awaitable through
//! pyo3-async-runtimes, with the future running on blob-lock's own runtime (one per process,
//! see `crate::runtime`) rather than a second one of the bridge's. Cancelling the awaitable
//! drops the Rust future.
//!
//! The bridge hands each result to its event loop from a "blocking" call that waits for the
//! GIL. Those calls go to threads of ours that hand over results only (`to_python`'s
//! results lane), not to the runtime's blocking pool: the pool runs the file store's
//! requests, renewals included, and hundreds of completions waiting there while a thread
//! held the GIL took all its threads and lost a held lock on local files. Nor do they wait
//! behind a user's loss callback, which may block.

use super::to_python::Lane;
use crate::runtime::runtime;
use pyo3::prelude::*;
use pyo3_async_runtimes::generic::{ContextExt, Runtime};
use pyo3_async_runtimes::TaskLocals;
use std::cell::OnceCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set at interpreter exit: from then on no awaitable completes. Completing one calls into
/// its event loop, and a call into Python from a runtime thread while the interpreter
/// finalizes aborts the process.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Stops every awaitable from completing (`blob_lock`'s atexit hook calls it first).
pub(crate) fn close() {
    CLOSED.store(true, Ordering::SeqCst);
}

/// blob-lock's runtime as pyo3-async-runtimes sees it.
pub(crate) struct BlobRuntime;

tokio::task_local! {
    // The event loop (and contextvars) of the coroutine that awaits a future.
    static TASK_LOCALS: OnceCell<TaskLocals>;
}

/// How a task of the bridge ended, when not by returning: a panic in a future, or a call
/// for Python dropped unrun (at interpreter exit).
pub(crate) enum Ended {
    Task(tokio::task::JoinError),
    Dropped,
}

impl pyo3_async_runtimes::generic::JoinError for Ended {
    fn is_panic(&self) -> bool {
        matches!(self, Ended::Task(e) if e.is_panic())
    }

    fn into_panic(self) -> Box<dyn std::any::Any + Send + 'static> {
        match self {
            Ended::Task(e) if e.is_panic() => e.into_panic(),
            _ => Box::new("the task did not panic"),
        }
    }
}

type Ending = Pin<Box<dyn Future<Output = Result<(), Ended>> + Send>>;

impl Runtime for BlobRuntime {
    type JoinError = Ended;
    type JoinHandle = Ending;

    fn spawn<F>(fut: F) -> Self::JoinHandle
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let task = runtime().spawn(fut);
        Box::pin(async move { task.await.map_err(Ended::Task) })
    }

    /// Only ever a call that takes the GIL (a result handed to its event loop): on the
    /// threads that hand over results, never on the runtime's blocking pool.
    fn spawn_blocking<F>(f: F) -> Self::JoinHandle
    where
        F: FnOnce() + Send + 'static,
    {
        let (ran, ended) = tokio::sync::oneshot::channel();
        super::to_python::leave_call(
            Lane::Results,
            Box::new(move |_py| {
                // Past the exit hook, no awaitable completes (see `CLOSED`).
                if !CLOSED.load(Ordering::SeqCst) {
                    f();
                }
                let _ = ran.send(());
            }),
        );
        Box::pin(async move { ended.await.map_err(|_| Ended::Dropped) })
    }
}

impl ContextExt for BlobRuntime {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        let cell = OnceCell::new();
        let _ = cell.set(locals);
        Box::pin(TASK_LOCALS.scope(cell, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        TASK_LOCALS
            .try_with(|c| c.get().cloned())
            .unwrap_or_default()
    }
}

/// `fut` as an awaitable of the running event loop.
pub(crate) fn awaitable<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = PyResult<T>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let gated = async move {
        let result = fut.await;
        if CLOSED.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        result
    };
    pyo3_async_runtimes::generic::future_into_py::<BlobRuntime, _, T>(py, gated)
}
