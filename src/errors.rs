//! The one error type of the lock core. The Python bindings map each variant to one exception
//! class of `blob_lock.exceptions`, so every message here is written for the person who reads
//! the traceback: it names the thing (URI, argument) and says what to do.

use std::time::Duration;

/// What went wrong talking to the store, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    /// Worth retrying: 5xx, 429, timeouts, connection resets.
    Transient,
    /// Retrying cannot help: bad credentials, missing bucket, bad configuration.
    Permanent,
}

/// Why a held lease was lost: carried by [`Error::Lost`] and by a lease's loss, and what
/// the loss metrics count by ([`crate::metrics::Snapshot::losses`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossCause {
    /// Another owner took the lock over.
    TakenOver,
    /// Someone else released it (`break`).
    ReleasedByOther,
    /// The lockfile was deleted.
    Deleted,
    /// No renewal succeeded before the lease deadline.
    Deadline,
    /// A renewal failed in a way no retry can mend (credentials, a deleted bucket).
    RenewalFailed,
}

impl LossCause {
    /// Every cause, in the order of [`crate::metrics::Snapshot::losses`].
    pub const ALL: [LossCause; 5] = [
        LossCause::TakenOver,
        LossCause::ReleasedByOther,
        LossCause::Deleted,
        LossCause::Deadline,
        LossCause::RenewalFailed,
    ];

    /// The cause's name, as `stats()` and the exporters show it.
    pub fn as_str(self) -> &'static str {
        match self {
            LossCause::TakenOver => "taken_over",
            LossCause::ReleasedByOther => "released_by_other",
            LossCause::Deleted => "deleted",
            LossCause::Deadline => "deadline",
            LossCause::RenewalFailed => "renewal_failed",
        }
    }
}

/// Every failure of the lock core.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A bad argument: URI, scheme, timing, option. Raised before anything touches the store.
    #[error("{0}")]
    InvalidArgument(String),

    /// The lock was not acquired within the timeout.
    #[error("{}", timeout_text(uri, waited, holder, saturated.as_deref()))]
    Timeout {
        /// The lock URI.
        uri: String,
        /// How long the caller waited.
        waited: Duration,
        /// Who holds the lock, as the lockfile says.
        holder: String,
        /// Why no attempt was made at the end, when the store was saturated then (its
        /// figures, [`Error::Saturated`]'s message): the lock was not tried, not found held.
        saturated: Option<String>,
    },

    /// A held lock stopped being ours: stolen after expiry, released by someone else, or our
    /// own deadline passed without a successful heartbeat.
    #[error("lock {uri} was lost: {reason}")]
    Lost {
        /// The lock URI.
        uri: String,
        /// Why, as a cause (what the loss metrics count by).
        cause: LossCause,
        /// Why, in words, with the details (who took it over, when it was released).
        reason: String,
    },

    /// `keep_alive` found the lockfile naming another owner, or released.
    #[error("lock {uri} is not held by owner {owner}: {found}")]
    Stolen {
        /// The lock URI.
        uri: String,
        /// The owner id the caller expected.
        owner: String,
        /// What the lockfile says instead.
        found: String,
    },

    /// `keep_alive` found no lockfile at all.
    #[error("no lockfile at {uri}: the lock was never acquired there (check the URI the orchestrator passed)")]
    NotFound {
        /// The lock URI.
        uri: String,
    },

    /// The lockfile exists but is not a lockfile we can trust. Never overwritten silently.
    #[error("invalid lockfile at {uri}: {reason}; inspect it and delete it by hand if no process uses this lock")]
    InvalidLockFile {
        /// The lockfile URI.
        uri: String,
        /// What is wrong with it.
        reason: String,
    },

    /// `cas` was asked for on a store that does not honour conditional writes: two owners
    /// could both acquire. Found by the probe every process makes before its first `cas`
    /// write to a store (`store::probe`).
    #[error("lock {uri}: protocol cas is not safe on this store: {check}; use protocol \"auto\" or \"lww\" (best effort), or, if `blob-lock doctor --race` finds the store safe, set the storage option blob_lock_conditional_writes=trust")]
    UnsafeStore {
        /// The lock URI.
        uri: String,
        /// The check that failed, in words.
        check: String,
    },

    /// `write_once` on a store that does not honour create-if-absent: a later write could
    /// replace the result it publishes.
    #[error("write_once {uri}: this store does not honour create-if-absent writes: {check}; a later write could replace the result. Publish results to a store that honours them, or, if `blob-lock doctor --race` finds this one safe, set the storage option blob_lock_conditional_writes=trust")]
    UnsafeForWriteOnce {
        /// The object URI.
        uri: String,
        /// The check that failed, in words.
        check: String,
    },

    /// No credentials could be had for the store, or fetching them failed: no request was
    /// sent. `message` says where they were looked for and what to do.
    #[error("cannot get credentials for {uri}: {message}")]
    Credentials {
        /// The lockfile URI.
        uri: String,
        /// Where they were looked for, what failed, and the fix.
        message: String,
    },

    /// The store refused or failed a request. `message` carries the store's own words.
    #[error("store error at {uri}: {message}")]
    Store {
        /// The lockfile URI.
        uri: String,
        /// The store's message, with our hint where we have one.
        message: String,
        /// Whether retrying could help.
        kind: StoreErrorKind,
    },

    /// The store is taking all this process can send it: an acquisition was refused
    /// without a request so that the renewals of the locks already held keep landing, or a
    /// renewal was not sent because it could not land before its lease deadline. `message`
    /// names the store and the figures (its latency, what its leases need, what it answered).
    #[error("lock {uri}: {message}; retry later, hold fewer locks on this store, or raise expire (fewer renewals per lock)")]
    Saturated {
        /// The lockfile URI.
        uri: String,
        /// Why, with the figures.
        message: String,
    },
}

impl Error {
    /// True for errors that a retry may cure: transient store errors, and a saturated
    /// store (later).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Store {
                kind: StoreErrorKind::Transient,
                ..
            } | Error::Saturated { .. }
        )
    }
}

/// Result with the lock core's error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// [`Error::Timeout`]'s message: who held the lock, or, when the store was saturated at the
/// end, that no new lock was tried and why.
fn timeout_text(uri: &str, waited: &Duration, holder: &str, saturated: Option<&str>) -> String {
    let waited = waited.as_secs_f64();
    match saturated {
        Some(why) => format!(
            "timed out after {waited:.3}s waiting for lock {uri}: no new lock was tried while the store was saturated (the locks held there renew first): {why}"
        ),
        None => format!("timed out after {waited:.3}s waiting for lock {uri}; it is held by {holder}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_on_a_saturated_store_says_so_and_names_no_holder() {
        let e = Error::Timeout {
            uri: "s3://b/k".into(),
            waited: Duration::from_secs(5),
            holder: "not known".into(),
            saturated: Some("s3://b is saturated: it asked this process to slow down".into()),
        };
        let text = e.to_string();
        assert!(
            text.contains("no new lock was tried while the store was saturated"),
            "{text}"
        );
        assert!(
            text.contains("slow down") && !text.contains("held by"),
            "{text}"
        );
        let e = Error::Timeout {
            uri: "s3://b/k".into(),
            waited: Duration::from_secs(5),
            holder: "owner o on h (pid 1)".into(),
            saturated: None,
        };
        assert!(e
            .to_string()
            .ends_with("it is held by owner o on h (pid 1)"));
    }
}
