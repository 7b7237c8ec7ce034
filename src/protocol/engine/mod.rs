//! One protocol over one lockfile: the [`Engine`] that the lease loops drive (what an
//! acquisition carries between attempts and what a holder knows are in `acquisition`). The
//! steps that differ by protocol are in `cas` and `lww`; the writes that end a hold in
//! `release`.

use super::acquisition::{Acquisition, Attempt, OurWrite};
use super::Protocol;
use crate::clock::Clock;
use crate::errors::{Error, LossCause, Result};
use crate::lockfile::LockFile;
use crate::metrics::{self, Request};
use crate::protocol::released::Receipt;
use crate::protocol::watched::Watched;
use crate::store::{load, LockStore, Snapshot, Version, Write};
use crate::timing::Timing;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

mod fence;
pub use fence::Fence;

/// The protocol engine of one lock: one protocol bound to one lockfile, with the timing,
/// clocks and process-wide tables it runs on. Every write of the lockfile is one of its
/// steps: attempt, renew, adopt, release, break.
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
    /// What our own last release of this lock wrote (see [`crate::protocol::released`]).
    pub last_release: Receipt,
    /// What this process has seen of the lockfile between acquisitions (see
    /// [`crate::protocol::watched`]).
    pub watched: Watched,
    /// The identity under which waiters on this lockfile in this process listen for a
    /// release here, to take it over at once instead of at their next poll
    /// (`crate::lease::waker`). `None` for stores brought by tests and simulations, whose
    /// "processes" share one real process.
    pub wake: Option<Arc<str>>,
    /// The labels every acquisition writes.
    pub labels: Option<crate::lockfile::Labels>,
    /// How its acquisitions pick their token.
    pub fence: Fence,
}

