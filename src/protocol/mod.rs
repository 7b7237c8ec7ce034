//! The two lock protocols, as single steps over a [`LockStore`]: one acquisition attempt, one
//! renewal, one release. The loops around them (waiting, heartbeating) live in `lease`. Every
//! write of a lockfile is made here: [`engine`] holds what both protocols share, `cas` and
//! `lww` the steps that differ, [`release`] the writes that end a hold (release, break).
//!
//! Invariants, kept here and nowhere else:
//! - A waiter takes over a held lock only after it has seen the *same version* of the
//!   lockfile for the holder's `expire_s` on its own monotonic clock, counted from the first
//!   sighting of that version by any acquisition in its process ([`crate::protocol::watched`]) (or,
//!   beyond the skew allowance, by wall clock). A holder's lease runs from the *start* of its last successful
//!   write to `start + expire - margin`, which is earlier than any waiter's takeover.
//! - A write whose outcome is unknown (a conflict that may be our own retried request) is
//!   resolved by reading the lockfile and comparing owner and token, never by guessing; under
//!   cas a renewal conditional on what the read showed must land too (a stale read can show
//!   an earlier acquisition's write by the same owner).
//! - A release never deletes the lockfile, so the fencing token keeps growing.
//!
//! A protocol is what differs between cas and lww, its `Steps`: an acquisition attempt, a
//! renewal, and how a write that ends a hold goes over the lockfile. Everything else (reading,
//! judging a holder, the bodies written, releasing, breaking) is the engine's, shared. A new
//! protocol is a variant of [`Protocol`], a file beside `lww.rs` implementing `Steps`, and
//! its arm in `Protocol::steps`, the one dispatch.

mod acquisition;
mod cas;
pub mod engine;
mod lww;
pub mod release;
pub mod released;
pub mod watched;

pub use acquisition::{Acquisition, Attempt, Left, OurWrite};
pub use engine::{Engine, Fence, REMOTE};
pub use release::{Broken, ReleaseStatus};

use crate::errors::Result;
use crate::store::{LockStore, Version, Write};
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Arc;

/// The steps in which the protocols differ, over the engine's shared reads and writes.
#[async_trait]
pub(crate) trait Steps: Send + Sync {
    /// Whether every write is conditional on the version it replaces (cas), so that a write
    /// that lands proves the lockfile was still what we had; else (lww) writes are blind and
    /// must be preceded by a read.
    fn conditional(&self) -> bool;
    /// One acquisition attempt for `owner` (see [`Engine::attempt`]).
    async fn attempt(
        &self,
        engine: &Engine,
        owner: &Arc<str>,
        acquisition: &mut Acquisition,
    ) -> Result<Attempt>;
    /// One renewal of `ours` (see [`Engine::renew`]).
    async fn renew(
        &self,
        engine: &Engine,
        ours: &mut OurWrite,
        writer_name: Option<&str>,
    ) -> Result<()>;
    /// Writes `body` (a release or a break) over the lockfile read at `version`.
    async fn write_over(&self, engine: &Engine, body: Bytes, version: &Version) -> Result<Write>;
}

/// The two protocols. Written into the lockfile so that a person (or `inspect`) can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// Conditional writes: create-if-absent and update-if-match. Real mutual exclusion.
    Cas,
    /// Last writer wins after a settle wait. Best effort, for stores without conditional writes.
    Lww,
}

impl Protocol {
    /// The name used in the lockfile and in the Python API.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Cas => "cas",
            Protocol::Lww => "lww",
        }
    }

    /// Its steps: the one place a protocol is matched to its code.
    pub(crate) fn steps(self) -> &'static dyn Steps {
        match self {
            Protocol::Cas => &cas::Cas,
            Protocol::Lww => &lww::Lww,
        }
    }

    /// The protocol a lock on `store` runs when `requested` (`None`: auto): `cas` where the
    /// store honours conditional writes, else `lww` (auto) or `Error::UnsafeStore` (`cas`).
    /// Asking for `lww` costs no request; otherwise a store over HTTP may be probed (once
    /// per process and store).
    pub async fn for_store(store: &dyn LockStore, requested: Option<Protocol>) -> Result<Protocol> {
        if requested == Some(Protocol::Lww) {
            return Ok(Protocol::Lww);
        }
        let honoured = store
            .conditional_writes(requested == Some(Protocol::Cas))
            .await?;
        Ok(if honoured {
            Protocol::Cas
        } else {
            Protocol::Lww
        })
    }

    /// What [`Protocol::for_store`] answers, if that is known without a request.
    pub fn known_for(store: &dyn LockStore, requested: Option<Protocol>) -> Option<Protocol> {
        if requested.is_some() {
            return requested;
        }
        let honoured = store.known_conditional_writes()?;
        Some(if honoured {
            Protocol::Cas
        } else {
            Protocol::Lww
        })
    }
}
