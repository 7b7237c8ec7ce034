//! Labels: what a holder says about why it holds a lock (`run=...`, `url=...`), written into
//! the lockfile as the extension field `labels` (mops ignores fields it does not know),
//! carried through renewals and releases, and shown to people by `inspect`, `status`, `ls`,
//! `break` and the waiting line.
//!
//! Checked where they are given, so that nothing is written that a reader would reject or
//! that would crowd the lockfile; read back leniently, as every field for people is.

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A lock's labels: shared by the lock, its engine and every body it writes.
pub type Labels = Arc<BTreeMap<String, String>>;

/// At most this many labels on one lock.
pub const MAX_LABELS: usize = 32;
/// A label's key: at most this many characters.
pub const MAX_KEY_CHARS: usize = 63;
/// A label's value: at most this many characters.
pub const MAX_VALUE_CHARS: usize = 1024;
/// All labels together, as the lockfile's JSON has them: at most this many bytes (a
/// lockfile without labels is about 400).
pub const MAX_LABELS_BYTES: usize = 4096;

/// Checks labels as given by a user: `Ok(None)` for none, else the shared map, or a message
/// that names the label and the limit it breaks.
pub fn check<I>(labels: I) -> Result<Option<Labels>, String>
where
    I: IntoIterator<Item = (String, String)>,
{
    let mut map = BTreeMap::new();
    for (key, value) in labels {
        check_key(&key)?;
        if let Some(c) = value.chars().find(|c| c.is_control()) {
            return Err(format!(
                "label {key:?}: its value holds the control character {c:?}; labels are one line of text"
            ));
        }
        let chars = value.chars().count();
        if chars > MAX_VALUE_CHARS {
            return Err(format!(
                "label {key:?}: its value has {chars} characters, more than {MAX_VALUE_CHARS}; keep a link to long text instead"
            ));
        }
        map.insert(key, value);
    }
    if map.len() > MAX_LABELS {
        return Err(format!(
            "{} labels, more than {MAX_LABELS}; keep the few that tell people who holds the lock and why",
            map.len()
        ));
    }
    if map.is_empty() {
        return Ok(None);
    }
    let bytes = serde_json::to_vec(&to_json(&map)).map_or(usize::MAX, |v| v.len());
    if bytes > MAX_LABELS_BYTES {
        return Err(format!(
            "the labels take {bytes} bytes in the lockfile, more than {MAX_LABELS_BYTES}; shorten the values"
        ));
    }
    Ok(Some(Arc::new(map)))
}

fn check_key(key: &str) -> Result<(), String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let chars = key.chars().count();
    if key.is_empty() || chars > MAX_KEY_CHARS {
        return Err(format!(
            "label key {key:?} has {chars} characters; a key has 1 to {MAX_KEY_CHARS}"
        ));
    }
    if !key.starts_with(|c: char| c.is_ascii_alphanumeric()) || !key.chars().all(ok_char) {
        return Err(format!(
            "label key {key:?}: a key is ASCII letters, digits, '_', '-' and '.', starting with a letter or digit"
        ));
    }
    Ok(())
}

/// The labels as the lockfile's JSON object.
pub fn to_json(labels: &BTreeMap<String, String>) -> Value {
    Value::Object(
        labels
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect::<Map<_, _>>(),
    )
}

/// The labels of a lockfile as read: string values kept, anything else (written by some
/// other hand) left out; `None` when there are none.
pub fn from_json(value: Option<&Value>) -> Option<Labels> {
    let Some(Value::Object(m)) = value else {
        return None;
    };
    let map: BTreeMap<String, String> = m
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    (!map.is_empty()).then(|| Arc::new(map))
}

/// `run=abc, url=https://...` for one line of text; empty when there are none.
pub fn describe(labels: Option<&Labels>) -> String {
    labels
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}
