//! Whether slots were taken under a semaphore's prefix before: a configuration missing where
//! they were was lost, not never written (`config.rs`). Found by listing the prefix, every
//! page of it (other locks under the prefix may list before the slots: a look at the first
//! page alone missed them behind 64, and a lost configuration was written again), or, on
//! stores the caller brought, by reading the slots by name.

use crate::errors::Result;
use crate::store::{self, Access};
use std::time::Duration;

/// Lock URIs read a page at a time.
const PAGE: usize = 256;

/// Where a semaphore's slots are found.
#[derive(Clone)]
pub(crate) enum Slots {
    /// Listed under the prefix, as `blob-lock ls` lists locks.
    Listed { access: Access, timeout: Duration },
    /// Opened by name from stores the caller brought (`slot-<i>`), the first `asked` read.
    Opened(super::Opener),
}

impl Slots {
    /// The URI (or name) of a slot under `prefix` whose lockfile exists, if any: slots were
    /// taken there before.
    pub(crate) async fn taken_before(&self, prefix: &str, asked: usize) -> Result<Option<String>> {
        match self {
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
                let Ok(mut listing) = store::Listing::new(prefix, access, *timeout) else {
                    return Ok(None);
                };
                loop {
                    let page = listing.next_page(PAGE).await?;
                    if page.is_empty() {
                        return Ok(None);
                    }
                    if let Some(slot) = page.into_iter().find(|uri| is_slot(prefix, uri)) {
                        return Ok(Some(slot));
                    }
                }
            }
        }
    }
}

/// Whether `uri`, a lock listed under `prefix`, is one of its slots (`PREFIX/slot-<i>`).
fn is_slot(prefix: &str, uri: &str) -> bool {
    uri.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix("/slot-"))
        .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
