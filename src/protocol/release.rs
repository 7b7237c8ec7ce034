//! The writes that end a hold: a holder's own release, and a person's `break`. Neither
//! deletes the lockfile: it is marked released and keeps its token, so the next acquisition
//! gets a larger one (fencing). A release that finds a later acquisition (a larger token,
//! or another owner) answers at once that the lock was not ours any more.

use super::acquisition::OurWrite;
use super::engine::Engine;
use crate::errors::{Error, Result};
use crate::lockfile::LockFile;
use crate::store::{Version, Write};
use bytes::Bytes;

/// What a release found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseStatus {
    /// We held it and now it is released.
    Released,
    /// There is no lockfile.
    NoLockfile,
    /// Another acquisition holds it, or held it after ours and released it since (as the
    /// lockfile describes it, with its token): the lock was taken from us; nothing was
    /// written.
    HeldByOther(String, u64),
    /// It was already released: our own acquisition, by someone else's `break` (or, for a
    /// release without a lease in hand, whoever held it last); nothing was written.
    AlreadyReleased,
}

impl ReleaseStatus {
    /// The status's name, as the Python API returns it.
    pub fn as_str(&self) -> &'static str {
        match self {
            ReleaseStatus::Released => "released",
            ReleaseStatus::NoLockfile => "no_lockfile",
            ReleaseStatus::HeldByOther(..) => "held_by_other",
            ReleaseStatus::AlreadyReleased => "already_released",
        }
    }
}

/// Writes a release or a break tries before giving up on a lockfile that keeps changing.
const TRIES: usize = 8;

/// Reads a release makes again, a poll apart, when the store shows less than the holder
/// wrote (no lockfile, or a lower token): a store that has not caught up shows that for a
/// moment; a lockfile deleted by hand shows it for good.
const STALE_READS: usize = 2;

/// What a release found, for the caller that resolves a release retried.
#[derive(Debug)]
pub(crate) struct Seen {
    pub(crate) status: ReleaseStatus,
    /// The lockfile, when the release did not write it now.
    pub(crate) found: Option<LockFile>,
    /// A write of this release was refused after it had been sent more than once: an
    /// earlier send may have landed, and `found` be what others wrote after it.
    pub(crate) maybe_landed: bool,
}

/// What [`Engine::break_lock`] did.
#[derive(Debug, Clone)]
pub enum Broken {
    /// There is no lockfile; nothing was written.
    NoLockfile,
    /// The lock was already released; nothing was written.
    AlreadyReleased(LockFile),
    /// The lockfile is not the acquisition the caller meant to break (another owner or
    /// token holds it now); nothing was written.
    Changed(LockFile),
    /// This acquisition was marked released. Its holder learns at its next heartbeat that the
    /// lock was lost.
    Broken(LockFile),
}

impl Engine {
    /// Releases the lock of `owner`. With `ours`, only that acquisition is released; without,
    /// whatever acquisition the lockfile shows for `owner`.
    pub async fn release(&self, owner: &str, ours: Option<&OurWrite>) -> Result<ReleaseStatus> {
        Ok(self.release_seeing(owner, ours).await?.status)
    }

