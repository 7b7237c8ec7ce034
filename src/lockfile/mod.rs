//! The lockfile: `<lock uri>/lock.json`, in the field names of the mops lease so that mops
//! processes and this library coordinate on the same file, plus two fields of our own
//! (`token`, `protocol`) and some extensions (`grace_s`, `labels`, `broken_by`) that mops
//! ignores.
//!
//! Decoding is lenient about fields that are only there for people (a `pid` written as a
//! number, a missing `hostname`) and strict about the two the protocol needs: `writer_id` and
//! `expire_s`. Whatever the bytes, decoding returns a value or a reason, never panics.

use chrono::{DateTime, SecondsFormat, Utc};
use std::time::Duration;

mod codec;
pub mod labels;
pub mod token;
mod writer;
pub use codec::DecodeError;
pub use labels::Labels;
use std::sync::Arc;
pub use writer::this_process;
use writer::{protocol_name, this_hostname, this_pid, this_thread_id};

/// The name of the lockfile inside the lock URI.
pub const LOCKFILE_NAME: &str = "lock.json";

/// Larger lockfiles are refused unread: ours are about 400 bytes, and reading an arbitrary
/// object into memory because someone pointed a lock at it would be a trap.
pub const MAX_LOCKFILE_BYTES: usize = 64 * 1024;

/// One decoded lockfile.
#[derive(Debug, PartialEq)]
pub struct LockFile {
    /// The owner id, shared by the orchestrator and its remote.
    pub writer_id: Arc<str>,
    /// ISO time of the last write by the writer's clock; empty once released.
    pub written_at: String,
    /// Seconds after a write at which the lock counts as expired.
    pub expire_s: f64,
    /// Empty, or the ISO time of the release (boxed: empty while held, and a held lock's
    /// state must stay small).
    pub released_at: Box<str>,
    /// ISO time of the first write by this owner.
    pub first_written_at: Arc<str>,
    /// ISO time at which this owner acquired the lock.
    pub first_acquired_at: Arc<str>,
    /// Host of the last writer.
    pub hostname: Arc<str>,
    /// Process id of the last writer (a string, as mops writes it).
    pub pid: Arc<str>,
    /// Thread id of the last writer.
    pub tid: i64,
    /// Writes by this owner so far.
    pub write_count: u64,
    /// `"remote"` when the remote's keep_alive wrote it (shared: a remote renews with it).
    pub writer_name: Option<Arc<str>>,
    /// Fencing token: grows at each acquisition, to at least its writer's wall clock in
    /// microseconds ([`token`]); 0 when the writer did not set one
    /// (mops).
    pub token: u64,
    /// Which protocol wrote it, when we did.
    pub protocol: Option<Arc<str>>,
    /// Who broke the lock (`blob-lock break`): user, host and pid, for people.
    pub broken_by: Option<Box<str>>,
    /// Launch grace: seconds after this write during which a waiter that sees no newer write
    /// still does not take over, when longer than `expire_s`. Written by an orchestrator that
    /// handed the lock to a remote which has not written yet; absent otherwise.
    pub grace_s: Option<f64>,
    /// What the holder says about why it holds the lock ([`labels`]); kept through renewals
    /// and the release. A plain mops remote's renewal drops them; its orchestrator's next
    /// renewal writes them again.
    pub labels: Option<Labels>,
}

impl Clone for LockFile {
    fn clone(&self) -> Self {
        LockFile {
            writer_id: self.writer_id.clone(),
            written_at: self.written_at.clone(),
            expire_s: self.expire_s,
            released_at: self.released_at.clone(),
            first_written_at: self.first_written_at.clone(),
            first_acquired_at: self.first_acquired_at.clone(),
            hostname: self.hostname.clone(),
            pid: self.pid.clone(),
            tid: self.tid,
            write_count: self.write_count,
            writer_name: self.writer_name.clone(),
            token: self.token,
            protocol: self.protocol.clone(),
            broken_by: self.broken_by.clone(),
            grace_s: self.grace_s,
            labels: self.labels.clone(),
        }
    }

    /// Field by field, into the strings already there: a held lock keeps its lockfile for
    /// hours and a renewal copies the next one in every few seconds. Replacing the strings
    /// instead would move them, a few at each renewal, into the heap of whichever runtime
    /// thread renewed, stranding memory across the threads' heaps. (The fields that stay
    /// the same for a whole lease, or a whole process, are shared, `Arc<str>`: a copy is a
    /// count.)
    fn clone_from(&mut self, source: &Self) {
        // Destructured: a field added later must be copied here too, or this fails to build.
        let LockFile {
            writer_id,
            written_at,
            expire_s,
            released_at,
            first_written_at,
            first_acquired_at,
            hostname,
            pid,
            tid,
            write_count,
            writer_name,
            token,
            protocol,
            broken_by,
            grace_s,
            labels,
        } = source;
        self.writer_id.clone_from(writer_id);
        self.written_at.clone_from(written_at);
        self.expire_s = *expire_s;
        self.released_at.clone_from(released_at);
        self.first_written_at.clone_from(first_written_at);
        self.first_acquired_at.clone_from(first_acquired_at);
        self.hostname.clone_from(hostname);
        self.pid.clone_from(pid);
        self.tid = *tid;
        self.write_count = *write_count;
        self.writer_name.clone_from(writer_name);
        self.token = *token;
        self.protocol.clone_from(protocol);
        self.broken_by.clone_from(broken_by);
        self.grace_s = *grace_s;
        self.labels.clone_from(labels);
    }
}

