//! The two lock protocols, as single steps over a [`LockStore`]: one acquisition attempt, one
//! renewal, one release. The loops around them (waiting, heartbeating) live in `lease`.
//!
//! Invariants, kept here and nowhere else:
//! - A waiter takes over a held lock only after it has seen the *same version* of the
//!   lockfile for the holder's `expire_s` on its own monotonic clock (or, beyond the skew
//!   allowance, by wall clock). A holder's lease runs from the *start* of its last successful
//!   write to `start + expire - margin`, which is earlier than any waiter's takeover.
//! - A write whose outcome is unknown (a conflict that may be our own retried request) is
//!   settled by reading the lockfile and comparing owner and token, never by guessing.
//! - A release never deletes the lockfile, so the fencing token keeps growing.

use crate::clock::Clock;
use crate::errors::{Error, Result};
use crate::lockfile::{LockFile, Protocol};
use crate::released::Record;
use crate::store::{LockStore, Snapshot, Version, Write};
use crate::timing::Timing;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What a holder knows about the lock it holds.
#[derive(Debug, Clone)]
pub struct Held {
    /// The owner id.
    pub owner: String,
    /// The fencing token of this acquisition.
    pub token: u64,
    /// The version of our last write.
    pub version: Version,
    /// The body of our last write.
    pub body: LockFile,
    /// When our last successful write started: the lease runs from here.
    pub lease_start: Instant,
}

/// What one acquisition carries from attempt to attempt.
#[derive(Debug, Clone, Default)]
pub struct Pursuit {
    /// The lockfile version this waiter is watching, and since when by its clock.
    watch: Option<(Version, Instant)>,
    /// Our writes whose outcome we do not know (an error, or a conflict that may be our own
    /// retried request): the token each wrote and the earliest start of a write with it.
    /// A later read that shows our owner id with one of these tokens settles it: ours, with
    /// the lease counted from that start.
    unsettled: Vec<(u64, Instant)>,
}

impl Pursuit {
    fn note(&mut self, token: u64, start: Instant) {
        if !self.unsettled.iter().any(|(t, _)| *t == token) {
            self.unsettled.push((token, start));
        }
    }

    /// True if a write of ours may have landed without our knowing.
    pub fn wrote(&self) -> bool {
        !self.unsettled.is_empty()
    }

    fn settles(&self, owner: &str, lf: &LockFile) -> Option<Instant> {
        if lf.writer_id != owner || lf.is_released() {
            return None;
        }
        self.unsettled
            .iter()
            .find(|(t, _)| *t == lf.token)
            .map(|(_, start)| *start)
    }
}

/// The outcome of one acquisition attempt.
#[derive(Debug)]
pub enum Attempt {
    /// We hold it.
    Acquired(Held),
    /// Someone else does. `expires_in` is how long until we may take it over if nothing
    /// changes; `None` when the lockfile vanished or changed under us (poll again soon).
    Busy {
        /// The holder, as the lockfile says.
        holder: Option<LockFile>,
        /// Time left until expiry by our clock.
        expires_in: Option<Duration>,
    },
}

/// What a release found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReleaseStatus {
    /// We held it and now it is released.
    Released,
    /// There is no lockfile.
    NoLockfile,
    /// Another owner holds it (as the lockfile describes it, with its token); nothing was
    /// written.
    HeldByOther(String, u64),
    /// It was already released; nothing was written.
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

/// One protocol over one lockfile.
#[derive(Debug, Clone)]
pub struct Engine {
    /// The lockfile.
    pub store: Arc<dyn LockStore>,
    /// Which protocol.
    pub protocol: Protocol,
    /// Its timing; shared, as each lease of a lock carries the lock's engine (thousands of
    /// held locks, about 100 bytes each).
    pub timing: Arc<Timing>,
    /// Its clocks.
    pub clock: Arc<dyn Clock>,
    /// What our own last release of this lock wrote (see [`crate::released`]).
    pub hint: Record,
    /// Woken when a lock on this URI is released in this process, so that waiters here
    /// take it over at once instead of at their next poll. `None` for stores brought by
    /// tests and simulations, whose "processes" share one real process.
    pub wake: Option<Arc<tokio::sync::Notify>>,
}

fn lost(uri: &str, reason: String) -> Error {
    Error::Lost {
        uri: uri.to_string(),
        reason,
    }
}

impl Engine {
    /// The same engine running `protocol`.
    pub fn with_protocol(&self, protocol: Protocol) -> Engine {
        Engine {
            protocol,
            ..self.clone()
        }
    }

    /// The lockfile's URI.
    pub fn uri(&self) -> &str {
        self.store.uri()
    }

