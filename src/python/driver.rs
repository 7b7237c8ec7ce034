//! Blocking calls from Python: a core future driven to its end on the calling thread,
//! without the GIL and interruptible by signals.

use super::errors::to_py;
use super::logs;
use crate::runtime::runtime;
use pyo3::prelude::*;
use std::future::Future;
use std::time::Duration;

/// Drives `fut` to its end on the calling thread, without the GIL, for at most 100 ms at a
/// time: between slices Python delivers signals. On an exception (KeyboardInterrupt) the
/// future is dropped and `on_cancel` runs in the background.
///
/// On the calling thread, not spawned onto the runtime and waited for: the hops between
/// threads cost more than an acquisition on memory:// takes. Records logged
/// meanwhile are held back and logged after each slice (see `logs`): run on this thread,
/// Python's logging would also run signal handlers, whose exceptions would be lost.
pub(crate) fn wait<T, F>(py: Python<'_>, fut: F, on_cancel: Option<CancelHook>) -> PyResult<T>
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
pub(crate) type CancelHook = Box<dyn FnOnce() + Send>;
