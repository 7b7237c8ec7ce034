//! `stats()`: the process-wide metrics ([`crate::metrics`]) as plain dicts and lists.

use crate::metrics::{snapshot, HistogramSnapshot};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

fn histogram<'py>(py: Python<'py>, h: &HistogramSnapshot) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("count", h.count)?;
    d.set_item("sum", h.sum)?;
    d.set_item("buckets", PyList::new(py, &h.buckets)?)?;
    Ok(d)
}

/// Every counter and histogram of this process so far.
#[pyfunction]
pub(crate) fn stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let s = snapshot();
    let d = PyDict::new(py);
    let requests = PyDict::new(py);
    for (kind, outcome, n) in &s.requests {
        let by_outcome = match requests.get_item(kind.as_str())? {
            Some(existing) => existing.cast_into::<PyDict>()?,
            None => {
                let fresh = PyDict::new(py);
                requests.set_item(kind.as_str(), &fresh)?;
                fresh
            }
        };
        by_outcome.set_item(outcome.as_str(), n)?;
    }
    d.set_item("requests", requests)?;
    let acquisitions = PyDict::new(py);
    for (ended, n) in &s.acquisitions {
        acquisitions.set_item(ended.as_str(), n)?;
    }
    d.set_item("acquisitions", acquisitions)?;
    d.set_item("releases", s.releases)?;
    let renewals = PyDict::new(py);
    renewals.set_item("ok", s.renewals)?;
    renewals.set_item("retried", s.renewals_retried)?;
    d.set_item("renewals", renewals)?;
    let losses = PyDict::new(py);
    for (cause, n) in &s.losses {
        losses.set_item(cause.as_str(), n)?;
    }
    d.set_item("losses", losses)?;
    d.set_item("acquire_wait_seconds", histogram(py, &s.acquire_wait)?)?;
    d.set_item("hold_seconds", histogram(py, &s.hold)?)?;
    d.set_item(
        "renewal_latency_seconds",
        histogram(py, &s.renewal_latency)?,
    )?;
    d.set_item("renewal_margin_seconds", histogram(py, &s.renewal_margin)?)?;
    d.set_item(
        "renewal_margin_min_seconds",
        s.renewal_margin_min.map(|m| m.as_secs_f64()),
    )?;
    d.set_item("throttled", s.throttled)?;
    d.set_item("queued", s.queued)?;
    d.set_item("slots_held", s.slots_held)?;
    d.set_item("semaphore_waiters", s.semaphore_waiters)?;
    Ok(d)
}
