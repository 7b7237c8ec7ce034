//! Rust log records to Python's `logging`, under loggers named after their targets
//! (`blob_lock::lease::held` logs to `blob_lock.lease.held`), at the levels Python's
//! configuration enables, as it is now.
//!
//! Where a record goes depends on the thread that logs it:
//!
//! - a runtime thread (every heartbeat) never waits for the GIL: the record is left for the
//!   deliverer ([`super::to_python`]), which keeps its time and thread name;
//! - a thread driving a blocking call with the GIL released only collects its records
//!   ([`holding_back`]) and hands them over afterwards with the GIL ([`replay`]): on the main
//!   thread Python runs pending signal handlers inside any Python code, and the handler's
//!   exception (KeyboardInterrupt) must reach the caller, not vanish inside a log call;
//! - any other thread hands the record to `logging` at once.
//!
//! Which records Python wants is asked of Python with the GIL, never on the heartbeat path:
//! each target's least enabled level is kept here, read again every second by the
//! deliverer (a level set after the first lock is honoured within that second), and
//! `log::max_level` follows the most verbose of them, so that disabled records cost one
//! comparison. (pyo3-log, used before, takes the GIL on the logging thread for every
//! record, and caches each target's level for ever.)

use super::to_python::{self, Record};
use crate::per_process::PerProcess;
use pyo3::prelude::*;
use pyo3::types::PyList;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{PoisonError, RwLock};

/// Python's level numbers for Rust's (TRACE is 5, below DEBUG).
fn python_level(level: log::Level) -> u8 {
    match level {
        log::Level::Error => 40,
        log::Level::Warn => 30,
        log::Level::Info => 20,
        log::Level::Debug => 10,
        log::Level::Trace => 5,
    }
}

/// The Rust filter that lets through records at `python` and above.
fn filter_at(python: u8) -> log::LevelFilter {
    match python {
        0..=5 => log::LevelFilter::Trace,
        6..=10 => log::LevelFilter::Debug,
        11..=20 => log::LevelFilter::Info,
        21..=30 => log::LevelFilter::Warn,
        31..=40 => log::LevelFilter::Error,
        _ => log::LevelFilter::Off,
    }
}

/// Targets outside blob-lock (object_store, hyper) are wanted from WARNING on only.
const OTHERS_FROM: u8 = 30;

/// The Python logger of a Rust target.
fn logger_name(target: &str) -> String {
    target.replace("::", ".")
}

/// Each target's least enabled Python level, as last read from Python. A target not read
/// yet is taken as wanted: the record goes to Python, which decides. Per process: a thread
/// of the parent may have held it at the fork.
static THRESHOLDS: PerProcess<RwLock<Option<HashMap<String, u8>>>> =
    PerProcess::new(Default::default);

/// Set at interpreter exit, after blob-lock's exit hook: records are dropped from then on.
static CLOSED: AtomicBool = AtomicBool::new(false);

fn wanted(metadata: &log::Metadata<'_>) -> bool {
    let level = python_level(metadata.level());
    let target = metadata.target();
    let thresholds = THRESHOLDS
        .get()
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    let least = thresholds.as_ref().and_then(|t| t.get(target).copied());
    match least {
        Some(least) => level >= least,
        None => target.starts_with("blob_lock") || level >= OTHERS_FROM,
    }
}

/// One record held back, owned: a log::Record borrows its parts.
pub(super) struct HeldBack(Record);

thread_local! {
    /// Some while this thread is inside [`holding_back`].
    static HELD_BACK: RefCell<Option<Vec<HeldBack>>> = const { RefCell::new(None) };
}

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        wanted(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if CLOSED.load(Ordering::SeqCst) || !wanted(record.metadata()) {
            return;
        }
        // Formatted now: a message's Display may itself log, and the record may wait.
        let owned = Record {
            level: record.level(),
            target: record.target().to_string(),
            message: record.args().to_string(),
            file: record.file().map(str::to_string),
            line: record.line(),
            created: now(),
            thread: std::thread::current().name().map(str::to_string),
        };
        if crate::runtime::on_runtime_thread() {
            return to_python::leave_record(owned);
        }
        // Not while the thread is exiting (its thread-locals gone): log directly then.
        let holding = HELD_BACK
            .try_with(|held| held.borrow().is_some())
            .unwrap_or(false);
        if !holding {
            Python::attach(|py| {
                deliver(py, vec![owned], 0);
                // An exception here has nobody to raise it to: the logging module's own
                // errors are printed by its handlers.
                if let Some(e) = PyErr::take(py) {
                    e.write_unraisable(py, None);
                }
            });
            return;
        }
        let _ = HELD_BACK.try_with(|held| {
            if let Some(held) = held.borrow_mut().as_mut() {
                held.push(HeldBack(owned));
            }
        });
    }

    fn flush(&self) {}
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Installs the logger (at import) and starts the deliverer. Every record is wanted until
/// `blob_lock._logs`, imported next by the package, reads Python's levels and asks to hear
/// of every change of them ([`logging_changed`]): the native module imports nothing of the
/// package while the package is being imported.
pub(super) fn install() {
    // Fails only when a logger is installed already (a second import): keep that one.
    static LOGGER: Logger = Logger;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Trace);
        to_python::deliver_with(to_python::Delivery { deliver, refresh });
        to_python::start();
    }
}