    /// Reads and decodes the lockfile. A lockfile we cannot decode is an error, never
    /// something to overwrite: it may be a live lock of a tool we do not understand. Under
    /// `lww` (stores whose writes may not be atomic: a reader can see half of a write in
    /// flight) it is read again until it decodes, for at most a request timeout, the
    /// longest a write can be in flight.
    pub async fn read(&self) -> Result<Option<(LockFile, Snapshot)>> {
        let mut since = None;
        loop {
            let Some(snap) = self.store.read().await? else {
                return Ok(None);
            };
            let e = match LockFile::decode(&snap.bytes) {
                Ok(lf) => return Ok(Some((lf, snap))),
                Err(e) => e,
            };
            let now = self.clock.now();
            let first = *since.get_or_insert(now);
            if self.protocol == Protocol::Lww && now - first < self.timing.request_timeout() {
                log::debug!(
                    "{}: unreadable ({e}), a write in flight? reading again",
                    self.uri()
                );
                self.clock.sleep(self.timing.poll_min).await;
                continue;
            }
            return Err(Error::InvalidLockFile {
                uri: self.uri().to_string(),
                reason: e.0,
            });
        }
    }

    /// One acquisition attempt for `owner`. `pursuit` carries what this acquisition has
    /// seen and written between attempts.
    pub async fn attempt(&self, owner: &str, pursuit: &mut Pursuit) -> Result<Attempt> {
        match self.protocol {
            Protocol::Cas => self.attempt_cas(owner, pursuit).await,
            Protocol::Lww => self.attempt_lww(owner, pursuit).await,
        }
    }

    /// Decides whether the lock read at `read_done` may be taken: `None` when it is free
    /// (released, expired), otherwise the `Busy` answer to give.
    pub(crate) fn judge(
        &self,
        lf: &LockFile,
        snap: &Snapshot,
        read_done: Instant,
        pursuit: &mut Pursuit,
    ) -> Option<Attempt> {
        if lf.is_released() {
            return None;
        }
        let since = match &pursuit.watch {
            Some((version, since)) if *version == snap.version => *since,
            _ => {
                pursuit.watch = Some((snap.version.clone(), read_done));
                read_done
            }
        };
        let seen = read_done.saturating_duration_since(since);
        if seen >= lf.expire() {
            log::debug!(
                "{}: {} unchanged for {:.3}s, expired",
                self.uri(),
                lf.describe(),
                seen.as_secs_f64()
            );
            return None;
        }
        if let Some(skew) = self.timing.skew {
            // Both the store's clock and the writer's must put the write beyond expiry.
            let last = lf
                .last_write_time()
                .map_or(snap.last_modified, |t| t.max(snap.last_modified));
            let age = (self.clock.wall() - last).to_std().unwrap_or_default();
            if age > lf.expire() + skew {
                log::debug!(
                    "{}: {} last written {:.1}s ago by wall clock, beyond expiry and skew",
                    self.uri(),
                    lf.describe(),
                    age.as_secs_f64()
                );
                return None;
            }
        }
        Some(Attempt::Busy {
            holder: Some(lf.clone()),
            expires_in: Some(lf.expire() - seen),
        })
    }

    fn body(&self, owner: &str, token: u64) -> LockFile {
        LockFile::acquired(
            owner,
            self.timing.expire,
            token,
            self.protocol,
            self.clock.wall(),
        )
    }

