//! The lockfile as JSON: encoding our writes in one form, decoding whatever a store holds
//! (ours, mops's, another hand's) into a lockfile or the reason it is not one.

use super::{labels, protocol_name, LockFile, MAX_LOCKFILE_BYTES};
use serde_json::{Map, Value};
use std::sync::Arc;

/// Why a lockfile could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl LockFile {
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
            released_at: text(&m, "released_at").into_boxed_str(),
            first_written_at: text(&m, "first_written_at").into(),
            first_acquired_at: text(&m, "first_acquired_at").into(),
            hostname: text(&m, "hostname").into(),
            pid: text(&m, "pid").into(),
            tid: m.get("tid").and_then(Value::as_i64).unwrap_or(0),
            write_count: m.get("write_count").and_then(Value::as_u64).unwrap_or(0),
            writer_name: m.get("writer_name").and_then(Value::as_str).map(Arc::from),
            token,
            protocol: m.get("protocol").and_then(Value::as_str).map(protocol_name),
            broken_by: m.get("broken_by").and_then(Value::as_str).map(Box::from),
            grace_s,
            labels: labels::from_json(m.get("labels")),
        })
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