/// Python's logging levels changed (called by `blob_lock._logs`): read them again.
#[pyfunction]
pub(super) fn logging_changed(py: Python<'_>) {
    refresh(py);
}

/// Hands `records` to `logging` (with the GIL), in order, and says how many were dropped
/// before them, if any. An exception raised by Python meanwhile (a signal handler's) is
/// left set for the caller.
pub(super) fn deliver(py: Python<'_>, records: Vec<Record>, dropped: u64) {
    if records.is_empty() && dropped == 0 {
        return;
    }
    let mut rows: Vec<_> = records
        .into_iter()
        .map(|r| {
            note_target(&r.target);
            let name = logger_name(&r.target);
            (
                name,
                python_level(r.level),
                r.message,
                r.file,
                r.line,
                r.created,
                r.thread,
            )
        })
        .collect();
    if dropped > 0 {
        rows.push((
            "blob_lock".to_string(),
            30,
            format!(
                "{dropped} log records of blob-lock were dropped: they came faster than Python took them (more than {} waiting; a thread may have held the GIL)",
                to_python::MAX_RECORDS
            ),
            None,
            None,
            now(),
            None,
        ));
    }
    let delivered = py
        .import("blob_lock._logs")
        .and_then(|m| m.getattr("deliver"))
        .and_then(|f| f.call1((rows,)));
    if let Err(e) = delivered {
        e.restore(py);
    }
}

/// Reads Python's levels again: each known target's least enabled level, and the most
/// verbose of every logger under `blob_lock`, which `log::max_level` follows.
pub(super) fn refresh(py: Python<'_>) {
    let targets: Vec<String> = {
        let thresholds = THRESHOLDS
            .get()
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        thresholds
            .as_ref()
            .map(|t| t.keys().cloned().collect())
            .unwrap_or_default()
    };
    let names: Vec<String> = targets.iter().map(|t| logger_name(t)).collect();
    let read = py
        .import("blob_lock._logs")
        .and_then(|m| m.getattr("thresholds"))
        .and_then(|f| f.call1((PyList::new(py, &names)?,)))
        .and_then(|r| r.extract::<(Vec<u8>, u8)>());
    let (each, least_under) = match read {
        Ok(read) => read,
        Err(e) => {
            e.write_unraisable(py, None);
            return;
        }
    };
    let mut fresh = HashMap::with_capacity(targets.len());
    let mut most_verbose = least_under.min(OTHERS_FROM);
    for (target, least) in targets.into_iter().zip(each) {
        let least = if target.starts_with("blob_lock") {
            least
        } else {
            least.max(OTHERS_FROM)
        };
        most_verbose = most_verbose.min(least);
        fresh.insert(target, least);
    }
    *THRESHOLDS
        .get()
        .write()
        .unwrap_or_else(PoisonError::into_inner) = Some(fresh);
    log::set_max_level(filter_at(most_verbose));
}

/// Notes a target seen in a record, so that the next [`refresh`] reads its level.
fn note_target(target: &str) {
    let known = THRESHOLDS
        .get()
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .is_some_and(|t| t.contains_key(target));
    if !known {
        let mut thresholds = THRESHOLDS
            .get()
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // Wanted until read: the deliverer decides with Python meanwhile.
        thresholds
            .get_or_insert_with(HashMap::new)
            .insert(target.to_string(), 0);
    }
}

/// Drops every later record (`exit::close_python_calls`).
pub(super) fn close() {
    CLOSED.store(true, Ordering::SeqCst);
}

/// Runs `f`, collecting the records this thread logs meanwhile instead of logging them.
pub(super) fn holding_back<R>(f: impl FnOnce() -> R) -> (R, Vec<HeldBack>) {
    /// Puts the outer section back, even if `f` panics.
    struct Section(Option<Vec<HeldBack>>);
    impl Drop for Section {
        fn drop(&mut self) {
            let outer = self.0.take();
            HELD_BACK.with(|held| held.replace(outer));
        }
    }
    let section = Section(HELD_BACK.with(|held| held.replace(Some(Vec::new()))));
    let result = f();
    let held = HELD_BACK
        .with(|held| held.borrow_mut().take())
        .unwrap_or_default();
    drop(section);
    (result, held)
}

/// Logs `held` through Python, in order; returns the first exception raised meanwhile (a
/// signal handler's, typically), which the caller raises.
pub(super) fn replay(py: Python<'_>, held: Vec<HeldBack>) -> Option<PyErr> {
    if held.is_empty() {
        return None;
    }
    deliver(py, held.into_iter().map(|h| h.0).collect(), 0);
    PyErr::take(py)
}
