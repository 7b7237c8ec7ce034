//! Where lockfiles live. The protocol sees one lockfile through [`LockStore`]: read it with its
//! version, create it if absent, update it if its version still matches, or overwrite it.
//!
//! The rooms, in the order a request meets them: [`config`] (the URI, the table of schemes,
//! the options, credentials and environment given), [`open()`] (from those to a store),
//! `cloud/` (each cloud's client in a folder of its own, behind the `cloud` feature),
//! [`object`] (a lockfile in an object_store store), [`request`] (what happens to each of
//! its requests: the gate, what an answer means) and [`load`] (what the store can take,
//! renewals first, new acquisitions refused while it is saturated), our own local file
//! store ([`mod@file`], which adds the update-if-match that object_store's local store
//! lacks), and the questions asked of a store as a whole: [`probe`] (does it honour
//! conditional writes?) and [`listing`] (which locks lie under a prefix?).

#[cfg(feature = "cloud")]
pub(crate) mod cloud;
pub mod config;
pub mod file;
pub mod listing;
pub mod load;
pub mod lock_store;
pub mod object;
mod open;
pub mod probe;
pub mod request;

#[cfg(feature = "cloud")]
pub use config::credentials::{ChainNote, Credentials, Fetch, Fetched};
pub use config::{names_a_fixed_place, Access, Cloud, Environment, Location, StoreKind};
pub use listing::{as_prefix_error, Listing};
pub use lock_store::{LockStore, Snapshot, Version, Write};
pub use open::{open, open_object, Private};
pub use request::{Counted, Requests};
