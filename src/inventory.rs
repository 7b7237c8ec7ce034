//! Every lock under a prefix, as one read of each shows it ([`Inventory`]: `blob-lock ls`,
//! `list_locks`), and the removal of lockfiles released or expired long ago ([`prune`]).
//!
//! A lockfile is only ever deleted by a process that holds its lock: [`prune`] takes the
//! lock through the protocol, as any waiter would take over a released or expired lock,
//! and deletes it within its lease, so a holder that took it meanwhile is never deleted
//! from under. Deleting a lockfile drops its token; the next acquisition starts a new
//! lockfile's tokens from its wall clock, above the deleted one's while clocks disagree by
//! less than `clock_skew`: prune keeps a lockfile whose last acquisition is more recent than
//! that plus its expire ([`Pruned::TooRecent`]).

use crate::errors::{Error, Result};
use crate::inspect::{Inspection, LockState};
use crate::lease::{Lock, LockOptions};
use crate::store::Listing;
use crate::timing::Timing;
use chrono::{DateTime, Utc};
use futures_util::stream::{self, StreamExt};
use std::time::Duration;

/// Lockfiles listed per request, and read back at once: a page.
pub const PAGE: usize = 200;
/// Lockfiles of a page read at the same time.
const READS_IN_FLIGHT: usize = 16;

/// One lock under the prefix.
#[derive(Debug, Clone)]
pub struct Entry {
    /// The lock's URI.
    pub uri: String,
    /// What one read of its lockfile showed, or why the lockfile cannot be read as one.
    pub seen: std::result::Result<Inspection, String>,
}

/// The locks under one prefix, read a page at a time.
#[derive(Debug)]
pub struct Inventory {
    listing: Listing,
    options: LockOptions,
}

impl Inventory {
    /// The locks under `prefix`, read with `options` (their storage options and timing,
    /// by which expiry is judged). Makes no request yet.
    pub fn new(prefix: &str, options: &LockOptions) -> Result<Inventory> {
        Ok(Inventory {
            listing: Listing::new(prefix, &options.store, options.timing.request_timeout())?,
            options: options.clone(),
        })
    }

    /// The prefix as given, without a trailing `/`.
    pub fn prefix(&self) -> &str {
        self.listing.prefix()
    }

    /// The next page of locks, each read once; empty when all have been listed. A
    /// lockfile deleted between the listing and its read is left out.
    pub async fn next_page(&mut self) -> Result<Vec<Entry>> {
        loop {
            let uris = self.listing.next_page(PAGE).await?;
            if uris.is_empty() {
                return Ok(Vec::new());
            }
            let options = &self.options;
            let read = stream::iter(uris)
                .map(|uri| async move { look(uri, options).await })
                .buffered(READS_IN_FLIGHT)
                .collect::<Vec<_>>()
                .await;
            let page: Vec<Entry> = read
                .into_iter()
                .filter_map(Result::transpose)
                .collect::<Result<_>>()?;
            if !page.is_empty() {
                return Ok(page);
            }
        }
    }
}

async fn look(uri: String, options: &LockOptions) -> Result<Option<Entry>> {
    let lock = match Lock::new(&uri, options) {
        Ok(lock) => lock,
        // An object under the prefix whose name no lock URI can have (`#`, `..`).
        Err(Error::InvalidArgument(why)) => {
            return Ok(Some(Entry {
                uri,
                seen: Err(why),
            }))
        }
        Err(e) => return Err(e),
    };
    match lock.inspect().await {
        Ok(seen) if seen.state == LockState::Unlocked => Ok(None),
        Ok(seen) => Ok(Some(Entry {
            uri,
            seen: Ok(seen),
        })),
        Err(Error::InvalidLockFile { reason, .. }) => Ok(Some(Entry {
            uri,
            seen: Err(reason),
        })),
        Err(e) => Err(e),
    }
}

