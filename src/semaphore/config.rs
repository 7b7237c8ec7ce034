//! How many slots a semaphore has: `PREFIX/semaphore.json`, beside its slots, so that every
//! orchestrator on the prefix agrees on one number. The stored number is the truth. The first
//! caller creates it (create-if-absent: of two first-comers one writes, and the other reads
//! what was written; on a store that ignores the condition, each waits out the others as an
//! lww write does, twice its own read, look for slots and write, and takes what is there
//! then, and a read that cannot decode it may have caught half of a write: read again); a
//! caller asking for another number uses the stored one and is told so;
//! [`crate::Semaphore::set_slots`] changes it by an update-if-match.
//!
//! A configuration missing where slots were taken before was lost (deleted by hand, or by a
//! lifecycle rule: it is rarely written, so it is old), not never written: it is refused
//! with an error that names `blob-lock slots`, never written again with whatever number the
//! next caller asks for, which would change every orchestrator's quota without a word. An
//! unreadable one is refused alike; `set_slots` writes over it.

use super::taken::Slots;
use crate::clock::Clock;
use crate::errors::{Error, Result, StoreErrorKind};
use crate::lease::{Backoff, LockOptions};
use crate::mutation::{active, Mutation};
use crate::store::{self, LockStore, Version, Write};
use crate::timing::Timing;
use bytes::Bytes;
use std::sync::Arc;

/// The most slots a semaphore may have: a waiter reads its slots in order, and each is a
/// lockfile of its own.
pub const MAX_SLOTS: usize = 4096;

/// The object holding the configuration, under the semaphore's prefix.
pub const CONFIG_NAME: &str = "semaphore.json";

/// Writes `set_slots` tries, each after a read, before it gives up.
pub const SET_TRIES: usize = 8;

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

    /// The configuration in `bytes`, or why they are not one.
    fn decode(bytes: &[u8]) -> std::result::Result<Stored, String> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        if value.get("semaphore").and_then(serde_json::Value::as_u64) != Some(1) {
            return Err("no \"semaphore\": 1 in it".into());
        }
        let slots = value
            .get("slots")
            .and_then(serde_json::Value::as_u64)
            .ok_or("no whole number of \"slots\"")?;
        let slots = checked_slots(slots).map_err(|e| e.to_string())?;
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
#[derive(Clone)]
pub(crate) struct Config {
    store: Arc<dyn LockStore>,
    /// The prefix, for messages.
    prefix: Arc<str>,
    /// Where to look for slots taken before, when the configuration is missing.
    slots: Slots,
    clock: Arc<dyn Clock>,
    /// Where creates are not conditional, a first write waits out other first-comers as
    /// an lww write does ([`Timing::lww_settle`]).
    timing: Timing,
}

/// What the configuration object holds, as read.
enum Found {
    Stored(Stored, Version),
    /// Something that is not a configuration (why not).
    Unreadable(String),
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Config({})", self.store.uri())
    }
}

impl Config {
    /// The configuration of the semaphore at `prefix`; makes no request.
    pub(crate) fn open(prefix: &str, options: &LockOptions) -> Result<Config> {
        let uri = format!("{prefix}/{CONFIG_NAME}");
        let timeout = options.timing.request_timeout();
        Ok(Config {
            store: store::open_object(&uri, &options.store, timeout)?,
            prefix: prefix.into(),
            slots: Slots::Listed {
                access: options.store.clone(),
                timeout,
            },
            clock: options.clock.clone(),
            timing: options.timing,
        })
    }

    /// The configuration in stores brought by the caller (`open` by name).
    pub(crate) fn with_stores(prefix: &str, open: &super::Opener, options: &LockOptions) -> Config {
        Config {
            store: open(CONFIG_NAME),
            prefix: prefix.into(),
            slots: Slots::Opened(open.clone()),
            clock: options.clock.clone(),
            timing: options.timing,
        }
    }

    /// The object's URI.
    pub(crate) fn uri(&self) -> &str {
        self.store.uri()
    }