    async fn attempt_cas(&self, owner: &str, pursuit: &mut Pursuit) -> Result<Attempt> {
        if let Some((released, version)) = self.hint.take().filter(|(lf, _)| lf.is_released()) {
            let token = released.token + 1;
            let body = self.body(owner, token);
            let start = self.clock.now();
            pursuit.note(token, start);
            let bytes = Bytes::from(body.encode());
            if let Write::Done(version) = self.store.update(bytes, &version).await? {
                return Ok(Attempt::Acquired(self.held(owner, body, version, start)));
            }
            // Someone wrote since our release: the full attempt below finds out who.
        }
        let body = self.body(owner, 1);
        let start = self.clock.now();
        pursuit.note(1, start);
        if let Write::Done(version) = self.store.create(Bytes::from(body.encode())).await? {
            return Ok(Attempt::Acquired(self.held(owner, body, version, start)));
        }
        let Some((lf, snap)) = self.read().await? else {
            // Gone between our create and our read (deleted by hand): try again at once.
            return Ok(Attempt::Busy {
                holder: None,
                expires_in: None,
            });
        };
        if let Some(start) = pursuit.settles(owner, &lf) {
            // A write of ours landed though it came back as an error or a conflict.
            return Ok(Attempt::Acquired(self.held(owner, lf, snap.version, start)));
        }
        if let Some(busy) = self.judge(&lf, &snap, self.clock.now(), pursuit) {
            return Ok(busy);
        }
        let token = lf.token + 1;
        let body = self.body(owner, token);
        let start = self.clock.now();
        pursuit.note(token, start);
        match self
            .store
            .update(Bytes::from(body.encode()), &snap.version)
            .await?
        {
            Write::Done(version) => Ok(Attempt::Acquired(self.held(owner, body, version, start))),
            Write::Conflict => {
                pursuit.watch = None;
                match self.read().await? {
                    Some((now, snap)) => match pursuit.settles(owner, &now) {
                        Some(start) => Ok(Attempt::Acquired(self.held(
                            owner,
                            now,
                            snap.version,
                            start,
                        ))),
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

    async fn attempt_lww(&self, owner: &str, pursuit: &mut Pursuit) -> Result<Attempt> {
        let read_start = self.clock.now();
        let current = self.read().await?;
        let read_time = self.clock.now() - read_start;
        let mut write_time = std::time::Duration::ZERO;
        let (token, start) = match current
            .as_ref()
            .and_then(|(lf, _)| pursuit.settles(owner, lf).map(|s| (lf.token, s)))
        {
            // A write of ours from an earlier attempt landed: settle, then read it back.
            Some(settled) => settled,
            None => {
                let token = match &current {
                    None => 1,
                    Some((lf, snap)) => {
                        if lf.writer_id != owner {
                            let now = self.clock.now();
                            if let Some(busy) = self.judge(lf, snap, now, pursuit) {
                                return Ok(busy);
                            }
                        }
                        lf.token + 1
                    }
                };
                let body = self.body(owner, token);
                let start = self.clock.now();
                pursuit.note(token, start);
                self.store.overwrite(Bytes::from(body.encode())).await?;
                write_time = self.clock.now() - start;
                (token, start)
            }
        };
        // Another writer that read before our write may still be about to write; wait for
        // the larger of the set margin and twice the round trips we measured, then look.
        let settle = self.timing.settle.max((read_time + write_time) * 2);
        self.clock.sleep(settle).await;
        pursuit.watch = None;
        match self.read().await? {
            Some((lf, snap)) if lf.writer_id == owner && lf.token == token && !lf.is_released() => {
                Ok(Attempt::Acquired(self.held(owner, lf, snap.version, start)))
            }
            other => Ok(Attempt::Busy {
                holder: other.map(|(lf, _)| lf),
                expires_in: None,
            }),
        }
    }

    fn held(&self, owner: &str, body: LockFile, version: Version, start: Instant) -> Held {
        Held {
            owner: owner.to_string(),
            token: body.token,
            version,
            body,
            lease_start: start,
        }
    }

    /// Is `lf` still the lock `held` holds (same owner, same acquisition, not released)?
    /// A write by our owner id without a token is a co-owner that does not know tokens
    /// (mops's remote writer rewrites the whole body with its own fields): still ours.
    fn still_ours(held: &Held, lf: &LockFile) -> bool {
        lf.writer_id == held.owner && (lf.token == held.token || lf.token == 0) && !lf.is_released()
    }

    /// Takes a co-owner's body as the base of our next write, keeping our token.
    fn adopt_body(held: &mut Held, mut lf: LockFile, version: Version) {
        lf.token = held.token;
        if lf.protocol.is_none() {
            lf.protocol = held.body.protocol.clone();
        }
        held.version = version;
        held.body = lf;
    }

    fn why_not_ours(held: &Held, lf: Option<&LockFile>) -> String {
        match lf {
            None => "the lockfile was deleted".into(),
            Some(lf) if lf.writer_id == held.owner && lf.is_released() => {
                format!("it was released at {}", lf.released_at)
            }
            Some(lf) => format!(
                "it was taken over by {} with token {} (ours was {})",
                lf.describe(),
                lf.token,
                held.token
            ),
        }
    }

    /// One renewal (heartbeat) of `held`. `Err(Error::Lost)` when the lock is no longer
    /// ours; other errors are store errors the caller may retry.
    pub async fn renew(&self, held: &mut Held, writer_name: Option<&str>) -> Result<()> {
        match self.protocol {
            Protocol::Cas => {
                // A co-owner (the remote, or the orchestrator) renewing between our read and
                // our write shows up as a conflict: adopt its version and write again.
                for _ in 0..8 {
                    let body = held.body.renewed(writer_name, self.clock.wall());
                    let start = self.clock.now();
                    match self
                        .store
                        .update(Bytes::from(body.encode()), &held.version)
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
                                return Err(lost(
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
            Protocol::Lww => {
                // mops writes blindly; we read first and stop if the owner changed.
                match self.read().await? {
                    Some((lf, snap)) if Self::still_ours(held, &lf) => {
                        Self::adopt_body(held, lf, snap.version);
                        let body = held.body.renewed(writer_name, self.clock.wall());
                        let start = self.clock.now();
                        let version = self.store.overwrite(Bytes::from(body.encode())).await?;
                        held.version.clone_from(&version);
                        held.body.clone_from(&body);
                        held.lease_start = start;
                        Ok(())
                    }
                    other => Err(lost(
                        self.uri(),
                        Self::why_not_ours(held, other.as_ref().map(|(lf, _)| lf)),
                    )),
                }
            }
        }
    }

    /// Takes up a lock that `owner` holds elsewhere (the remote's keep_alive): the lockfile
    /// must name `owner` and not be released. Then renews it once, so that our lease is
    /// counted from a write of our own.
    pub async fn adopt(&self, owner: &str, writer_name: Option<&str>) -> Result<Held> {
        let Some((lf, snap)) = self.read().await? else {
            return Err(Error::NotFound {
                uri: self.uri().to_string(),
            });
        };
        let stolen = |found: String| Error::Stolen {
            uri: self.uri().to_string(),
            owner: owner.to_string(),
            found,
        };
        if lf.writer_id != owner {
            return Err(stolen(format!("it is held by {}", lf.describe())));
        }
        if lf.is_released() {
            return Err(stolen(format!("it was released at {}", lf.released_at)));
        }
        let mut held = self.held(owner, lf, snap.version, self.clock.now());
        match self.renew(&mut held, writer_name).await {
            Ok(()) => Ok(held),
            Err(Error::Lost { reason, .. }) => Err(stolen(reason)),
            Err(e) => Err(e),
        }
    }

    /// Releases the lock of `owner`. With `held`, only that acquisition is released; without,
    /// whatever acquisition the lockfile shows for `owner`.
    pub async fn release(&self, owner: &str, held: Option<&Held>) -> Result<ReleaseStatus> {
        Ok(self.release_seeing(owner, held).await?.0)
    }

    /// [`Engine::release`], with the lockfile found when it was not released now.
    pub(crate) async fn release_seeing(
        &self,
        owner: &str,
        held: Option<&Held>,
    ) -> Result<(ReleaseStatus, Option<LockFile>)> {
        // cas starts from the version we hold (its write is conditional on it); lww reads
        // first, as its renewals do, and writes only over a lockfile that is still ours.
        let mut known: Option<(LockFile, Version)> = held
            .filter(|_| self.protocol == Protocol::Cas)
            .map(|h| (h.body.clone(), h.version.clone()));
        let token = held.map(|h| h.token);
        for _ in 0..8 {
            let (lf, version) = match known.take() {
                Some(k) => k,
                None => match self.read().await? {
                    None => return Ok((ReleaseStatus::NoLockfile, None)),
                    Some((lf, snap)) => (lf, snap.version),
                },
            };
            // Released, by us or by whoever held it since: nobody holds it now.
            if lf.is_released() {
                return Ok((ReleaseStatus::AlreadyReleased, Some(lf)));
            }
            if lf.writer_id != owner || token.is_some_and(|t| t != lf.token && lf.token != 0) {
                return Ok((
                    ReleaseStatus::HeldByOther(lf.describe(), lf.token),
                    Some(lf),
                ));
            }
            let mut lf = lf;
            if let Some(t) = token {
                lf.token = t; // a co-owner may have dropped it (mops); the next token follows ours
            }
            let body = lf.released(self.clock.wall());
            match self.protocol {
                Protocol::Lww => {
                    self.store.overwrite(Bytes::from(body.encode())).await?;
                    return Ok((ReleaseStatus::Released, None));
                }
                Protocol::Cas => {
                    match self
                        .store
                        .update(Bytes::from(body.encode()), &version)
                        .await?
                    {
                        Write::Done(version) => {
                            self.hint.set(body, version);
                            return Ok((ReleaseStatus::Released, None));
                        }
                        Write::Conflict => {
                            // Settle by reading: a co-owner's renewal (write again over it),
                            // our own retried release that landed, or a takeover.
                            if let Some((now, _)) = self.read().await? {
                                if now == body {
                                    return Ok((ReleaseStatus::Released, None));
                                }
                            }
                        }
                    }
                }
            }
        }
        Err(Error::Store {
            uri: self.uri().to_string(),
            message: "the lockfile kept changing under our release".into(),
            kind: crate::errors::StoreErrorKind::Transient,
        })
    }
}
