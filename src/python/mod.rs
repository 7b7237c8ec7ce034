//! The Python bindings: a thin layer over the lock core. Every wait releases the GIL and
//! stays interruptible (Ctrl-C); every core error becomes one class of
//! `blob_lock.exceptions`. The user-facing API (timedelta, context managers, the CLI) is
//! the pure-Python package in python/blob_lock, which wraps these classes. One file per
//! class or concern; this one only registers them.

// mimalloc for the Rust side of the extension (Python keeps its own allocator): a held
// lock's state is made on the thread that acquired it and renewed on the runtime's, and
// glibc's per-thread arenas strand memory between them. Only here,
// in the bindings: the core leaves the choice to whoever links it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod args;
mod asyncio;
mod credentials;
mod doctor;
mod driver;
mod errors;
mod exit;
mod holding;
mod inventory;
mod keep_alive;
mod lock;
mod lockfile;
mod logs;
mod metrics;
mod options;
mod results;
mod semaphore;
mod to_python;
mod uri;
mod write_once;

use pyo3::prelude::*;

#[pymodule]
fn _blob_lock(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Rust log records go to Python's `logging` under the logger "blob_lock".
    logs::install();
    errors::quiet_guarded_panics();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<lock::NativeLock>()?;
    m.add_class::<semaphore::NativeSemaphore>()?;
    m.add_class::<semaphore::NativeSemaphoreConfig>()?;
    m.add_class::<keep_alive::NativeKeepAlive>()?;
    m.add_class::<lockfile::NativeLockfile>()?;
    m.add_class::<inventory::NativeInventory>()?;
    m.add_class::<credentials::NativeCredentials>()?;
    m.add_class::<keep_alive::KeepAliveOptions>()?;
    m.add_function(wrap_pyfunction!(keep_alive::keep_alive_options, m)?)?;
    m.add_function(wrap_pyfunction!(keep_alive::keep_alive, m)?)?;
    m.add_function(wrap_pyfunction!(keep_alive::keep_alive_async, m)?)?;
    m.add_function(wrap_pyfunction!(doctor::doctor, m)?)?;
    results::add_to(m)?;
    m.add_function(wrap_pyfunction!(write_once::write_once, m)?)?;
    m.add_function(wrap_pyfunction!(write_once::write_once_async, m)?)?;
    m.add_function(wrap_pyfunction!(exit::close_async, m)?)?;
    m.add_function(wrap_pyfunction!(exit::sweep, m)?)?;
    m.add_function(wrap_pyfunction!(exit::close_python_calls, m)?)?;
    m.add_function(wrap_pyfunction!(exit::drain, m)?)?;
    m.add_function(wrap_pyfunction!(exit::release_all, m)?)?;
    m.add_function(wrap_pyfunction!(args::check_timeout, m)?)?;
    uri::add_to(m)?;
    m.add_function(wrap_pyfunction!(args::after_fork_in_child, m)?)?;
    m.add_function(wrap_pyfunction!(logs::logging_changed, m)?)?;
    m.add_function(wrap_pyfunction!(metrics::stats, m)?)?;
    m.add_function(wrap_pyfunction!(options::option_definitions, m)?)?;
    m.add("KEEP_ALIVE_OPTIONS", keep_alive::KEEP_ALIVE_TAKES.to_vec())?;
    Ok(())
}