/// A time in the ISO format mops writes (`datetime.isoformat()` of an aware UTC time).
pub fn format_time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, false)
}

/// Parses an ISO 8601 time as mops or we wrote it; a time without zone is taken as UTC.
pub fn parse_time(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|n| n.and_utc())
}

impl LockFile {
    /// The body written by an acquisition.
    pub fn acquired(
        owner: &str,
        expire: Duration,
        token: u64,
        protocol: &str,
        wall: DateTime<Utc>,
    ) -> Self {
        Self::acquired_by(owner.into(), expire, token, protocol, wall)
    }

    /// [`LockFile::acquired`] with the owner id shared with its lock (thousands are held).
    pub(crate) fn acquired_by(
        owner: Arc<str>,
        expire: Duration,
        token: u64,
        protocol: &str,
        wall: DateTime<Utc>,
    ) -> Self {
        let written_at = format_time(wall);
        let first: Arc<str> = written_at.as_str().into();
        LockFile {
            writer_id: owner,
            written_at,
            expire_s: expire.as_secs_f64(),
            released_at: Box::default(),
            first_written_at: first.clone(),
            first_acquired_at: first,
            hostname: this_hostname().clone(),
            pid: this_pid().clone(),
            tid: this_thread_id(),
            write_count: 1,
            writer_name: None,
            token,
            protocol: Some(protocol_name(protocol)),
            broken_by: None,
            grace_s: None,
            labels: None,
        }
    }

    /// The body of a renewal of `self` by the same owner (orchestrator or remote), without
    /// launch grace: a writer that grants some sets `grace_s` itself.
    pub fn renewed(&self, writer_name: Option<&str>, wall: DateTime<Utc>) -> Self {
        let mut next = self.clone();
        next.written_at = format_time(wall);
        next.hostname.clone_from(this_hostname());
        next.pid.clone_from(this_pid());
        next.tid = this_thread_id();
        next.write_count = self.write_count.saturating_add(1);
        if next.writer_name.as_deref() != writer_name {
            next.writer_name = writer_name.map(Arc::from);
        }
        next.grace_s = None;
        if next.first_acquired_at.is_empty() {
            // mops's remote writer refuses a lockfile without it.
            next.first_acquired_at = next.written_at.as_str().into();
        }
        next
    }

    /// The released body: keeps `writer_id` and `token` (so the next token follows on) and
    /// empties `written_at`, as mops does.
    pub fn released(&self, wall: DateTime<Utc>) -> Self {
        let mut next = self.renewed(self.writer_name.as_deref(), wall);
        next.released_at = std::mem::take(&mut next.written_at).into_boxed_str();
        next
    }

    /// True once the owner released it.
    pub fn is_released(&self) -> bool {
        !self.released_at.is_empty() || self.written_at.is_empty()
    }

    /// The lock's lifetime after a write.
    pub fn expire(&self) -> Duration {
        Duration::from_secs_f64(self.expire_s)
    }

    /// How long after this write a waiter that sees no newer one waits before taking over:
    /// `expire_s`, or the launch grace when that is longer.
    pub fn lifetime(&self) -> Duration {
        let grace = self.grace_s.unwrap_or(0.0);
        Duration::from_secs_f64(self.expire_s.max(grace))
    }

    /// When the launch grace of this write ends by its writer's clock, if it has one.
    pub fn grace_until(&self) -> Option<DateTime<Utc>> {
        let grace = chrono::Duration::from_std(Duration::from_secs_f64(self.grace_s?)).ok()?;
        Some(parse_time(&self.written_at)? + grace)
    }

    /// A short description of the holder for messages: owner, host, pid, labels.
    pub fn describe(&self) -> String {
        let mut s = format!("owner {}", self.writer_id);
        if !self.hostname.is_empty() {
            s.push_str(&format!(" on {}", self.hostname));
        }
        if !self.pid.is_empty() {
            s.push_str(&format!(" (pid {})", self.pid));
        }
        if self.labels.is_some() {
            s.push_str(&format!(" [{}]", labels::describe(self.labels.as_ref())));
        }
        s
    }

    /// The later of `written_at` and `released_at` as a time, if either parses.
    pub fn last_write_time(&self) -> Option<DateTime<Utc>> {
        let w = parse_time(&self.written_at);
        let r = parse_time(&self.released_at);
        w.max(r)
    }
}

#[cfg(test)]
mod tests;
