//! Compare-and-swap: every write is conditional (create-if-absent, update-if-match), so two
//! owners can never both think they wrote last. Real mutual exclusion, on stores that honour
//! the conditions (see `store::probe`).

use super::engine::{Acquisition, Attempt, Engine, Held};
use crate::errors::{Error, Result};
use crate::lockfile::LockFile;
use crate::store::{Version, Write};
use bytes::Bytes;

impl Engine {
    pub(super) async fn attempt_cas(
        &self,
        owner: &str,
        acquisition: &mut Acquisition,
    ) -> Result<Attempt> {
        if let Some((released, version)) =
            self.last_release.take().filter(|(lf, _)| lf.is_released())
        {
            let token = released.token + 1;
            let body = self.body(owner, token);
            let start = self.clock.now();
            acquisition.note(token, start);
            let bytes = Bytes::from(body.encode());
            if let Write::Done(version) = self.update_lockfile(bytes, &version).await? {
                return Ok(Attempt::Acquired(self.held(owner, body, version, start)));
            }
            // Someone wrote since our release: the full attempt below finds out who.
        }
        // Read first: a lock released elsewhere then costs read, update (not a refused
        // create on top), and a new one read, create; three requests with the release.
        let (lf, snap) = match self.read().await? {
            Some(found) => found,
            None => {
                let body = self.body(owner, 1);
                let start = self.clock.now();
                acquisition.note(1, start);
                if let Write::Done(version) =
                    self.create_lockfile(Bytes::from(body.encode())).await?
                {
                    return Ok(Attempt::Acquired(self.held(owner, body, version, start)));
                }
                match self.read().await? {
                    Some(found) => found,
                    // Created and gone again between our requests: try again at once.
                    None => {
                        return Ok(Attempt::Busy {
                            holder: None,
                            expires_in: None,
                        })
                    }
                }
            }
        };
        if let Some(start) = acquisition.settles(owner, &lf) {
            // A write of ours landed though it came back as an error or a conflict.
            return self.confirm(owner, lf, snap.version, start).await;
        }
        if let Some(busy) = self.judge(&lf, &snap, self.clock.now(), acquisition) {
            return Ok(busy);
        }
        let token = if crate::mutation::active(crate::mutation::Mutation::TokenNotIncremented) {
            lf.token
        } else {
            lf.token + 1
        };
        let body = self.body(owner, token);
        let start = self.clock.now();
        acquisition.note(token, start);
        match self
            .update_lockfile(Bytes::from(body.encode()), &snap.version)
            .await?
        {
            Write::Done(version) => Ok(Attempt::Acquired(self.held(owner, body, version, start))),
            Write::Conflict
                if crate::mutation::active(crate::mutation::Mutation::ConflictAsSuccess) =>
            {
                Ok(Attempt::Acquired(self.held(
                    owner,
                    body,
                    snap.version,
                    start,
                )))
            }
            Write::Conflict => {
                acquisition.watch = None;
                match self.read().await? {
                    Some((now, snap)) => match acquisition.settles(owner, &now) {
                        Some(start) => self.confirm(owner, now, snap.version, start).await,
                        None => Ok(Attempt::Busy {
                            holder: Some(now),
                            expires_in: None,
                        }),
                    },
                    None => Ok(Attempt::Busy {
                        holder: None,
                        expires_in: None,
                    }),
                }
            }
        }
    }

    /// A write of ours whose outcome we did not know, which a read shows landed: it counts
    /// only once a renewal conditional on that version lands too. The read may be stale (an
    /// eventually consistent store) and show a write that an earlier acquisition by this
    /// owner made with the same token and has released since; a conditional write cannot be
    /// fooled so.
    async fn confirm(
        &self,
        owner: &str,
        lf: LockFile,
        version: Version,
        start: tokio::time::Instant,
    ) -> Result<Attempt> {
        let mut held = self.held(owner, lf, version, start);
        match self.renew_cas(&mut held, None).await {
            Ok(()) => Ok(Attempt::Acquired(held)),
            Err(Error::Lost { .. }) => Ok(Attempt::Busy {
                holder: None,
                expires_in: None,
            }),
            Err(e) => Err(e),
        }
    }

    /// One renewal: an update conditional on the version we hold.
    pub(super) async fn renew_cas(&self, held: &mut Held, writer_name: Option<&str>) -> Result<()> {
        // A co-owner (the remote, or the orchestrator) renewing between our read and
        // our write shows up as a conflict: adopt its version and write again.
        for _ in 0..8 {
            let start = self.clock.now();
            let body = held.next_body(writer_name, start, self.clock.wall());
            match self
                .update_lockfile(Bytes::from(body.encode()), &held.version)
                .await?
            {
                Write::Done(version) => {
                    held.version.clone_from(&version);
                    held.body.clone_from(&body);
                    held.lease_start = start;
                    return Ok(());
                }
                Write::Conflict => match self.read().await? {
                    Some((lf, snap)) if Self::still_ours(held, &lf) => {
                        let landed = lf == body;
                        Self::adopt_body(held, lf, snap.version);
                        if landed {
                            // Our own write, retried by the client: it counts.
                            held.lease_start = start;
                            return Ok(());
                        }
                    }
                    other => {
                        return Err(super::engine::lost(
                            self.uri(),
                            Self::why_not_ours(held, other.as_ref().map(|(lf, _)| lf)),
                        ))
                    }
                },
            }
        }
        Err(Error::Store {
            uri: self.uri().to_string(),
            message: "the lockfile kept changing under our renewal".into(),
            kind: crate::errors::StoreErrorKind::Transient,
        })
    }
}
