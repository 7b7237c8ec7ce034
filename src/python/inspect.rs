//! What looking at a lock returns to Python, as plain dicts that `blob_lock._inspect` and
//! `blob_lock._doctor` turn into typed objects: a lockfile, an inspection, a break, the
//! doctor's report (and the doctor's binding).

use super::credentials::{access, NativeCredentials};
use super::driver::wait;
use super::errors::to_py;
use crate::doctor::Report;
use crate::inspect::Inspection;
use crate::lease::{LockOptions, Settings};
use crate::lockfile::{parse_time, LockFile};
use crate::protocol::Broken;
use crate::race::RaceReport;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::collections::HashMap;

fn epoch(s: &str) -> Option<f64> {
    parse_time(s).map(|t| t.timestamp_micros() as f64 / 1e6)
}

/// The lockfile's fields for people and programs; times as Unix seconds.
pub(crate) fn lockfile_dict<'py>(py: Python<'py>, lf: &LockFile) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("owner", &*lf.writer_id)?;
    d.set_item("hostname", &*lf.hostname)?;
    d.set_item("pid", &*lf.pid)?;
    d.set_item("token", lf.token)?;
    d.set_item("expire_s", lf.expire_s)?;
    d.set_item("written_at", epoch(&lf.written_at))?;
    d.set_item("released_at", epoch(&lf.released_at))?;
    d.set_item("first_acquired_at", epoch(&lf.first_acquired_at))?;
    d.set_item("write_count", lf.write_count)?;
    d.set_item("writer_name", lf.writer_name.as_deref())?;
    d.set_item("protocol", lf.protocol.as_deref())?;
    d.set_item("broken_by", lf.broken_by.as_deref())?;
    d.set_item("grace_s", lf.grace_s)?;
    let labels = PyDict::new(py);
    for (k, v) in lf.labels.iter().flat_map(|m| m.iter()) {
        labels.set_item(k, v)?;
    }
    d.set_item("labels", labels)?;
    d.set_item(
        "grace_until",
        lf.grace_until().map(|t| t.timestamp_micros() as f64 / 1e6),
    )?;
    Ok(d)
}

pub(crate) fn inspection_dict<'py>(
    py: Python<'py>,
    i: &Inspection,
) -> PyResult<Bound<'py, PyDict>> {
    let d = match &i.lockfile {
        Some(lf) => lockfile_dict(py, lf)?,
        None => PyDict::new(py),
    };
    d.set_item("state", i.state.as_str())?;
    d.set_item("expires_in", i.expires_in)?;
    d.set_item(
        "last_modified",
        i.last_modified.map(|t| t.timestamp_micros() as f64 / 1e6),
    )?;
    Ok(d)
}

/// `(outcome, lockfile fields or None)`.
pub(crate) fn broken_tuple<'py>(
    py: Python<'py>,
    b: &Broken,
) -> PyResult<(&'static str, Option<Bound<'py, PyDict>>)> {
    Ok(match b {
        Broken::NoLockfile => ("no_lockfile", None),
        Broken::AlreadyReleased(lf) => ("already_released", Some(lockfile_dict(py, lf)?)),
        Broken::Changed(lf) => ("changed", Some(lockfile_dict(py, lf)?)),
        Broken::Broken(lf) => ("broken", Some(lockfile_dict(py, lf)?)),
    })
}

pub(crate) fn report_dict<'py>(py: Python<'py>, r: &Report) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("uri", &r.uri)?;
    d.set_item("scratch", &r.scratch)?;
    d.set_item("create_is_conditional", r.create_is_conditional)?;
    d.set_item("update_is_conditional", r.update_is_conditional)?;
    d.set_item("reads_see_writes", r.reads_see_writes)?;
    d.set_item("cas_safe", r.cas_safe())?;
    d.set_item("lww_usable", r.lww_usable())?;
    let probes = PyList::empty(py);
    for p in &r.probes {
        let pd = PyDict::new(py);
        pd.set_item("name", p.name)?;
        pd.set_item("ok", p.ok)?;
        pd.set_item("seconds", p.seconds)?;
        pd.set_item("detail", &p.detail)?;
        probes.append(pd)?;
    }
    d.set_item("probes", probes)?;
    Ok(d)
}

pub(crate) fn race_dict<'py>(py: Python<'py>, r: &RaceReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("scratch", &r.scratch)?;
    d.set_item("racers", r.racers)?;
    d.set_item("rounds", r.rounds)?;
    d.set_item("create_doubles", r.create_doubles)?;
    d.set_item("update_doubles", r.update_doubles)?;
    d.set_item("errors", r.errors)?;
    d.set_item("unsettled", r.unsettled)?;
    d.set_item("first_double", r.first_double.as_deref())?;
    d.set_item("seconds", r.seconds)?;
    d.set_item("cas_safe", r.cas_safe())?;
    Ok(d)
}

/// Probes the store behind `uri` on a scratch lockfile, and with `race` (racers, rounds)
/// races independent clients beside it; a dict of the report.
#[pyfunction]
#[pyo3(signature = (uri, *, storage_options, credentials=None, expire, race=None))]
pub(crate) fn doctor<'py>(
    py: Python<'py>,
    uri: &str,
    storage_options: Option<HashMap<String, String>>,
    credentials: Option<Bound<'_, NativeCredentials>>,
    expire: f64,
    race: Option<(usize, usize)>,
) -> PyResult<Bound<'py, PyDict>> {
    let settings = Settings {
        protocol: Some(crate::protocol::Protocol::Cas),
        ..Settings::with_expire(expire)
    };
    let store = access(storage_options, credentials.as_ref());
    let opts = LockOptions::from_settings(&settings, store).map_err(to_py)?;
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
    let d = report_dict(py, &report)?;
    d.set_item("race", raced.map(|r| race_dict(py, &r)).transpose()?)?;
    Ok(d)
}
