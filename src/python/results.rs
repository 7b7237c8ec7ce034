//! What looking at a lock returns to Python: frozen objects whose every field the stub
//! (`_blob_lock.pyi`) declares, so that a field renamed on one side fails stubtest and the
//! type check of `blob_lock._inspect`, `_inventory` and `_doctor`, which build the public
//! dataclasses from them field by field. Times are Unix seconds.

use crate::doctor::{Probe, Report};
use crate::inspect::Inspection;
use crate::inventory::{Entry, Pruned};
use crate::lockfile::{parse_time, LockFile};
use crate::protocol::Broken;
use crate::race::RaceReport;
use chrono::{DateTime, Utc};
use pyo3::prelude::*;

fn seconds(t: DateTime<Utc>) -> f64 {
    t.timestamp_micros() as f64 / 1e6
}

fn epoch(s: &str) -> Option<f64> {
    parse_time(s).map(seconds)
}

/// Empty (unknown, as some writers leave it) as None.
fn known(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// A lockfile's fields for people and programs.
#[pyclass(frozen, get_all, module = "blob_lock._blob_lock")]
#[derive(Clone)]
pub(crate) struct NativeLockfileFacts {
    owner: String,
    hostname: Option<String>,
    pid: Option<String>,
    token: u64,
    expire_s: f64,
    written_at: Option<f64>,
    released_at: Option<f64>,
    first_acquired_at: Option<f64>,
    write_count: u64,
    writer_name: Option<String>,
    protocol: Option<String>,
    broken_by: Option<String>,
    grace_s: Option<f64>,
    grace_until: Option<f64>,
    /// In the lockfile's order.
    labels: Vec<(String, String)>,
}

impl NativeLockfileFacts {
    pub(crate) fn of(lf: &LockFile) -> NativeLockfileFacts {
        NativeLockfileFacts {
            owner: lf.writer_id.to_string(),
            hostname: known(&lf.hostname),
            pid: known(&lf.pid),
            token: lf.token,
            expire_s: lf.expire_s,
            written_at: epoch(&lf.written_at),
            released_at: epoch(&lf.released_at),
            first_acquired_at: epoch(&lf.first_acquired_at),
            write_count: lf.write_count,
            writer_name: lf.writer_name.as_deref().map(str::to_string),
            protocol: lf.protocol.as_deref().map(str::to_string),
            broken_by: lf.broken_by.as_deref().map(str::to_string),
            grace_s: lf.grace_s,
            grace_until: lf.grace_until().map(seconds),
            labels: (lf.labels.iter().flat_map(|m| m.iter()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
}

/// What one read of a lockfile shows.
#[pyclass(frozen, get_all, module = "blob_lock._blob_lock")]
#[derive(Clone)]
pub(crate) struct NativeInspection {
    /// `unlocked`, `held`, `expired` or `released` (Python tells `ours` apart).
    state: &'static str,
    expires_in: Option<f64>,
    /// When the store says the lockfile was last written (the store's clock).
    last_modified: Option<f64>,
    lockfile: Option<NativeLockfileFacts>,
}

impl NativeInspection {
    pub(crate) fn of(i: &Inspection) -> NativeInspection {
        NativeInspection {
            state: i.state.as_str(),
            expires_in: i.expires_in,
            last_modified: i.last_modified.map(seconds),
            lockfile: i.lockfile.as_ref().map(NativeLockfileFacts::of),
        }
    }
}

/// `(outcome, the lockfile as found, or None)`.
pub(crate) fn broken(b: &Broken) -> (&'static str, Option<NativeLockfileFacts>) {
    match b {
        Broken::NoLockfile => ("no_lockfile", None),
        Broken::AlreadyReleased(lf) => ("already_released", Some(NativeLockfileFacts::of(lf))),
        Broken::Changed(lf) => ("changed", Some(NativeLockfileFacts::of(lf))),
        Broken::Broken(lf) => ("broken", Some(NativeLockfileFacts::of(lf))),
    }
}

/// One lock of a listing: what a read of it showed, or why its lockfile cannot be read;
/// with what pruning did with it, when it was pruned.
#[pyclass(frozen, get_all, module = "blob_lock._blob_lock")]
pub(crate) struct NativeEntry {
    uri: String,
    inspection: Option<NativeInspection>,
    problem: Option<String>,
    prune: Option<&'static str>,
    prune_detail: Option<String>,
}

impl NativeEntry {
    pub(crate) fn of(entry: &Entry, pruned: Option<&Pruned>) -> NativeEntry {
        let (inspection, problem) = match &entry.seen {
            Ok(seen) => (Some(NativeInspection::of(seen)), None),
            Err(problem) => (None, Some(problem.clone())),
        };
        NativeEntry {
            uri: entry.uri.clone(),
            inspection,
            problem,
            prune: pruned.map(Pruned::as_str),
            prune_detail: pruned.and_then(|p| p.detail().map(str::to_string)),
        }
    }
}

/// One call the doctor made to the store.
#[pyclass(frozen, get_all, module = "blob_lock._blob_lock")]
#[derive(Clone)]
pub(crate) struct NativeProbe {
    name: &'static str,
    ok: bool,
    seconds: f64,
    detail: String,
}

impl NativeProbe {
    fn of(p: &Probe) -> NativeProbe {
        NativeProbe {
            name: p.name,
            ok: p.ok,
            seconds: p.seconds,
            detail: p.detail.clone(),
        }
    }
}

/// What racing independent clients found.
#[pyclass(frozen, get_all, module = "blob_lock._blob_lock")]
#[derive(Clone)]
pub(crate) struct NativeRaceReport {
    scratch: String,
    racers: usize,
    rounds: usize,
    create_doubles: usize,
    update_doubles: usize,
    errors: usize,
    inconclusive: usize,
    first_double: Option<String>,
    seconds: f64,
    cas_safe: bool,
}

impl NativeRaceReport {
    pub(crate) fn of(r: &RaceReport) -> NativeRaceReport {
        NativeRaceReport {
            scratch: r.scratch.clone(),
            racers: r.racers,
            rounds: r.rounds,
            create_doubles: r.create_doubles,
            update_doubles: r.update_doubles,
            errors: r.errors,
            inconclusive: r.inconclusive,
            first_double: r.first_double.clone(),
            seconds: r.seconds,
            cas_safe: r.cas_safe(),
        }
    }
}

/// What the doctor found.
#[pyclass(frozen, get_all, module = "blob_lock._blob_lock")]
pub(crate) struct NativeDoctorReport {
    uri: String,
    scratch: String,
    probes: Vec<NativeProbe>,
    create_is_conditional: bool,
    update_is_conditional: bool,
    reads_see_writes: bool,
    /// By the probes alone (the race's own verdict is in `race`).
    cas_safe: bool,
    lww_usable: bool,
    race: Option<NativeRaceReport>,
}

impl NativeDoctorReport {
    pub(crate) fn of(r: &Report, race: Option<&RaceReport>) -> NativeDoctorReport {
        NativeDoctorReport {
            uri: r.uri.clone(),
            scratch: r.scratch.clone(),
            probes: r.probes.iter().map(NativeProbe::of).collect(),
            create_is_conditional: r.create_is_conditional,
            update_is_conditional: r.update_is_conditional,
            reads_see_writes: r.reads_see_writes,
            cas_safe: r.cas_safe(),
            lww_usable: r.lww_usable(),
            race: race.map(NativeRaceReport::of),
        }
    }
}

/// The module's classes of this file.
pub(crate) fn add_to(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeLockfileFacts>()?;
    m.add_class::<NativeInspection>()?;
    m.add_class::<NativeEntry>()?;
    m.add_class::<NativeProbe>()?;
    m.add_class::<NativeRaceReport>()?;
    m.add_class::<NativeDoctorReport>()?;
    Ok(())
}
