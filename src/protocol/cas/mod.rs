//! Compare-and-swap: every write is conditional (create-if-absent, update-if-match), so two
//! owners can never both think they wrote last. Real mutual exclusion, on stores that honour
//! the conditions (see `store::probe`).

mod guesses;

use super::acquisition::{Acquisition, Attempt, OurWrite};
use super::engine::Engine;
use super::Steps;
use crate::errors::{Error, Result};
use crate::lockfile::LockFile;
use crate::mutation::{active, reached, Branch, Mutation};
use crate::store::{Snapshot, Version, Write};
use async_trait::async_trait;
use bytes::Bytes;
use guesses::Guessed;
use std::sync::Arc;

/// The cas protocol's steps.
pub(super) struct Cas;

#[async_trait]
impl Steps for Cas {
    fn conditional(&self) -> bool {
        true
    }

    /// The request-saving guesses first ([`guesses`]); then, unless one acquired the lock,
    /// the read and the safety path ([`take`]), which alone decides from what it reads.
    async fn attempt(
        &self,
        engine: &Engine,
        owner: &Arc<str>,
        acquisition: &mut Acquisition,
    ) -> Result<Attempt> {
        let learning = match guesses::try_them(engine, owner, acquisition).await? {
            Guessed::Acquired(acquired) => return Ok(acquired),
            Guessed::ReadFirst(learning) => learning,
        };
        let read = engine.read().await?;
        learning.learn(engine, read.as_ref().map(|(lf, _)| lf));
        take(engine, owner, acquisition, read).await
    }

    async fn renew(
        &self,
        engine: &Engine,
        ours: &mut OurWrite,
        writer_name: Option<&str>,
    ) -> Result<()> {
        renew(engine, ours, writer_name).await
    }

    /// Conditional on the version read: a conflict means someone wrote since.
    async fn write_over(&self, engine: &Engine, body: Bytes, version: &Version) -> Result<Write> {
        engine.update_lockfile(body, version).await
    }
}

/// The safety path, from a read of the lockfile (`read`): no lockfile, create it;
/// a write of ours that landed unknown to us, confirm it by a conditional renewal; held and
/// not expired by our own clock ([`Engine::judge`]), busy; else update it, conditional on
/// the version read, with the next token. Every write is conditional, so whatever the
/// timing only one contender's lands; a refused one is resolved by reading.
async fn take(
    engine: &Engine,
    owner: &Arc<str>,
    acquisition: &mut Acquisition,
    read: Option<(LockFile, Snapshot)>,
) -> Result<Attempt> {
    let (lf, snap) = match read {
        Some(found) => found,
        None => {
            if let Some(acquired) = create(engine, owner, acquisition, false).await? {
                reached(Branch::AbsentCreated);
                return Ok(acquired);
            }
            match engine.read().await? {
                Some(found) => {
                    reached(Branch::AbsentCreateRefused);
                    found
                }
                // Created and gone again between our requests: try again at once.
                None => {
                    reached(Branch::AbsentGone);
                    return Ok(Attempt::Busy {
                        holder: None,
                        expires_in: None,
                    });
                }
            }
        }
    };
    if let Some(start) = acquisition.resolves(owner, &lf) {
        // A write of ours landed though it came back as an error or a conflict.
        reached(Branch::ResolvedByRead);
        return confirm(engine, owner, lf, snap.version, start, acquisition).await;
    }
    if let Some(busy) = engine.judge(&lf, &snap, engine.clock.now(), acquisition) {
        reached(Branch::Busy);
        return Ok(busy);
    }
    let token = if active(Mutation::TokenNotIncremented) {
        lf.token
    } else {
        engine.next_token(Some(&lf))
    };
    engine.reserve().await?;
    let body = engine.body(owner, token);
    let start = engine.clock.now();
    acquisition.note(token, start);
    match engine
        .update_lockfile(Bytes::from(body.encode()), &snap.version)
        .await?
    {
        Write::Done(version) => {
            reached(Branch::UpdateWon);
            Ok(Attempt::Acquired(
                engine.our_write(owner, body, version, start),
            ))
        }
        Write::Conflict { .. } if active(Mutation::ConflictAsSuccess) => Ok(Attempt::Acquired(
            engine.our_write(owner, body, snap.version, start),
        )),
        Write::Conflict { .. } => {
            acquisition.watch = None;
            match engine.read().await? {
                Some((now, snap)) => match acquisition.resolves(owner, &now) {
                    Some(start) => {
                        reached(Branch::UpdateRefusedOurs);
                        confirm(engine, owner, now, snap.version, start, acquisition).await
                    }
                    None => {
                        reached(Branch::UpdateRefusedHeld);
                        Ok(Attempt::Busy {
                            holder: Some(now),
                            expires_in: None,
                        })
                    }
                },
                None => {
                    reached(Branch::UpdateRefusedGone);
                    Ok(Attempt::Busy {
                        holder: None,
                        expires_in: None,
                    })
                }
            }
        }
    }
}