/// How long ago a lock stopped being held, by both clocks (the writer's, in the lockfile,
/// and the store's last-modified time), taking the later: since its release, or since its
/// last write expired. `None` while it is held, or when it cannot be told.
pub fn idle_for(seen: &Inspection, now: DateTime<Utc>) -> Option<Duration> {
    let lf = seen.lockfile.as_ref()?;
    let since = match seen.state {
        LockState::Released => {
            let written = crate::lockfile::parse_time(&lf.released_at).or(lf.last_write_time());
            later(written, seen.last_modified)?
        }
        LockState::Expired => {
            let lifetime = chrono::Duration::from_std(lf.lifetime()).ok()?;
            later(lf.last_write_time(), seen.last_modified)? + lifetime
        }
        LockState::Unlocked | LockState::Held => return None,
    };
    (now - since).to_std().ok()
}

fn later(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    a.max(b)
}

/// What [`prune`] did with one lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pruned {
    /// Its lockfile was deleted.
    Deleted,
    /// It would be deleted (a dry run wrote nothing).
    WouldDelete,
    /// Released or expired, but not for `older_than` yet, or its last acquisition (its
    /// token) is more recent than the clock skew allowance plus its expire (deleted sooner,
    /// the next holder's tokens could start below it); kept.
    TooRecent,
    /// Held; kept.
    Held,
    /// It changed since it was listed (taken, renewed or released by someone), or could not
    /// be taken now (an expired lock is taken only once its last write is older than
    /// `expire + clock_skew` by the wall clock, or after watching it for `expire`); kept.
    Changed(String),
    /// Its lockfile cannot be read as one; never deleted by prune.
    Unreadable(String),
    /// Old enough, but on a store where blob-lock runs `cas` and cannot send a conditional
    /// delete (the reason); kept, untouched: see [`prune`].
    NoConditionalDelete(String),
    /// A store error ended the attempt; whatever prune took was released again.
    Failed(String),
}

impl Pruned {
    /// The outcome's name, as Python and the CLI show it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Pruned::Deleted => "deleted",
            Pruned::WouldDelete => "would_delete",
            Pruned::TooRecent => "too_recent",
            Pruned::Held => "held",
            Pruned::Changed(_) => "changed",
            Pruned::Unreadable(_) => "unreadable",
            Pruned::NoConditionalDelete(_) => "no_conditional_delete",
            Pruned::Failed(_) => "failed",
        }
    }

    /// Why, in words, when there is more to say than the name.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Pruned::Changed(why)
            | Pruned::Unreadable(why)
            | Pruned::NoConditionalDelete(why)
            | Pruned::Failed(why) => Some(why),
            _ => None,
        }
    }
}

/// Deletes `entry`'s lockfile if it has been released or expired for at least
/// `older_than`, and only if it is unchanged since it was listed: the lock is taken through
/// the protocol (as a waiter takes over a free lock, refused if anyone wrote it since), its
/// token checked to be the listed one's next, its heartbeat stopped, and the lockfile
/// deleted within the lease, only if it is still our write: on local files under the
/// update guard, on object stores with a delete conditional on our write's version (sent a
/// request timeout before the lease ends). A store without a conditional delete keeps its
/// lockfiles under `cas` ([`Pruned::NoConditionalDelete`]): an unconditional delete held up in the network
/// could land after a later holder took the lock and delete that holder's lockfile, which
/// `cas` promises cannot happen whatever the delays; under `lww`, which promises nothing
/// past its settle wait, it deletes within the lease. With `delete` false nothing is
/// written (and no store is probed). Never fails: a store error is [`Pruned::Failed`],
/// with what was taken released.
pub async fn prune(
    entry: &Entry,
    older_than: Duration,
    options: &LockOptions,
    delete: bool,
) -> Pruned {
    let seen = match &entry.seen {
        Ok(seen) => seen,
        Err(why) => return Pruned::Unreadable(why.clone()),
    };
    if let Some(kept) = judge(seen, older_than, options.clock.wall(), &options.timing) {
        return kept;
    }
    if !delete {
        return Pruned::WouldDelete;
    }
    match Lock::new(&entry.uri, options) {
        Ok(lock) => prune_lock(&lock, seen, older_than).await,
        Err(e) => Pruned::Unreadable(e.to_string()),
    }
}

