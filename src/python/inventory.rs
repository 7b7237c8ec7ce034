//! `NativeInventory`: the locks under a prefix, a page at a time, for `blob_lock.list_locks`,
//! `blob_lock.prune_locks` and the `ls` and `prune` commands; each lock as the dict an
//! inspection gives, with its URI, and what pruning did with it.

use super::args::outside_options;
use super::credentials::{access, NativeCredentials};
use super::driver::wait;
use super::errors::to_py;
use super::inspect::inspection_dict;
use crate::inventory::{prune, Entry, Inventory, Pruned};
use crate::lease::LockOptions;
use futures_util::stream::{self, StreamExt};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Locks of a page pruned at the same time.
const PRUNES_IN_FLIGHT: usize = 8;

#[pyclass(frozen, module = "blob_lock._blob_lock")]
pub(crate) struct NativeInventory {
    inventory: Arc<tokio::sync::Mutex<Inventory>>,
    options: LockOptions,
}

#[pymethods]
impl NativeInventory {
    #[new]
    #[pyo3(signature = (prefix, *, storage_options, credentials=None))]
    fn new(
        prefix: &str,
        storage_options: Option<HashMap<String, String>>,
        credentials: Option<Bound<'_, NativeCredentials>>,
    ) -> PyResult<Self> {
        let opts = outside_options(access(storage_options, credentials.as_ref()))?;
        let inventory = Inventory::new(prefix, &opts).map_err(to_py)?;
        Ok(NativeInventory {
            inventory: Arc::new(tokio::sync::Mutex::new(inventory)),
            options: opts,
        })
    }

    /// The next page of locks as dicts (`uri`, the inspection's fields, and `problem` for a
    /// lockfile that cannot be read); an empty list once every lock was listed. With
    /// `older_than` (seconds), each is also pruned (`delete`) or judged for it, and its dict
    /// has `prune` (the outcome) and `prune_detail`. With `only`, only those URIs are
    /// deleted; the others are judged as in a dry run.
    #[pyo3(signature = (older_than=None, delete=false, only=None))]
    fn next_page<'py>(
        &self,
        py: Python<'py>,
        older_than: Option<f64>,
        delete: bool,
        only: Option<HashSet<String>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let older_than = older_than
            .map(|s| crate::timing::seconds_or_zero("older_than", s))
            .transpose()
            .map_err(to_py)?;
        let (inventory, options) = (self.inventory.clone(), self.options.clone());
        let page = wait(
            py,
            async move {
                let page = inventory.lock().await.next_page().await?;
                let Some(older_than) = older_than else {
                    return Ok(page.into_iter().map(|e| (e, None)).collect::<Vec<_>>());
                };
                let (options, only) = (&options, &only);
                let pruned = stream::iter(page)
                    .map(|entry| async move {
                        let delete = delete && only.as_ref().is_none_or(|o| o.contains(&entry.uri));
                        let pruned = prune(&entry, older_than, options, delete).await;
                        (entry, Some(pruned))
                    })
                    .buffered(PRUNES_IN_FLIGHT)
                    .collect::<Vec<_>>()
                    .await;
                Ok(pruned)
            },
            None,
        )?;
        let out = PyList::empty(py);
        for (entry, pruned) in &page {
            out.append(entry_dict(py, entry, pruned.as_ref())?)?;
        }
        Ok(out)
    }
}

fn entry_dict<'py>(
    py: Python<'py>,
    entry: &Entry,
    pruned: Option<&Pruned>,
) -> PyResult<Bound<'py, PyDict>> {
    let d = match &entry.seen {
        Ok(seen) => inspection_dict(py, seen)?,
        Err(problem) => {
            let d = PyDict::new(py);
            d.set_item("state", "invalid")?;
            d.set_item("problem", problem)?;
            d
        }
    };
    d.set_item("uri", &entry.uri)?;
    if let Some(pruned) = pruned {
        d.set_item("prune", pruned.as_str())?;
        d.set_item("prune_detail", pruned.detail())?;
    }
    Ok(d)
}