/// A write of ours whose outcome we did not know, which a read shows landed: it counts
/// only once a renewal conditional on that version lands too. The read may be stale (an
/// eventually consistent store) and show a write that an earlier acquisition by this
/// owner made with the same token and has released since; a conditional write cannot be
/// fooled so. Its token is raised to the floor first, and noted (`Engine::raise_to_confirm`).
async fn confirm(
    engine: &Engine,
    owner: &str,
    lf: LockFile,
    version: Version,
    start: tokio::time::Instant,
    acquisition: &mut Acquisition,
) -> Result<Attempt> {
    let mut ours = engine.our_write(owner, lf, version, start);
    engine.raise_to_confirm(&mut ours, acquisition);
    match renew(engine, &mut ours, None).await {
        Ok(()) => {
            reached(Branch::ConfirmHeld);
            Ok(Attempt::Acquired(ours))
        }
        Err(Error::Lost { .. }) => {
            reached(Branch::ConfirmNotOurs);
            Ok(Attempt::Busy {
                holder: None,
                expires_in: None,
            })
        }
        Err(e) => Err(e),
    }
}

/// One renewal: an update conditional on the version we hold.
async fn renew(engine: &Engine, ours: &mut OurWrite, writer_name: Option<&str>) -> Result<()> {
    // A co-owner (the remote, or the orchestrator) renewing between our read and
    // our write shows up as a conflict: adopt its version and write again.
    for _ in 0..8 {
        engine.reserve().await?;
        let start = engine.clock.now();
        let body = ours.next_body(writer_name, start, engine.clock.wall());
        match engine
            .update_lockfile(Bytes::from(body.encode()), &ours.version)
            .await?
        {
            Write::Done(version) => {
                reached(Branch::RenewLanded);
                ours.version.clone_from(&version);
                ours.body.clone_from(&body);
                ours.lease_start = start;
                return Ok(());
            }
            Write::Conflict { .. } => match engine.read().await? {
                Some((lf, snap)) if Engine::still_ours(ours, &lf) => {
                    let landed = lf == body;
                    Engine::adopt_body(ours, lf, snap.version);
                    if landed {
                        // Our own write, retried by the client: it counts.
                        reached(Branch::RenewOwnRetried);
                        ours.lease_start = start;
                        return Ok(());
                    }
                    reached(Branch::RenewCoOwnerAdopted);
                }
                other => {
                    reached(Branch::RenewLost);
                    return Err(engine.not_ours(ours, other.as_ref().map(|(lf, _)| lf)));
                }
            },
        }
    }
    Err(Error::Store {
        uri: engine.uri().to_string(),
        message: "the lockfile kept changing under our renewal".into(),
        kind: crate::errors::StoreErrorKind::Transient,
    })
}

/// Creates the lockfile with a fresh lockfile's first token: the acquisition, or `None`
/// when one is there. `first`: created before any read (the guess that the lock is new).
pub(super) async fn create(
    engine: &Engine,
    owner: &Arc<str>,
    acquisition: &mut Acquisition,
    first: bool,
) -> Result<Option<Attempt>> {
    engine.reserve().await?;
    let token = engine.next_token(None);
    let body = engine.body(owner, token);
    let start = engine.clock.now();
    acquisition.note(token, start);
    let bytes = Bytes::from(body.encode());
    if first && active(Mutation::CreateFirstOverwrites) {
        let version = engine.overwrite_lockfile(bytes).await?;
        return Ok(Some(Attempt::Acquired(
            engine.our_write(owner, body, version, start),
        )));
    }
    Ok(match engine.create_lockfile(bytes).await? {
        Write::Done(version) => Some(Attempt::Acquired(
            engine.our_write(owner, body, version, start),
        )),
        Write::Conflict { .. } => None,
    })
}
