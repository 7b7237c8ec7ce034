//! How many slots a semaphore has: `PREFIX/semaphore.json`, beside its slots, so that every
//! orchestrator on the prefix agrees on one number. The stored number is the truth. The first
//! caller creates it (create-if-absent: of two first-comers one writes, and the other reads
//! what was written; on a store that ignores the condition, each waits out the other and
//! takes what is there then); a caller asking for another number uses the stored one and is
//! told so; [`crate::Semaphore::set_slots`] changes it by an update-if-match.
//!
//! A configuration missing where slots were taken before was lost (deleted by hand, or by a
//! lifecycle rule: it is rarely written, so it is old), not never written: it is refused
//! with an error that names `blob-lock slots`, never written again with whatever number the
//! next caller asks for, which would change every orchestrator's quota without a word. An
//! unreadable one is refused alike; `set_slots` writes over it.

use crate::clock::Clock;
use crate::errors::{Error, Result, StoreErrorKind};
use crate::lease::LockOptions;
use crate::mutation::{active, Mutation};
use crate::store::{self, Access, LockStore, Version, Write};
use crate::timing::Timing;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

/// The most slots a semaphore may have: a waiter reads its slots in order, and each is a
/// lockfile of its own.
pub const MAX_SLOTS: usize = 4096;

/// The object holding the configuration, under the semaphore's prefix.
pub const CONFIG_NAME: &str = "semaphore.json";

/// Lock URIs read a page at a time when looking for slots taken before.
const PAGE: usize = 256;

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

/// Whether `uri`, a lock listed under `prefix`, is one of its slots (`PREFIX/slot-<i>`).
fn is_slot(prefix: &str, uri: &str) -> bool {
    uri.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix("/slot-"))
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
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

/// Where a semaphore's slots are found.
#[derive(Clone)]
pub(crate) enum Slots {
    /// Listed under the prefix, as `blob-lock ls` lists locks.
    Listed { access: Access, timeout: Duration },
    /// Opened by name from stores the caller brought (`slot-<i>`), the first `asked` read.
    Opened(super::Opener),
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

    /// What the object holds, if it is there.
    async fn found(&self) -> Result<Option<Found>> {
        let Some(snapshot) = self.store.read().await? else {
            return Ok(None);
        };
        Ok(Some(match Stored::decode(&snapshot.bytes) {
            Ok(stored) => Found::Stored(stored, snapshot.version),
            Err(why) => Found::Unreadable(why),
        }))
    }

    /// The stored configuration, if there is one; an unreadable one is refused
    /// ([`Config::unreadable`]).
    pub(crate) async fn read(&self) -> Result<Option<(Stored, Version)>> {
        match self.found().await? {
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
        match self.found().await? {
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
            if let Some(slot) = self.slot_taken_before(asked).await? {
                // Every slot is taken after its taker agreed on the configuration: another
                // first-comer may have written both since our read. Only a configuration
                // still missing now, with a slot there, was lost.
                if active(Mutation::SemaphoreLostUnread) {
                    return Err(self.lost(&slot, asked));
                }
                return match self.read().await? {
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
                match self.read().await? {
                    Some((stored, _)) => Ok(stored),
                    None => Err(self.gone()),
                }
            }
            // Another first-comer wrote first (or our own write, answered late): theirs holds.
            // Gone again, or a read that lags the write: read again, as after any transient
            // failure.
            Write::Conflict { .. } => match self.read().await? {
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

    /// The URI (or name) of a slot whose lockfile exists, if any: slots were taken under
    /// this prefix before.
    async fn slot_taken_before(&self, asked: usize) -> Result<Option<String>> {
        match &self.slots {
            Slots::Opened(open) => {
                for i in 0..asked {
                    let name = format!("slot-{i}");
                    if open(&name).read().await?.is_some() {
                        return Ok(Some(name));
                    }
                }
                Ok(None)
            }
            Slots::Listed { access, timeout } => {
                // A local folder not made yet: nothing was ever taken there.
                let Ok(mut listing) = store::Listing::new(&self.prefix, access, *timeout) else {
                    return Ok(None);
                };
                // Every page: other locks under the prefix may come before the slots.
                loop {
                    let page = listing.next_page(PAGE).await?;
                    if page.is_empty() {
                        return Ok(None);
                    }
                    if let Some(slot) = page.into_iter().find(|uri| is_slot(&self.prefix, uri)) {
                        return Ok(Some(slot));
                    }
                }
            }
        }
    }

    /// Stores `slots`, whatever was there: an update of the version read, read again and
    /// retried when another change landed between.
    pub(crate) async fn set(&self, slots: usize) -> Result<Stored> {
        let ours = Stored::new(slots);
        loop {
            let written = match self.found().await? {
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
    fn only_slots_count_as_slots() {
        let p = "s3://b/q";
        assert!(is_slot(p, "s3://b/q/slot-0"));
        assert!(is_slot(p, "s3://b/q/slot-63"));
        assert!(!is_slot(p, "s3://b/q/slot-"));
        assert!(!is_slot(p, "s3://b/q/slot-1/x"));
        assert!(!is_slot(p, "s3://b/q/other"));
        assert!(!is_slot(p, "s3://b/qq/slot-1"));
    }

    #[test]
    fn slots_out_of_range_are_refused() {
        assert!(checked_slots(0).is_err());
        assert!(checked_slots(MAX_SLOTS as u64 + 1).is_err());
        assert_eq!(checked_slots(1).unwrap(), 1);
    }
}