/// The `writer_name` of the remote's writes (mops's remote writer uses it too).
pub const REMOTE: &str = "remote";

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
    /// flight) it is read again until it decodes, and reported only when a read sent
    /// [`Timing::longest_request`] or more after the first unreadable read still cannot
    /// decode it: any write that read caught in flight has ended by then, whatever each
    /// read took.
    pub async fn read(&self) -> Result<Option<(LockFile, Snapshot)>> {
        self.read_patiently(false).await
    }

    /// [`Engine::read`] for a look from outside (inspect, status, ls), which writes
    /// nothing on what it sees: the same undecodable version read three times in a row is
    /// reported then, not after the longest request, with a word on what it may be.
    pub async fn look(&self) -> Result<Option<(LockFile, Snapshot)>> {
        self.read_patiently(true).await
    }

    async fn read_patiently(&self, look: bool) -> Result<Option<(LockFile, Snapshot)>> {
        // When the first unreadable read ended: a write it caught in flight has landed or
        // been given up by its writer `longest_request` after that.
        let mut first: Option<Instant> = None;
        let mut last: Option<Snapshot> = None;
        let mut same = 0;
        loop {
            let sent = self.clock.now();
            let read = metrics::request(Request::Read, self.store.read());
            let Some(snap) = read.await? else {
                return Ok(None);
            };
            let e = match LockFile::decode(&snap.bytes) {
                Ok(lf) => return Ok(Some((lf, snap))),
                Err(e) => e,
            };
            let unchanged = last
                .as_ref()
                .is_some_and(|l| l.version == snap.version && l.bytes == snap.bytes);
            same = if unchanged { same + 1 } else { 0 };
            last = Some(snap);
            let first = *first.get_or_insert_with(|| self.clock.now());
            let lww = !self.protocol.steps().conditional();
            let stable = look && same >= 2;
            // Only a read sent after the writes in flight have ended counts: not how long
            // the reads took, nor how many there were (on a loaded store or machine a few
            // slow reads can span the whole bound while one write is still in flight).
            let waited = sent.saturating_duration_since(first);
            let longest = self.timing.longest_request();
            if lww && !stable && waited < longest {
                log::debug!(
                    "{}: unreadable ({e}), a write in flight? reading again",
                    self.uri()
                );
                self.clock.sleep(self.timing.poll_min).await;
                continue;
            }
            let reason = if stable {
                format!(
                    "{} (the same in three reads; on a store whose writes are not atomic a slow write in flight looks like this for a moment: look again)",
                    e.0
                )
            } else if lww {
                format!(
                    "{} (still so {:.1}s after the first unreadable read, longer than a write of this lock can be in flight)",
                    e.0,
                    waited.as_secs_f64()
                )
            } else {
                e.0
            };
            return Err(Error::InvalidLockFile {
                uri: self.uri().to_string(),
                reason,
            });
        }
    }

    /// One acquisition attempt for `owner`. `acquisition` carries what this acquisition has
    /// seen and written between attempts.
    pub async fn attempt(
        &self,
        owner: &Arc<str>,
        acquisition: &mut Acquisition,
    ) -> Result<Attempt> {
        let steps = self.protocol.steps().attempt(self, owner, acquisition);
        load::reserving(steps).await
    }

    /// Waits until the next write can leave at once (a pass of the store's load): called
    /// right before a write is stamped with its lease's start, so that a lease counts from
    /// when its write left, not from before a wait for the store.
    pub(super) async fn reserve(&self) -> Result<()> {
        self.store.reserve().await
    }

    /// Decides whether the lock read at `read_done` may be taken: `None` when it is free
    /// (released, expired), otherwise the `Busy` answer to give.
    pub(crate) fn judge(
        &self,
        lf: &LockFile,
        snap: &Snapshot,
        read_done: Instant,
        acquisition: &mut Acquisition,
    ) -> Option<Attempt> {
        acquisition.took_over = None;
        if lf.is_released() {
            return None;
        }
        let since = match &acquisition.watch {
            Some((version, since)) if *version == snap.version => *since,
            _ => {
                // An earlier acquisition in this process may have seen this version first.
                // Under cas only: a stale read (lww's stores promise less) of a version seen
                // long ago must not count as a long watch.
                let watched = self.protocol.steps().conditional().then_some(&self.watched);
                let since = watched
                    .and_then(|w| w.since(&snap.version))
                    .unwrap_or(read_done);
                if let Some(w) = watched {
                    w.note(&snap.version, since);
                }
                acquisition.watch = Some((snap.version.clone(), since));
                since
            }
        };
        let seen = read_done.saturating_duration_since(since);
        // The launch grace, when the holder handed the lock to a remote, lengthens the wait.
        let mut lifetime = lf.lifetime();
        if crate::mutation::active(crate::mutation::Mutation::IgnoreGrace) {
            lifetime = lf.expire();
        }
        if crate::mutation::active(crate::mutation::Mutation::ExpireAtHalf) {
            lifetime /= 2;
        }
        if seen >= lifetime {
            log::debug!(
                "{}: {} unchanged for {:.3}s, expired",
                self.uri(),
                lf.describe(),
                seen.as_secs_f64()
            );
            acquisition.took_over = Some(lf.describe());
            return None;
        }
        if let Some(skew) = self.timing.skew {
            // Both the store's clock and the writer's must put the write beyond expiry.
            let last = lf
                .last_write_time()
                .map_or(snap.last_modified, |t| t.max(snap.last_modified));
            let age = (self.clock.wall() - last).to_std().unwrap_or_default();
            if age > lifetime + skew {
                log::debug!(
                    "{}: {} last written {:.1}s ago by wall clock, beyond expiry and skew",
                    self.uri(),
                    lf.describe(),
                    age.as_secs_f64()
                );
                acquisition.took_over = Some(lf.describe());
                return None;
            }
        }
        Some(Attempt::Busy {
            holder: Some(lf.clone()),
            expires_in: Some(lifetime - seen),
        })
    }

    /// Writes `body` if there is no lockfile yet, counted ([`crate::metrics`]).
    pub(super) async fn create_lockfile(&self, body: Bytes) -> Result<Write> {
        metrics::request(Request::Create, self.store.create(body)).await
    }

    /// Writes `body` if the lockfile is still at `expected`, counted.
    pub(super) async fn update_lockfile(&self, body: Bytes, expected: &Version) -> Result<Write> {
        metrics::request(Request::Update, self.store.update(body, expected)).await
    }

    /// Writes `body` whatever the lockfile holds, counted.
    pub(super) async fn overwrite_lockfile(&self, body: Bytes) -> Result<Version> {
        metrics::request(Request::Overwrite, self.store.overwrite(body)).await
    }

    pub(super) fn body(&self, owner: &Arc<str>, token: u64) -> LockFile {
        let mut body = LockFile::acquired_by(
            owner.clone(),
            self.timing.expire,
            token,
            self.protocol.as_str(),
            self.clock.wall(),
        );
        body.labels.clone_from(&self.labels);
        body
    }

    /// What a holder knows of its write `body`, landed at `version`, its lease counted from
    /// `start`.
    pub(super) fn our_write(
        &self,
        owner: &str,
        body: LockFile,
        version: Version,
        start: Instant,
    ) -> OurWrite {
        // One copy of the owner id for the lease and the body it keeps.
        let owner = if *body.writer_id == *owner {
            body.writer_id.clone()
        } else {
            owner.into()
        };
        OurWrite {
            owner,
            version,
            body,
            lease_start: start,
            grace_until: None,
        }
    }

    /// Is `lf` still the acquisition `ours` wrote (same owner, same token, not released)?
    /// A write by our owner id without a token is a co-owner that does not know tokens
    /// (mops's remote writer rewrites the whole body with its own fields): still ours.
    pub(super) fn still_ours(ours: &OurWrite, lf: &LockFile) -> bool {
        if crate::mutation::active(crate::mutation::Mutation::AdoptForeignWrite) {
            return !lf.is_released();
        }
        *lf.writer_id == *ours.owner
            && (lf.token == ours.token() || lf.token == 0)
            && !lf.is_released()
    }

    /// Takes a co-owner's body as the base of our next write, keeping our token. A write by
    /// the remote ends the launch grace: from then on it is the remote that keeps the lock.
    pub(super) fn adopt_body(ours: &mut OurWrite, mut lf: LockFile, version: Version) {
        if lf.writer_name.as_deref() == Some(REMOTE) {
            ours.grace_until = None;
        }
        lf.token = ours.token();
        if lf.labels.is_none() {
            // A co-owner that rewrites the whole body (mops's remote) drops them.
            lf.labels = ours.body.labels.clone();
        }
        if lf.protocol.is_none() {
            lf.protocol = ours.body.protocol.clone();
        }
        ours.version = version;
        ours.body = lf;
    }

    /// The loss of `ours`, found when the lockfile read `lf` (`None`: there was none) was
    /// no longer [`Engine::still_ours`]: its cause, and the words that say it.
    pub(super) fn not_ours(&self, ours: &OurWrite, lf: Option<&LockFile>) -> Error {
        let (cause, reason) = match lf {
            None => (LossCause::Deleted, "the lockfile was deleted".into()),
            Some(lf) if *lf.writer_id == *ours.owner && lf.is_released() => (
                LossCause::ReleasedByOther,
                format!("it was released at {}", lf.released_at),
            ),
            Some(lf) => (
                LossCause::TakenOver,
                format!(
                    "it was taken over by {} with token {} (ours was {})",
                    lf.describe(),
                    lf.token,
                    ours.token()
                ),
            ),
        };
        Error::Lost {
            uri: self.uri().to_string(),
            cause,
            reason,
        }
    }

    /// One renewal (heartbeat) of `ours`. `Err(Error::Lost)` when the lock is no longer
    /// ours; other errors are store errors the caller may retry.
    pub async fn renew(&self, ours: &mut OurWrite, writer_name: Option<&str>) -> Result<()> {
        let steps = self.protocol.steps().renew(self, ours, writer_name);
        load::reserving(steps).await
    }

    /// Hands the lock to a remote that may take `grace` to start: renews it now with a launch
    /// grace, so that until the remote's first write (or `grace` from now) a waiter that sees
    /// no renewal waits `grace` rather than `expire` before taking over. Later renewals carry
    /// what is left of it. On an error the grace is not granted (the write may still have
    /// landed; the next renewal then writes none).
    pub async fn hand_off(&self, ours: &mut OurWrite, grace: Duration) -> Result<()> {
        let before = ours.grace_until;
        ours.grace_until = Some(self.clock.now() + grace);
        let renewed = self.renew(ours, None).await;
        if renewed.is_err() {
            ours.grace_until = before;
        }
        renewed
    }

    /// Takes up a lock that `owner` holds elsewhere (the remote's keep_alive): the lockfile
    /// must name `owner` and not be released. Then renews it once, so that our lease is
    /// counted from a write of our own.
    pub async fn adopt(&self, owner: &str, writer_name: Option<&str>) -> Result<OurWrite> {
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
        // Released first: a released lockfile may name another writer (a break), and "held
        // by" would be wrong about a lock that nobody holds.
        if lf.is_released() {
            let by = match *lf.writer_id != *owner {
                true => format!(" by {}", lf.writer_id),
                false => String::new(),
            };
            return Err(stolen(format!(
                "it was released{by} at {}; nobody holds it",
                lf.released_at
            )));
        }
        if *lf.writer_id != *owner {
            return Err(stolen(format!("it is held by {}", lf.describe())));
        }
        let mut ours = self.our_write(owner, lf, snap.version, self.clock.now());
        match self.renew(&mut ours, writer_name).await {
            Ok(()) => Ok(ours),
            Err(Error::Lost { reason, .. }) => Err(stolen(reason)),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests;