    /// What the object holds, if it is there. Where writes may not be atomic (a store that
    /// ignores conditional writes, s3rver: a read can catch half of a write in flight), an
    /// unreadable one is read again, as lww reads a lockfile (`Engine::read`): called
    /// unreadable once a read sent [`Timing::longest_request`] after the first unreadable
    /// read still is; by a `look`, which writes nothing and asks the store nothing more, once
    /// three reads in a row found the same.
    async fn found(&self, look: bool) -> Result<Option<Found>> {
        let (mut first, mut last, mut same) = (None, None, 0);
        loop {
            let sent = self.clock.now();
            let Some(snapshot) = self.store.read().await? else {
                return Ok(None);
            };
            let why = match Stored::decode(&snapshot.bytes) {
                Ok(stored) => return Ok(Some(Found::Stored(stored, snapshot.version))),
                Err(why) => why,
            };
            same = if last.as_ref() == Some(&snapshot.bytes) {
                same + 1
            } else {
                0
            };
            last = Some(snapshot.bytes);
            let first = *first.get_or_insert_with(|| self.clock.now());
            let atomic = match look {
                true => self.store.known_conditional_writes() == Some(true),
                false => self.store.conditional_writes(false).await?,
            };
            if atomic {
                return Ok(Some(Found::Unreadable(why)));
            }
            let waited = sent.saturating_duration_since(first);
            if look && same >= 2 {
                return Ok(Some(Found::Unreadable(format!(
                    "{why}; the same in three reads"
                ))));
            }
            if !look && waited >= self.timing.longest_request() {
                return Ok(Some(Found::Unreadable(format!(
                    "{why}; still so {:.1}s after the first unreadable read, longer than a write can be in flight",
                    waited.as_secs_f64()
                ))));
            }
            log::debug!(
                "{}: unreadable ({why}), a write in flight? reading again",
                self.uri()
            );
            self.clock.sleep(self.timing.poll_min).await;
        }
    }

    /// The stored configuration, if there is one; an unreadable one is refused
    /// ([`Config::unreadable`]). A `look` (`status`) writes nothing.
    pub(crate) async fn read(&self, look: bool) -> Result<Option<(Stored, Version)>> {
        match self.found(look).await? {
            None => Ok(None),
            Some(Found::Stored(stored, version)) => Ok(Some((stored, version))),
            Some(Found::Unreadable(why)) => Err(self.unreadable(&why)),
        }
    }

    /// The stored configuration, written with `asked` slots first if there is none and
    /// none was lost.
    pub(crate) async fn agreed(&self, asked: usize) -> Result<Stored> {
        // From here to our write's answer: what another first-comer may take as well
        // between its read and its write, where creates are not conditional.
        let began = self.clock.now();
        match self.found(false).await? {
            Some(Found::Stored(stored, _)) => return Ok(stored),
            None => {}
            // Seeded: an unreadable configuration written over with the number asked.
            Some(Found::Unreadable(_)) if active(Mutation::SemaphoreConfigReplaced) => {
                let ours = Stored::new(asked);
                self.store.overwrite(ours.encode()).await?;
                return Ok(ours);
            }
            Some(Found::Unreadable(why)) => return Err(self.unreadable(&why)),
        }
        if !active(Mutation::SemaphoreConfigRecreated) {
            if let Some(slot) = self.slots.taken_before(&self.prefix, asked).await? {
                // Every slot is taken after its taker agreed on the configuration: another
                // first-comer may have written both since our read. Only a configuration
                // still missing now, with a slot there, was lost.
                if active(Mutation::SemaphoreLostUnread) {
                    return Err(self.lost(&slot, asked));
                }
                return match self.read(false).await? {
                    Some((stored, _)) => Ok(stored),
                    None => Err(self.lost(&slot, asked)),
                };
            }
        }
        let ours = Stored::new(asked);
        if active(Mutation::SemaphoreConfigOverwritten) {
            self.store.overwrite(ours.encode()).await?;
            return Ok(ours);
        }
        match self.store.create(ours.encode()).await? {
            Write::Done(_) if self.store.conditional_writes(false).await? => Ok(ours),
            // The store ignored the condition: another first-comer may have written too.
            // Wait out any writer that read before us, as an lww write does, then take what
            // is there. (Measured before the probe that may have just run.)
            Write::Done(_) => {
                let measured = self.clock.now() - began;
                self.clock.sleep(self.timing.lww_settle(measured)).await;
                match self.read(false).await? {
                    Some((stored, _)) => Ok(stored),
                    None => Err(self.gone()),
                }
            }
            // Another first-comer wrote first (or our own write, answered late): theirs holds.
            // Gone again, or a read that lags the write: read again, as after any transient
            // failure.
            Write::Conflict { .. } => match self.read(false).await? {
                Some((stored, _)) => Ok(stored),
                None => Err(self.gone()),
            },
        }
    }

