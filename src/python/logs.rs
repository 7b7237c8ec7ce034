//! Rust log records to Python's `logging` (through pyo3-log), held back while a thread
//! drives a blob-lock future on Python's behalf.
//!
//! A blocking call (`acquire`, `release`, ...) drives its future on the calling thread,
//! with the GIL released. A record logged there would run Python's logging code on that
//! thread, and on the main thread Python runs pending signal handlers inside any Python
//! code: the handler's exception (KeyboardInterrupt, the CLI's SIGTERM) would surface
//! inside the log call, where pyo3-log can only leave it pending, and the wait would go on.
//! So a driving thread only collects its records ([`holding_back`]), and hands them to
//! Python afterwards with the GIL ([`replay`]), where an exception is the caller's to
//! raise. Runtime threads log at once, as before.

use log::Log as _;
use pyo3::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::RwLock;

/// pyo3-log's logger, with records held back on threads inside [`holding_back`].
struct HoldingBack {
    python: pyo3_log::Logger,
    /// Targets whose records pyo3-log refused, a bit per level. Its answer for a target
    /// never changes once it has cached the target's Python level (`LoggersAndLevels`,
    /// never reset), and asking walks its cache by each `::` segment of the target, about a
    /// thousand instructions, for each of the debug records of every acquire and release.
    refused: RwLock<HashMap<String, u8>>,
}

impl HoldingBack {
    /// pyo3-log's `enabled`, remembering its refusals.
    fn enabled_here(&self, metadata: &log::Metadata<'_>) -> bool {
        let bit = 1u8 << (metadata.level() as usize);
        let known = self.refused.read().unwrap_or_else(|e| e.into_inner());
        if known
            .get(metadata.target())
            .is_some_and(|bits| bits & bit != 0)
        {
            return false;
        }
        drop(known);
        if self.python.enabled(metadata) {
            return true;
        }
        let mut known = self.refused.write().unwrap_or_else(|e| e.into_inner());
        *known.entry(metadata.target().to_string()).or_default() |= bit;
        false
    }
}

/// One record, owned: a log::Record borrows its parts.
pub(super) struct Held {
    level: log::Level,
    target: String,
    message: String,
    module_path: Option<String>,
    file: Option<String>,
    line: Option<u32>,
}

/// Set at interpreter exit, after blob-lock's exit hook: records are dropped from then on.
static CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Drops every later record (`exit::close_python_calls`).
pub(super) fn close() {
    CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
}

thread_local! {
    /// Some while this thread is inside [`holding_back`].
    static HELD: RefCell<Option<Vec<Held>>> = const { RefCell::new(None) };
}

impl log::Log for HoldingBack {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        self.enabled_here(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if CLOSED.load(std::sync::atomic::Ordering::SeqCst) {
            return; // the interpreter is finalizing: nothing may call into it
        }
        // pyo3-log's `enabled` reads only its cache of Python's levels: no Python code runs
        // here. A target not cached yet counts as enabled (and is held, or logged).
        if !self.enabled_here(record.metadata()) {
            return;
        }
        // Not while the thread is exiting (its thread-locals gone): log directly then.
        let holding = HELD
            .try_with(|held| held.borrow().is_some())
            .unwrap_or(false);
        if !holding {
            return self.python.log(record);
        }
        // Formatted before borrowing: a message's Display may itself log.
        let one = Held {
            level: record.level(),
            target: record.target().to_string(),
            message: record.args().to_string(),
            module_path: record.module_path().map(str::to_string),
            file: record.file().map(str::to_string),
            line: record.line(),
        };
        let _ = HELD.try_with(|held| {
            if let Some(held) = held.borrow_mut().as_mut() {
                held.push(one);
            }
        });
    }

    fn flush(&self) {}
}

/// Installs the logger: records under the target "blob_lock" at every level Python's
/// logger "blob_lock" enables, others at WARNING and above.
pub(super) fn install(py: Python<'_>) -> PyResult<()> {
    let python = pyo3_log::Logger::new(py, pyo3_log::Caching::LoggersAndLevels)?
        .filter(log::LevelFilter::Warn)
        .filter_target("blob_lock".to_string(), log::LevelFilter::Trace);
    // Fails only when a logger is installed already (a second import): keep that one.
    let logger = HoldingBack {
        python,
        refused: Default::default(),
    };
    if log::set_boxed_logger(Box::new(logger)).is_ok() {
        log::set_max_level(log::LevelFilter::Trace);
    }
    Ok(())
}

/// Runs `f`, collecting the records this thread logs meanwhile instead of logging them.
pub(super) fn holding_back<R>(f: impl FnOnce() -> R) -> (R, Vec<Held>) {
    /// Puts the outer section back, even if `f` panics.
    struct Section(Option<Vec<Held>>);
    impl Drop for Section {
        fn drop(&mut self) {
            let outer = self.0.take();
            HELD.with(|held| held.replace(outer));
        }
    }
    let section = Section(HELD.with(|held| held.replace(Some(Vec::new()))));
    let result = f();
    let held = HELD
        .with(|held| held.borrow_mut().take())
        .unwrap_or_default();
    drop(section);
    (result, held)
}

/// Logs `held` through Python, in order; returns the first exception raised meanwhile (a
/// signal handler's, typically), which the caller raises.
pub(super) fn replay(py: Python<'_>, held: Vec<Held>) -> Option<PyErr> {
    let mut raised = None;
    for h in held {
        log::logger().log(
            &log::Record::builder()
                .level(h.level)
                .target(&h.target)
                .args(format_args!("{}", h.message))
                .module_path(h.module_path.as_deref())
                .file(h.file.as_deref())
                .line(h.line)
                .build(),
        );
        if let Some(e) = PyErr::take(py) {
            raised.get_or_insert(e);
        }
    }
    raised
}