/// Why a lock seen as `seen` is kept without a request, if it is. A lockfile whose last
/// acquisition (its token) is more recent than the clock skew allowance (`clock_skew`, or
/// the largest allowance when it is off) plus the longest a write may be on its way (its
/// writers' `expire`, as the lockfile states it) is too recent too: deleted now, the next
/// holder's token could be below it ([`crate::lockfile::token`]).
fn judge(
    seen: &Inspection,
    older_than: Duration,
    now: DateTime<Utc>,
    timing: &Timing,
) -> Option<Pruned> {
    let skew = timing.skew.unwrap_or(Timing::MAX_SKEW);
    let (token, expire) = seen
        .lockfile
        .as_ref()
        .map_or((0, 0.0), |lf| (lf.token, lf.expire_s));
    let on_its_way = Duration::try_from_secs_f64(expire).unwrap_or(timing.expire);
    match idle_for(seen, now) {
        None if seen.state == LockState::Held => Some(Pruned::Held),
        None => Some(Pruned::TooRecent),
        Some(idle) if idle < older_than => Some(Pruned::TooRecent),
        Some(_) if !crate::lockfile::token::may_delete(token, now, skew + on_its_way) => {
            Some(Pruned::TooRecent)
        }
        Some(_) => None,
    }
}

/// [`prune`] (deleting) of a lock seen as `seen` (its lockfile once read), through `lock`
/// (the model check brings one on its simulated store).
pub async fn prune_lock(lock: &Lock, seen: &Inspection, older_than: Duration) -> Pruned {
    if let Some(kept) = judge(seen, older_than, lock.clock().wall(), lock.timing()) {
        return kept;
    }
    // Its token one more than the listed one, which was judged old enough to delete.
    let lock = &lock.clone().with_fence(crate::protocol::Fence::Counted);
    let listed_token = seen.lockfile.as_ref().map_or(0, |lf| lf.token);
    if let Err(why) = lock.store().conditional_deletes().await {
        match lock.store().conditional_writes(false).await {
            Ok(true) => return Pruned::NoConditionalDelete(format!(
                "{why}; an unconditional delete held up in the network could delete a later holder's lockfile, so prune keeps lockfiles on this store"
            )),
            Ok(false) => {} // lww: as best effort as its every write
            Err(e) => return Pruned::Failed(e.to_string()),
        }
    }
    let lease = match lock.try_acquire().await {
        Ok(Some(lease)) => lease,
        Ok(None) => {
            let now = lock.inspect().await.map(|i| i.state.as_str());
            return Pruned::Changed(format!(
                "not taken: it is {} now, or its last write is not yet older than expire + clock_skew by the wall clock",
                now.unwrap_or("unreadable")
            ));
        }
        Err(e) => return Pruned::Failed(e.to_string()),
    };
    let lease = &lease;
    let give_back = move |outcome: Pruned| async move {
        let _ = lease.release().await;
        outcome
    };
    // (A lockfile without a token, written by mops, gives no count to check.)
    if listed_token != 0 && lease.token() != listed_token + 1 {
        return give_back(Pruned::Changed(format!(
            "acquired by someone else since it was listed (token {listed_token} then, {} now)",
            lease.token() - 1
        )))
        .await;
    }
    lease.stop().await;
    let (ours, deadline) = lease.last_write().await;
    // The delete must be on its way a request timeout before the lease ends, however long
    // it waits for a pass of its store's load first.
    let send_by = deadline.checked_sub(lock.timing().request_timeout());
    let left = send_by.map(|by| by.saturating_duration_since(lock.clock().now()));
    let Some(left) = left.filter(|left| !left.is_zero() && !lease.is_lost()) else {
        return give_back(too_late()).await;
    };
    let delete = async {
        if crate::mutation::active(crate::mutation::Mutation::PruneUnconditional) {
            return lock.store().delete().await.map(|()| true);
        }
        lock.store().delete_if(&ours).await
    };
    match tokio::time::timeout(left, delete).await {
        Ok(Ok(true)) => Pruned::Deleted,
        Ok(Ok(false)) => {
            give_back(Pruned::Changed(
                "the lockfile changed between taking it and deleting it".into(),
            ))
            .await
        }
        Ok(Err(e)) => give_back(Pruned::Failed(e.to_string())).await,
        // Sent, unanswered: it may have landed (at our version only), or may yet.
        Err(_) => give_back(Pruned::Changed(
            "its delete was not answered within the lease: the lockfile may be deleted; if it is not, it was released".into(),
        ))
        .await,
    }
}

fn too_late() -> Pruned {
    Pruned::Changed(
        "taking it took too long to delete it within the lease; it was released instead".into(),
    )
}