    fn gone(&self) -> Error {
        Error::Store {
            uri: self.uri().to_string(),
            message: "it was there when written and absent when read next (deleted, or a read that lags the store's writes); reading it again".to_string(),
            kind: StoreErrorKind::Transient,
        }
    }

    /// The configuration is there but cannot be read: refused as a lost one is, since
    /// writing a number over it would change every orchestrator's quota.
    fn unreadable(&self, why: &str) -> Error {
        Error::Store {
            uri: self.uri().to_string(),
            message: format!(
                "it is not a semaphore's configuration ({why}): the semaphore's number cannot be read. Store it again with `blob-lock slots {} N` (or BlobSemaphore.set_slots), which writes over it",
                self.prefix
            ),
            kind: StoreErrorKind::Permanent,
        }
    }

    fn lost(&self, slot: &str, asked: usize) -> Error {
        Error::Store {
            uri: self.uri().to_string(),
            message: format!(
                "it is missing, but {slot} was taken before: the semaphore's number was lost (deleted by hand or by a lifecycle rule?), and writing the {asked} asked for here would change every orchestrator's quota. Store it again with `blob-lock slots {} N` (or BlobSemaphore.set_slots)",
                self.prefix
            ),
            kind: StoreErrorKind::Permanent,
        }
    }

    /// Stores `slots`, whatever was there: an update of the version read, read again and
    /// retried after a pause when another change landed between, [`SET_TRIES`] times at
    /// most (a store that refuses every conditional update would refuse it for ever).
    pub(crate) async fn set(&self, slots: usize) -> Result<Stored> {
        let ours = Stored::new(slots);
        let unbounded = active(Mutation::ConfigWriteUnbounded);
        let mut backoff = Backoff::new(&self.timing);
        let mut tries = 0;
        while unbounded || tries < SET_TRIES {
            if tries > 0 && !unbounded {
                self.clock.sleep(backoff.pause(self.clock.jitter())).await;
            }
            tries += 1;
            let written = match self.found(true).await? {
                // Our own write, answered as a refusal (a request the client sent twice).
                Some(Found::Stored(stored, _)) if stored == ours => return Ok(ours),
                Some(Found::Stored(_, version)) => {
                    self.store.update(ours.encode(), &version).await?
                }
                None => self.store.create(ours.encode()).await?,
                // A configuration nobody can read is replaced: that is what setting it is for.
                Some(Found::Unreadable(_)) => {
                    self.store.overwrite(ours.encode()).await?;
                    Write::Done(Version {
                        e_tag: None,
                        version: None,
                    })
                }
            };
            if let Write::Done(_) = written {
                return Ok(ours);
            }
        }
        Err(Error::Store {
            uri: self.uri().to_string(),
            message: format!(
                "the number was not stored: {SET_TRIES} conditional writes of it were refused, each after a read. Another `blob-lock slots {}` at the same time, or a store (or a proxy before it) that refuses every update-if-match: `blob-lock doctor` checks its conditional writes",
                self.prefix
            ),
            kind: StoreErrorKind::Transient,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_reads_back_as_written() {
        let stored = Stored::new(64);
        assert_eq!(Stored::decode(&stored.encode()).unwrap(), stored);
    }

    #[test]
    fn a_bad_configuration_says_why() {
        for (body, why) in [
            (&b"{"[..], "not JSON"),
            (br#"{"slots": 4}"#, "\"semaphore\": 1"),
            (br#"{"semaphore": 1, "slots": 0}"#, "between 1 and 4096"),
            (br#"{"semaphore": 1, "slots": -3}"#, "whole number"),
            (br#"{"semaphore": 1, "slots": 99999}"#, "between 1 and 4096"),
        ] {
            let e = Stored::decode(body).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn slots_out_of_range_are_refused() {
        assert!(checked_slots(0).is_err());
        assert!(checked_slots(MAX_SLOTS as u64 + 1).is_err());
        assert_eq!(checked_slots(1).unwrap(), 1);
    }
}
