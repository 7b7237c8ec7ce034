//! The guesses that save requests before the cas safety path ([`super::take`]) reads:
//! the receipt of this process's own last release (an update conditional on the version it
//! wrote, one request), and create-first while new locks are likely (see
//! [`crate::protocol::released`]). A guess that is wrong costs a refused conditional write,
//! never safety: what the guesses write is conditional as every cas write is, and after a
//! refusal the safety path decides from what it reads. What that read shows is learnt back
//! ([`Learning::learn`]).

use super::create;
use crate::errors::Result;
use crate::lockfile::LockFile;
use crate::mutation::{active, reached, Branch, Mutation};
use crate::protocol::acquisition::{Acquisition, Attempt};
use crate::protocol::engine::Engine;
use crate::protocol::released::Guess;
use crate::store::Write;
use bytes::Bytes;
use std::sync::Arc;

/// What the guesses came to.
pub(super) enum Guessed {
    /// One acquired the lock.
    Acquired(Attempt),
    /// Read first, then learn from what the read shows.
    ReadFirst(Learning),
}

/// What the guesses learn from the safety path's read.
pub(super) struct Learning {
    /// The first attempt without a receipt of our own release guesses whether the lock is
    /// new; later attempts know it exists.
    guessing: bool,
    /// A receipt compared with what is read instead of used, the last one being stale.
    unused: Option<LockFile>,
}

/// The guesses, in order: the receipt of our last release, then create-first.
pub(super) async fn try_them(
    engine: &Engine,
    owner: &Arc<str>,
    acquisition: &mut Acquisition,
) -> Result<Guessed> {
    let mut guessing = acquisition.begin();
    let mut unused = None;
    let receipt = engine.last_release.take();
    reached(if receipt.is_some() {
        Branch::ReceiptTaken
    } else {
        Branch::NoReceipt
    });
    if let Some((released, version)) = receipt.filter(|(lf, _)| lf.is_released()) {
        guessing = false;
        if engine.last_release.likely(Guess::Stale) {
            reached(Branch::ReceiptCompared);
            unused = Some(released);
        } else {
            let token = if active(Mutation::ReceiptTokenReused) {
                released.token
            } else {
                engine.next_token(Some(&released))
            };
            engine.reserve().await?;
            let body = engine.body(owner, token);
            let start = engine.clock.now();
            acquisition.note(token, start);
            let bytes = Bytes::from(body.encode());
            let written = if active(Mutation::ReceiptUnconditional) {
                Write::Done(engine.overwrite_lockfile(bytes).await?)
            } else {
                engine.update_lockfile(bytes, &version).await?
            };
            if let Write::Done(version) = written {
                reached(Branch::ReceiptCurrent);
                return Ok(Guessed::Acquired(Attempt::Acquired(
                    engine.our_write(owner, body, version, start),
                )));
            }
            // Someone wrote since our release: the safety path finds out who.
            reached(Branch::ReceiptRefused);
            engine.last_release.found(Guess::Stale, true);
        }
    }
    if guessing && engine.last_release.likely(Guess::New) {
        // Create first: a new lock then costs create and release, two requests.
        guessing = false;
        if let Some(acquired) = create(engine, owner, acquisition, true).await? {
            reached(Branch::CreateFirstWon);
            return Ok(Guessed::Acquired(acquired));
        }
        reached(Branch::CreateFirstRefused);
        engine.last_release.found(Guess::New, false);
    }
    // Read first: a lock released elsewhere then costs read, update (not a refused
    // create on top), and a new one read, create; three requests with the release.
    Ok(Guessed::ReadFirst(Learning { guessing, unused }))
}

impl Learning {
    /// What the read (`current`, the lockfile or none) says of the guesses.
    pub(super) fn learn(self, engine: &Engine, current: Option<&LockFile>) {
        if self.guessing {
            reached(if current.is_none() {
                Branch::ReadFirstAbsent
            } else {
                Branch::ReadFirstPresent
            });
            engine.last_release.found(Guess::New, current.is_none());
        }
        if let Some(receipt) = self.unused {
            // By content, not version: a store may name one object's version differently
            // in a write's answer and a read's.
            let stale = current != Some(&receipt);
            reached(if stale {
                Branch::ComparedStale
            } else {
                Branch::ComparedCurrent
            });
            engine.last_release.found(Guess::Stale, stale);
        }
    }
}
