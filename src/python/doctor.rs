//! `doctor`: probes a store's conditional writes beside a lock, and races clients there.

use super::credentials::{access, NativeCredentials};
use super::driver::wait;
use super::errors::to_py;
use super::results::NativeDoctorReport;
use crate::lease::{LockOptions, Settings};
use pyo3::prelude::*;
use std::collections::HashMap;

/// Probes the store behind `uri` on a scratch lockfile, and with `race` (racers, rounds)
/// races independent clients beside it.
#[pyfunction]
#[pyo3(signature = (uri, *, storage_options, credentials=None, expire, race=None))]
pub(crate) fn doctor(
    py: Python<'_>,
    uri: &str,
    storage_options: Option<HashMap<String, String>>,
    credentials: Option<Bound<'_, NativeCredentials>>,
    expire: f64,
    race: Option<(usize, usize)>,
) -> PyResult<NativeDoctorReport> {
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
    Ok(NativeDoctorReport::of(&report, raced.as_ref()))
}
