//! The lock's options from Python keyword arguments, by their one definition
//! ([`crate::lease::Settings`]): each value converted by its option's kind (TypeError naming
//! the option for a wrong type), storage options and credential providers resolved by the
//! Python package (`blob_lock._credentials.resolve`) into the store's [`Access`].

use super::args::loss_hook;
use super::credentials::{access, NativeCredentials};
use super::errors::to_py;
use crate::lease::{Given, Kind, LockOptions, Settings};
use crate::store::{Access, Cloud};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDelta, PyDeltaAccess, PyDict, PyList, PyMapping, PyTuple};
use std::collections::HashMap;

/// A lock's options as parsed: the settings, and where the store is and how to reach it.
pub(crate) struct Parsed {
    pub(crate) settings: Settings,
    pub(crate) store: Access,
}

impl Parsed {
    /// The lock's configuration: the settings checked together, on the store.
    pub(crate) fn lock_options(self) -> PyResult<LockOptions> {
        LockOptions::from_settings(&self.settings, self.store).map_err(to_py)
    }
}

/// Parses `options` (keyword arguments as given, or None) for a store at `uri`. `who` names
/// the callable in errors; `takes` limits the options it accepts (None: all).
pub(crate) fn parse(
    py: Python<'_>,
    uri: &str,
    options: Option<&Bound<'_, PyDict>>,
    who: &str,
    takes: Option<&[&str]>,
) -> PyResult<Parsed> {
    let mut settings = Settings::default();
    let (mut storage_options, mut provider) = (py.None().into_bound(py), py.None().into_bound(py));
    for (key, value) in options.into_iter().flat_map(|d| d.iter()) {
        let name: String = key.extract().map_err(|_| {
            PyTypeError::new_err(format!("{who}() option names are strings, got {key}"))
        })?;
        let field = Settings::field(&name)
            .map_err(|e| PyTypeError::new_err(format!("{who}() got an {e}")))?;
        if let Some(takes) = takes {
            if !takes.contains(&field.name) {
                return Err(PyTypeError::new_err(format!(
                    "{who}() does not take {name}; it takes {}",
                    takes.join(", ")
                )));
            }
        }
        let given = match field.kind {
            Kind::StorageOptions => {
                storage_options = value;
                Given::External
            }
            Kind::Credentials => {
                provider = value;
                Given::External
            }
            kind => given(&name, kind, &value)?,
        };
        settings.set(&name, given).map_err(to_py)?;
    }
    let store = resolve(py, uri, &storage_options, &provider)?;
    Ok(Parsed { settings, store })
}

/// The store's access for `uri`: storage options and the credentials that
/// `blob_lock._credentials.resolve` finds (the provider given, one registered with
/// `set_credentials`, or the cloud's own chain).
pub(crate) fn resolve(
    py: Python<'_>,
    uri: &str,
    storage_options: &Bound<'_, PyAny>,
    provider: &Bound<'_, PyAny>,
) -> PyResult<Access> {
    if provider.is_none() && storage_options.is_none() && Cloud::of_uri(uri).is_none() {
        // Local files and memory:// take no credentials and read no environment: what
        // resolve would answer, without the call into Python (a part of making every lock
        // object).
        return Ok(Access::default());
    }
    let resolved = py
        .import("blob_lock._credentials")?
        .call_method1("resolve", (uri, storage_options, provider))?;
    let options: Option<HashMap<String, String>> =
        resolved.get_item("storage_options")?.extract()?;
    let credentials: Option<Bound<'_, NativeCredentials>> =
        resolved.get_item("credentials")?.extract()?;
    Ok(access(options, credentials.as_ref()))
}

/// The timing options a caller that makes no lock of its own takes (`takes`: their names),
/// on the defaults: prune's `clock_skew`.
pub(crate) fn timing_of(
    options: Option<&Bound<'_, PyDict>>,
    who: &str,
    takes: &[&str],
) -> PyResult<Settings> {
    let mut settings = Settings::default();
    for (key, value) in options.into_iter().flat_map(|d| d.iter()) {
        let name: String = key.extract()?;
        let field = (Settings::field(&name).ok()).filter(|f| takes.contains(&f.name));
        let Some(field) = field else {
            return Err(PyTypeError::new_err(format!(
                "{who}() does not take {name}; of the lock's options it takes {}",
                takes.join(", ")
            )));
        };
        settings
            .set(&name, given(&name, field.kind, &value)?)
            .map_err(to_py)?;
    }
    Ok(settings)
}

