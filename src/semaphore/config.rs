//! How many slots a semaphore has: `PREFIX/semaphore.json`, beside its slots, so that every
//! orchestrator on the prefix agrees on one number. The stored number is the truth. The first
//! caller creates it (create-if-absent: of two first-comers one writes, and the other reads
//! what was written); a caller asking for another number uses the stored one and is told
//! so; [`crate::Semaphore::set_slots`] changes it by an update-if-match.

use crate::errors::{Error, Result};
use crate::store::{self, Access, LockStore, Version, Write};
use crate::timing::Timing;
use bytes::Bytes;
use std::sync::Arc;

/// The most slots a semaphore may have: a waiter reads its slots in turn, and each is a
/// lockfile of its own.
pub const MAX_SLOTS: usize = 4096;

/// The object holding the configuration, under the semaphore's prefix.
pub const CONFIG_NAME: &str = "semaphore.json";

/// The configuration as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// How many slots may be held at once.
    pub slots: usize,
    /// Who wrote it: `user@host (pid N)`.
    pub set_by: String,
    /// When, by the writer's clock (RFC 3339).
    pub set_at: String,
}

impl Stored {
    fn new(slots: usize) -> Stored {
        Stored {
            slots,
            set_by: crate::lockfile::this_process(),
            set_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        }
    }

    fn encode(&self) -> Bytes {
        let body = serde_json::json!({
            "semaphore": 1,
            "slots": self.slots,
            "set_by": self.set_by,
            "set_at": self.set_at,
        });
        Bytes::from(body.to_string())
    }

    fn decode(uri: &str, bytes: &[u8]) -> Result<Stored> {
        let bad = |why: &str| {
            Error::InvalidArgument(format!(
                "{uri} is not a semaphore's configuration ({why}); `blob-lock slots PREFIX N` writes a valid one"
            ))
        };
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| bad(&format!("not JSON: {e}")))?;
        if value.get("semaphore").and_then(serde_json::Value::as_u64) != Some(1) {
            return Err(bad("no \"semaphore\": 1 in it"));
        }
        let slots = value
            .get("slots")
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| bad("no whole number of \"slots\""))?;
        let slots = checked_slots(slots).map_err(|e| bad(&e.to_string()))?;
        let text = |key: &str| {
            value
                .get(key)
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Ok(Stored {
            slots,
            set_by: text("set_by"),
            set_at: text("set_at"),
        })
    }
}

/// `slots` if a semaphore may have that many.
pub fn checked_slots(slots: u64) -> Result<usize> {
    if slots == 0 || slots > MAX_SLOTS as u64 {
        return Err(Error::InvalidArgument(format!(
            "slots must be between 1 and {MAX_SLOTS}, got {slots}"
        )));
    }
    Ok(slots as usize)
}

/// The configuration object of one semaphore.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    store: Arc<dyn LockStore>,
}

impl Config {
    /// The configuration of the semaphore at `prefix`; makes no request.
    pub(crate) fn open(prefix: &str, access: &Access, timing: &Timing) -> Result<Config> {
        let uri = format!("{prefix}/{CONFIG_NAME}");
        Ok(Config {
            store: store::open_object(&uri, access, timing.request_timeout())?,
        })
    }

    /// The configuration in `store`, brought by the caller.
    pub(crate) fn with_store(store: Arc<dyn LockStore>) -> Config {
        Config { store }
    }

    /// The object's URI.
    pub(crate) fn uri(&self) -> &str {
        self.store.uri()
    }

    /// The stored configuration, if there is one.
    pub(crate) async fn read(&self) -> Result<Option<(Stored, Version)>> {
        let Some(snapshot) = self.store.read().await? else {
            return Ok(None);
        };
        let stored = Stored::decode(self.uri(), &snapshot.bytes)?;
        Ok(Some((stored, snapshot.version)))
    }

    /// The stored configuration, written with `asked` slots first if there is none.
    pub(crate) async fn agreed(&self, asked: usize) -> Result<Stored> {
        if let Some((stored, _)) = self.read().await? {
            return Ok(stored);
        }
        let ours = Stored::new(asked);
        match self.store.create(ours.encode()).await? {
            Write::Done(_) => Ok(ours),
            // Another first-comer wrote first (or our own write, answered late): theirs holds.
            // Gone again, or a read that lags the write: read again, as after any transient
            // failure.
            Write::Conflict { .. } => match self.read().await? {
                Some((stored, _)) => Ok(stored),
                None => Err(Error::Store {
                    uri: self.uri().to_string(),
                    message: "it was there when written and absent when read next (deleted, or a read that lags the store's writes); reading it again".to_string(),
                    kind: crate::errors::StoreErrorKind::Transient,
                }),
            },
        }
    }

    /// Stores `slots`, whatever was there: an update of the version read, read again and
    /// retried when another change landed between.
    pub(crate) async fn set(&self, slots: usize) -> Result<Stored> {
        let ours = Stored::new(slots);
        loop {
            let written = match self.read().await {
                Ok(Some((_, version))) => self.store.update(ours.encode(), &version).await?,
                Ok(None) => self.store.create(ours.encode()).await?,
                // A configuration nobody can read is replaced: that is what setting it is for.
                Err(Error::InvalidArgument(_)) => {
                    self.store.overwrite(ours.encode()).await?;
                    Write::Done(Version {
                        e_tag: None,
                        version: None,
                    })
                }
                Err(e) => return Err(e),
            };
            if let Write::Done(_) = written {
                return Ok(ours);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_reads_back_as_written() {
        let stored = Stored::new(64);
        let back = Stored::decode("memory://m/q/semaphore.json", &stored.encode()).unwrap();
        assert_eq!(back, stored);
    }

    #[test]
    fn a_bad_configuration_names_the_object_and_the_fix() {
        for body in [
            &b"{"[..],
            br#"{"slots": 4}"#,
            br#"{"semaphore": 1, "slots": 0}"#,
            br#"{"semaphore": 1, "slots": -3}"#,
            br#"{"semaphore": 1, "slots": 99999}"#,
        ] {
            let e = Stored::decode("memory://m/q/semaphore.json", body)
                .unwrap_err()
                .to_string();
            assert!(e.contains("memory://m/q/semaphore.json"), "{e}");
            assert!(e.contains("blob-lock slots PREFIX N"), "{e}");
        }
    }

    #[test]
    fn slots_out_of_range_are_refused() {
        assert!(checked_slots(0).is_err());
        assert!(checked_slots(MAX_SLOTS as u64 + 1).is_err());
        assert_eq!(checked_slots(1).unwrap(), 1);
    }
}
