//! blob-lock: a lease lock on blob stores for orchestrators and their remotes.
//!
//! The lock core (every module but the Python bindings) knows nothing of Python: it can be
//! tested, simulated and reused from Rust. ARCHITECTURE.md is the map of the code, and the
//! Guarantees page (docs/guarantees.md) the contract.
//!
//! The API, re-exported here: a [`Lock`] (a URI and an owner id: [`Lock::acquire`],
//! [`Lock::try_acquire`], [`Lock::inspect`], [`Lock::wait_free`], [`Lock::break_lock`])
//! made with [`LockOptions`] and its [`Timing`]; a held [`Lease`], renewed in the background
//! until [`Lease::release`]; [`keep_alive`] for a remote that renews its orchestrator's
//! lease; the [`Inspection`] of a lock from outside; [`write_once()`] to publish a result that
//! a late writer cannot overwrite; one [`Error`]. Below them [`store`] (the
//! [`store::LockStore`] trait and [`store::open`]), [`protocol`] (the single steps),
//! [`clock`] and [`runtime`] are public for tests, simulations and stores of your own.
//! Before a Rust program exits it should call [`owed::drain`] (releases left running in
//! the background) and [`store::file::sweeper::flush`] (replaced lockfiles not yet removed).
#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod clock;
pub mod doctor;
pub mod errors;
pub mod inspect;
pub mod inventory;
pub mod lease;
pub mod lockfile;
pub mod metrics;
pub mod mutation;
mod nearest;
pub mod owed;
mod per_process;
pub mod protocol;
pub mod race;
pub mod runtime;
pub mod semaphore;
pub mod store;
mod thread_signals;

pub mod timing;
pub mod write_once;

#[cfg(feature = "python")]
mod python;

pub use errors::{Error, LossCause, Result, StoreErrorKind};
pub use inspect::{Inspection, LockState};
pub use lease::{keep_alive, keep_alive_on, new_owner_id, Lease, Lock, LockOptions};
pub use lockfile::LockFile;
pub use protocol::{Broken, Protocol, ReleaseStatus};
pub use semaphore::{Permit, Semaphore};
pub use timing::{Timing, TimingSpec};
pub use write_once::write_once;
