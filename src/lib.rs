//! blob-lock: a lease lock on blob stores for orchestrators and their remotes.
//!
//! The lock core (every module but `python`) knows nothing of Python: it can be tested,
//! simulated and reused from Rust. See `PROTOCOL` in the README for the guarantees.
#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod claim;
pub mod cleanup;
pub mod clock;
pub mod doctor;
pub mod errors;
pub mod inspect;
pub mod lease;
pub mod lockfile;
mod per_process;
pub mod protocol;
pub mod race;
pub mod released;
pub mod runtime;
mod starter;
pub mod store;

pub mod timing;

#[cfg(feature = "python")]
mod python;

pub use errors::{Error, Result, StoreErrorKind};
pub use inspect::{Inspection, LockState};
pub use lease::{keep_alive, keep_alive_on, new_owner_id, Lease, Lock, LockOptions};
pub use lockfile::LockFile;
pub use protocol::{Broken, Protocol, ReleaseStatus};
pub use timing::Timing;
