//! The lockfile: `<lock uri>/lock.json`, in the field names of the mops lease so that mops
//! processes and this library coordinate on the same file, plus two fields of our own
//! (`token`, `protocol`) and some extensions (`grace_s`, `labels`, `broken_by`) that mops
//! ignores.
//!
//! Decoding is lenient about fields that are only there for people (a `pid` written as a
//! number, a missing `hostname`) and strict about the two the protocol needs: `writer_id` and
//! `expire_s`. Whatever the bytes, decoding returns a value or a reason, never panics.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};
use std::time::Duration;

pub mod labels;
mod writer;
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
    /// Empty, or the ISO time of the release.
    pub released_at: String,
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
    /// `"remote"` when the remote's keep_alive wrote it.
    pub writer_name: Option<String>,
    /// Fencing token: grows by one at each acquisition; 0 when the writer did not set one (mops).
    pub token: u64,
    /// Which protocol wrote it, when we did.
    pub protocol: Option<Arc<str>>,
    /// Who broke the lock (`blob-lock break`): user, host and pid, for people.
    pub broken_by: Option<String>,
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

/// Why a lockfile could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
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
            released_at: String::new(),
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
        next.writer_name = writer_name.map(str::to_string);
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
        next.released_at = next.written_at.clone();
        next.written_at = String::new();
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

    /// Encodes as JSON: the fields in the byte order of their names (the order a JSON map
    /// would give them), written straight into one buffer. A heartbeat encodes once, and
    /// building a map first (a copy of every string) was a fifth of its cost.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Json(Vec::with_capacity(512));
        if let Some(by) = &self.broken_by {
            out.str("broken_by", by);
        }
        out.f64("expire_s", self.expire_s);
        out.str("first_acquired_at", &self.first_acquired_at);
        out.str("first_written_at", &self.first_written_at);
        if let Some(grace) = self.grace_s {
            out.f64("grace_s", grace);
        }
        out.str("hostname", &self.hostname);
        if let Some(labels) = &self.labels {
            out.key("labels");
            serde_json::to_writer(&mut out.0, &**labels).expect("strings always encode");
        }
        out.str("pid", &self.pid);
        if let Some(p) = &self.protocol {
            out.str("protocol", p);
        }
        out.str("released_at", &self.released_at);
        out.int("tid", self.tid);
        out.int("token", self.token);
        out.int("write_count", self.write_count);
        out.str("writer_id", &self.writer_id);
        if let Some(name) = &self.writer_name {
            out.str("writer_name", name);
        }
        out.str("written_at", &self.written_at);
        let mut json = out.0;
        json.push(b'}');
        // Exact: a memory:// store keeps the buffer as it is.
        json.shrink_to_fit();
        json
    }

    /// Decodes any bytes into a lockfile or a reason.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        if bytes.len() > MAX_LOCKFILE_BYTES {
            return Err(DecodeError(format!(
                "{} bytes is larger than any lockfile (limit {MAX_LOCKFILE_BYTES})",
                bytes.len()
            )));
        }
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| DecodeError(format!("not JSON ({e})")))?;
        let Value::Object(m) = value else {
            return Err(DecodeError("not a JSON object".into()));
        };
        let writer_id = match m.get("writer_id") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::String(_)) => return Err(DecodeError("`writer_id` is empty".into())),
            Some(_) => return Err(DecodeError("`writer_id` is not a string".into())),
            None => return Err(DecodeError("no `writer_id` field".into())),
        };
        let expire_s = match m.get("expire_s") {
            Some(v) => number(v).ok_or_else(|| DecodeError("`expire_s` is not a number".into()))?,
            None => return Err(DecodeError("no `expire_s` field".into())),
        };
        // Also bounds it so that Duration::from_secs_f64 cannot panic.
        if !(expire_s > 0.0 && expire_s < 1e9) {
            return Err(DecodeError(format!(
                "`expire_s` is {expire_s}, not a positive number of seconds"
            )));
        }
        let grace_s = match m.get("grace_s") {
            None | Some(Value::Null) => None,
            Some(v) => match number(v) {
                Some(g) if (0.0..1e9).contains(&g) => Some(g),
                _ => {
                    return Err(DecodeError(format!(
                        "`grace_s` is {v}, not a number of seconds"
                    )))
                }
            },
        };
        let token = match m.get("token") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_u64()
                .ok_or_else(|| DecodeError("`token` is not a non-negative integer".into()))?,
        };
        Ok(LockFile {
            writer_id: writer_id.into(),
            written_at: text(&m, "written_at"),
            expire_s,
            released_at: text(&m, "released_at"),
            first_written_at: text(&m, "first_written_at").into(),
            first_acquired_at: text(&m, "first_acquired_at").into(),
            hostname: text(&m, "hostname").into(),
            pid: text(&m, "pid").into(),
            tid: m.get("tid").and_then(Value::as_i64).unwrap_or(0),
            write_count: m.get("write_count").and_then(Value::as_u64).unwrap_or(0),
            writer_name: m
                .get("writer_name")
                .and_then(Value::as_str)
                .map(str::to_string),
            token,
            protocol: m.get("protocol").and_then(Value::as_str).map(protocol_name),
            broken_by: m
                .get("broken_by")
                .and_then(Value::as_str)
                .map(str::to_string),
            grace_s,
            labels: labels::from_json(m.get("labels")),
        })
    }

    /// The later of `written_at` and `released_at` as a time, if either parses.
    pub fn last_write_time(&self) -> Option<DateTime<Utc>> {
        let w = parse_time(&self.written_at);
        let r = parse_time(&self.released_at);
        w.max(r)
    }
}

fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        // A number written as a string by some hand or tool.
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A field for people: a string as is, a number in decimal, anything else empty.
fn text(m: &Map<String, Value>, key: &str) -> String {
    match m.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests;

/// A JSON object being written, one field at a time (the closing brace is the caller's).
struct Json(Vec<u8>);

impl Json {
    fn key(&mut self, key: &str) {
        self.0.push(if self.0.is_empty() { b'{' } else { b',' });
        self.0.push(b'"');
        self.0.extend_from_slice(key.as_bytes());
        self.0.extend_from_slice(b"\":");
    }

    fn str(&mut self, key: &str, value: &str) {
        self.key(key);
        serde_json::to_writer(&mut self.0, value).expect("a string always encodes");
    }

    fn f64(&mut self, key: &str, value: f64) {
        self.key(key);
        // As serde_json writes a number (`null` for one that is not finite).
        serde_json::to_writer(&mut self.0, &value).expect("a number always encodes");
    }

    fn int(&mut self, key: &str, value: impl std::fmt::Display) {
        self.key(key);
        use std::io::Write;
        let _ = write!(self.0, "{value}");
    }
}