/// A Python value as the option `name` of `kind` takes it.
fn given(name: &str, kind: Kind, value: &Bound<'_, PyAny>) -> PyResult<Given> {
    let refused = |what: &str| {
        PyTypeError::new_err(format!(
            "{name} must be {what}, got {}",
            value.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    };
    if value.is_none() {
        return match kind {
            Kind::SecondsOrNone | Kind::Labels | Kind::Callback => Ok(Given::None),
            Kind::Seconds => Err(refused("seconds (a number) or a timedelta")),
            Kind::Protocol => Err(refused("\"auto\", \"cas\" or \"lww\"")),
            Kind::Flag => Err(refused("True or False")),
            Kind::StorageOptions | Kind::Credentials => Ok(Given::External),
        };
    }
    Ok(match kind {
        Kind::Seconds | Kind::SecondsOrNone => Given::Seconds(
            seconds(value).ok_or_else(|| refused("seconds (a number) or a timedelta"))?,
        ),
        Kind::Protocol => Given::Text(
            value
                .extract()
                .map_err(|_| refused("\"auto\", \"cas\" or \"lww\""))?,
        ),
        Kind::Flag => Given::Flag(value.extract().map_err(|_| refused("True or False"))?),
        Kind::Labels => Given::Pairs(labels(value)?),
        Kind::Callback => {
            if !value.is_callable() {
                return Err(refused("callable"));
            }
            Given::Hook(loss_hook(value))
        }
        Kind::StorageOptions | Kind::Credentials => Given::External,
    })
}

/// Seconds from an int or float (not a bool) or a timedelta.
fn seconds(value: &Bound<'_, PyAny>) -> Option<f64> {
    if let Ok(d) = value.cast::<PyDelta>() {
        let micros = d.get_microseconds() as f64 + d.get_seconds() as f64 * 1e6;
        return Some(d.get_days() as f64 * 86_400.0 + micros / 1e6);
    }
    if value.is_instance_of::<pyo3::types::PyBool>() {
        return None;
    }
    if value.is_instance_of::<pyo3::types::PyInt>()
        || value.is_instance_of::<pyo3::types::PyFloat>()
    {
        return value.extract().ok();
    }
    None
}

/// Labels as (key, value) pairs of strings; their bounds are checked by the core.
fn labels(value: &Bound<'_, PyAny>) -> PyResult<Vec<(String, String)>> {
    let Ok(map) = value.cast::<PyMapping>() else {
        return Err(PyTypeError::new_err(format!(
            "labels must be a mapping of strings to strings, got {}",
            value.repr()?
        )));
    };
    let mut out = Vec::new();
    for item in map.items()?.iter() {
        let (key, text): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let shown = key.repr()?;
        let Ok(key) = key.extract::<String>() else {
            return Err(PyTypeError::new_err(format!(
                "label keys are strings, got {}",
                key.repr()?
            )));
        };
        let Ok(text) = text.extract::<String>() else {
            let (r, t) = (text.repr()?, text.get_type().name()?);
            return Err(PyTypeError::new_err(format!(
                "label {shown} must be a string, got {t} {r}; write it as text (str({r}))"
            )));
        };
        out.push((key, text));
    }
    Ok(out)
}

/// Every option: `(name, kind, default, doc)`, in the order of their definition.
#[pyfunction]
pub(crate) fn option_definitions(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let rows = Settings::fields()
        .iter()
        .map(|f| {
            let doc: Vec<&str> = f.doc.iter().map(|l| l.trim()).collect();
            let default = match &f.default {
                Given::Flag(b) => b.into_pyobject(py)?.to_owned().into_any(),
                Given::Seconds(s) => s.into_pyobject(py)?.into_any(),
                Given::Text(t) => t.into_pyobject(py)?.into_any(),
                _ => py.None().into_bound(py),
            };
            PyTuple::new(
                py,
                [
                    f.name.into_pyobject(py)?.into_any(),
                    f.kind.as_str().into_pyobject(py)?.into_any(),
                    default,
                    doc.join(" ").into_pyobject(py)?.into_any(),
                ],
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, rows)
}
