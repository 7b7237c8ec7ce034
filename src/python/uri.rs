//! What a lock URI names, as the Python package asks it: the scheme table lives in
//! src/store/config/schemes.rs only.

use super::errors::to_py;
use crate::store::{Location, StoreKind};
use pyo3::prelude::*;

/// Checks a lock URI (or with `prefix`, a listing's prefix) as every entry point would take
/// it, before anything is resolved for it (credentials import cloud libraries): ValueError
/// naming what is wrong.
#[pyfunction]
#[pyo3(signature = (uri, prefix=false))]
pub(crate) fn check_uri(uri: &str, prefix: bool) -> PyResult<()> {
    match Location::parse(uri) {
        Ok(_) => Ok(()),
        Err(e) if prefix => Err(to_py(crate::store::as_prefix_error(e))),
        Err(e) => Err(to_py(e)),
    }
}

/// The kind of store `uri` names, from its scheme: `s3`, `azure`, `gcs`, `file` or
/// `memory`; None for a scheme no store has.
#[pyfunction]
pub(crate) fn store_kind(uri: &str) -> Option<&'static str> {
    StoreKind::of_uri(uri).map(StoreKind::as_str)
}

/// The cloud `uri` names (`s3`, `azure`, `gcs`); None for local files, memory and a
/// scheme no store has.
#[pyfunction]
pub(crate) fn cloud_of(uri: &str) -> Option<&'static str> {
    match StoreKind::of_uri(uri)? {
        kind @ StoreKind::Cloud(_) => Some(kind.as_str()),
        _ => None,
    }
}

/// True if `uri` names the same place whatever the working folder and HOME are.
#[pyfunction]
pub(crate) fn names_a_fixed_place(uri: &str) -> bool {
    crate::store::names_a_fixed_place(uri)
}

/// The module's attributes of this file, with each kind's name for messages.
pub(crate) fn add_to(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let names = pyo3::types::PyDict::new(m.py());
    for kind in StoreKind::all() {
        names.set_item(kind.as_str(), kind.name())?;
    }
    m.add("STORE_NAMES", names)?;
    m.add_function(wrap_pyfunction!(check_uri, m)?)?;
    m.add_function(wrap_pyfunction!(store_kind, m)?)?;
    m.add_function(wrap_pyfunction!(cloud_of, m)?)?;
    m.add_function(wrap_pyfunction!(names_a_fixed_place, m)?)?;
    Ok(())
}
