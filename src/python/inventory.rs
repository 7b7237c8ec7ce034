//! `NativeInventory`: the locks under a prefix, a page at a time, for `blob_lock.list_locks`,
//! `blob_lock.prune_locks` and the `ls` and `prune` commands; each lock as an inspection
//! gives it, with its URI, and what pruning did with it.

use super::credentials::{access, NativeCredentials};
use super::driver::wait;
use super::errors::to_py;
use super::options::timing_of;
use super::results::NativeEntry;
use crate::inventory::{prune, Inventory};
use crate::lease::LockOptions;
use futures_util::stream::{self, StreamExt};
use pyo3::prelude::*;
use pyo3::types::PyDict;
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
    #[pyo3(signature = (prefix, *, storage_options, credentials=None, **timing))]
    fn new(
        prefix: &str,
        storage_options: Option<HashMap<String, String>>,
        credentials: Option<Bound<'_, NativeCredentials>>,
        timing: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        // prune's judgement of a lockfile's tokens follows the clock skew allowance.
        let settings = timing_of(timing, "prune_locks", &["clock_skew"])?;
        let store = access(storage_options, credentials.as_ref());
        let opts = LockOptions::from_settings(&settings, store).map_err(to_py)?;
        let inventory = Inventory::new(prefix, &opts).map_err(to_py)?;
        Ok(NativeInventory {
            inventory: Arc::new(tokio::sync::Mutex::new(inventory)),
            options: opts,
        })
    }

    /// The next page of locks; an empty list once every lock was listed. With `older_than`
    /// (seconds), each is also pruned (`delete`) or judged for it, and says so (`prune`,
    /// `prune_detail`). With `only`, only those URIs are deleted; the others are judged as
    /// in a dry run.
    #[pyo3(signature = (older_than=None, delete=false, only=None))]
    fn next_page(
        &self,
        py: Python<'_>,
        older_than: Option<f64>,
        delete: bool,
        only: Option<HashSet<String>>,
    ) -> PyResult<Vec<NativeEntry>> {
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
        Ok((page.iter())
            .map(|(entry, pruned)| NativeEntry::of(entry, pruned.as_ref()))
            .collect())
    }
}