    /// [`Engine::release`], with the lockfile found when it was not released now.
    pub(crate) async fn release_seeing(
        &self,
        owner: &str,
        ours: Option<&OurWrite>,
    ) -> Result<Seen> {
        // cas starts from the version we hold (its write is conditional on it); lww reads
        // first, as its renewals do, and writes only over a lockfile that is still ours.
        let steps = self.protocol.steps();
        let mut known: Option<(LockFile, Version)> = ours
            .filter(|_| steps.conditional())
            .map(|h| (h.body.clone(), h.version.clone()));
        let token = ours.map(|h| h.token());
        let mut maybe_landed = false;
        let mut stale_reads = 0;
        let (status, found) = 'seen: {
            for attempt in 0..TRIES {
                // Read again only while tries are left: the last read is believed.
                let may_reread = attempt + 1 < TRIES && stale_reads < STALE_READS;
                let (lf, version) = match known.take() {
                    Some(k) => k,
                    None => match self.read().await? {
                        // What we hold is there, unless the store has not caught up: read
                        // again after a pause.
                        None if token.is_some() && may_reread => {
                            stale_reads += 1;
                            self.clock.sleep(self.timing.poll_min).await;
                            continue;
                        }
                        None => break 'seen (ReleaseStatus::NoLockfile, None),
                        Some((lf, snap)) => (lf, snap.version),
                    },
                };
                // A token below ours is a read the store has not caught up on too (tokens
                // only grow, across a delete too: crate::lockfile::token): older than our
                // own acquisition's write, it says nothing of what happened since. Read
                // again; if the store still shows only that, the outcome is unknown (a
                // transient error, retried within the release's time), never a loss. Unless
                // it was written too long after our acquisition to be older than it: then
                // the lockfile was made again below our token (by an older version of
                // blob-lock, or deleted sooner than tokens allow), and another owner has it.
                if let Some(t) = token.filter(|&t| lf.token != 0 && lf.token < t) {
                    if ours.is_some_and(|ours| self.written_after(&lf, ours)) {
                        break 'seen (
                            ReleaseStatus::HeldByOther(lf.describe(), lf.token),
                            Some(lf),
                        );
                    }
                    if may_reread {
                        stale_reads += 1;
                        self.clock.sleep(self.timing.poll_min).await;
                        continue;
                    }
                    return Err(Error::Store {
                        uri: self.uri().to_string(),
                        message: format!(
                            "the store still shows an acquisition older than ours (token {} before our {t}): a read that has not caught up, which says nothing of our release",
                            lf.token
                        ),
                        kind: crate::errors::StoreErrorKind::Transient,
                    });
                }
                // A later acquisition than ours (another owner, or another token of ours):
                // the lock was taken from us, whether or not it was released since.
                let later = *lf.writer_id != *owner
                    || token.is_some_and(|t| t != lf.token && lf.token != 0);
                if later && (token.is_some() || !lf.is_released()) {
                    let mut who = lf.describe();
                    if lf.is_released() {
                        who.push_str(", released since");
                    }
                    break 'seen (ReleaseStatus::HeldByOther(who, lf.token), Some(lf));
                }
                // Released, by us or by someone else (a `break`): nobody holds it now.
                if lf.is_released() {
                    break 'seen (ReleaseStatus::AlreadyReleased, Some(lf));
                }
                let mut lf = lf;
                if let Some(t) = token {
                    lf.token = t; // a co-owner may have dropped it (mops); the next token follows ours
                }
                let body = lf.released(self.clock.wall());
                match steps
                    .write_over(self, Bytes::from(body.encode()), &version)
                    .await?
                {
                    Write::Done(version) => {
                        // Only a conditional write proves what the lockfile held after it.
                        if steps.conditional() {
                            crate::mutation::reached(crate::mutation::Branch::ReceiptSet);
                            self.last_release.set(body, version);
                        }
                        break 'seen (ReleaseStatus::Released, None);
                    }
                    Write::Conflict { resent } => {
                        // Resolve by reading: a co-owner's renewal (write again over it), our
                        // own resent release that landed, or a takeover.
                        maybe_landed |= resent;
                        if let Some((now, _)) = self.read().await? {
                            if now == body {
                                break 'seen (ReleaseStatus::Released, None);
                            }
                        }
                    }
                }
            }
            return Err(Error::Store {
                uri: self.uri().to_string(),
                message: "the lockfile kept changing under our release".into(),
                kind: crate::errors::StoreErrorKind::Transient,
            });
        };
        Ok(Seen {
            status,
            found,
            maybe_landed,
        })
    }

    /// Whether `lf` was written after `ours` acquired the lock by more than the clock skew
    /// allowance (each by its writer's wall clock): never, with the allowance off.
    fn written_after(&self, lf: &LockFile, ours: &OurWrite) -> bool {
        let acquired = crate::lockfile::parse_time(&ours.body.first_acquired_at);
        match (self.timing.skew, lf.last_write_time(), acquired) {
            (Some(skew), Some(theirs), Some(acquired)) => {
                chrono::Duration::from_std(skew).is_ok_and(|skew| theirs > acquired + skew)
            }
            _ => false,
        }
    }

    /// Marks the lock released whoever holds it, as its holder's own release would (the token is
    /// kept, so the next acquisition gets a larger one). With `expect` (an owner id and a token),
    /// breaks only that acquisition: a lock that changed hands since the caller looked is left
    /// alone. With `cas`, the write is conditional on the version read.
    pub async fn break_lock(&self, expect: Option<(&str, u64)>) -> Result<Broken> {
        // What we broke and the body we wrote, after a write refused: it may have landed.
        let mut written: Option<(LockFile, LockFile)> = None;
        for _ in 0..TRIES {
            let Some((lf, snap)) = self.read().await? else {
                return Ok(Broken::NoLockfile);
            };
            if let Some((broken, _)) = written.take().filter(|(_, body)| *body == lf) {
                return Ok(Broken::Broken(broken)); // our resent write had landed
            }
            if expect.is_some_and(|(owner, token)| *lf.writer_id != *owner || lf.token != token) {
                return Ok(Broken::Changed(lf));
            }
            if lf.is_released() {
                return Ok(Broken::AlreadyReleased(lf));
            }
            let mut body = lf.released(self.clock.wall());
            body.broken_by = Some(crate::lockfile::this_process().into());
            let bytes = Bytes::from(body.encode());
            written = Some((lf.clone(), body));
            match self
                .protocol
                .steps()
                .write_over(self, bytes, &snap.version)
                .await?
            {
                Write::Done(_) => return Ok(Broken::Broken(lf)),
                // A renewal got in first (same acquisition: break the new version), or our own
                // resent write landed (the next read shows it).
                Write::Conflict { .. } => continue,
            }
        }
        Err(Error::Store {
            uri: self.lock_uri(),
            message: "the lockfile kept changing while we tried to break the lock".into(),
            kind: crate::errors::StoreErrorKind::Transient,
        })
    }

    /// The lock's URI (the store names the lockfile inside it).
    pub(crate) fn lock_uri(&self) -> String {
        let uri = self.uri();
        uri.strip_suffix(&format!("/{}", crate::lockfile::LOCKFILE_NAME))
            .unwrap_or(uri)
            .to_string()
    }
}
