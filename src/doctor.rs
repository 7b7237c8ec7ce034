//! `blob-lock doctor`: probes a store on a scratch lockfile beside the lock and says whether
//! the `cas` protocol is safe there. Some S3-compatible stores accept `If-None-Match` and
//! `If-Match` and ignore them; cas on such a store lets two owners in, so users should learn
//! it before they rely on it.

use crate::errors::Result;
use crate::lease::{new_owner_id, LockOptions};
use crate::store::{self, LockStore, Version, Write};
use bytes::Bytes;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

/// One call to the store and what it showed.
#[derive(Debug, Clone)]
pub struct Probe {
    /// What was tried.
    pub name: &'static str,
    /// Whether the store behaved as the protocols need.
    pub ok: bool,
    /// How long the call took, in seconds.
    pub seconds: f64,
    /// What happened, in words.
    pub detail: String,
}

/// What the probes showed.
#[derive(Debug, Clone)]
pub struct Report {
    /// The lock URI probed beside.
    pub uri: String,
    /// The scratch lock URI the probes wrote (deleted afterwards).
    pub scratch: String,
    /// Each call, in order.
    pub probes: Vec<Probe>,
    /// A second create-if-absent on an existing lockfile was refused.
    pub create_is_conditional: bool,
    /// An update with a stale version was refused.
    pub update_is_conditional: bool,
    /// Every read right after a write saw that write.
    pub reads_see_writes: bool,
}

impl Report {
    /// `cas` is safe: both conditional writes are honoured and reads see writes.
    pub fn cas_safe(&self) -> bool {
        self.create_is_conditional && self.update_is_conditional && self.reads_see_writes
    }

    /// `lww` works as documented (best effort): reads see writes.
    pub fn lww_usable(&self) -> bool {
        self.reads_see_writes
    }
}

async fn timed<T>(f: impl Future<Output = Result<T>>) -> (Result<T>, f64) {
    let start = Instant::now();
    let r = f.await;
    (r, start.elapsed().as_secs_f64())
}

/// Probes the store behind `uri` on the scratch lock `<uri>/.blob-lock-doctor-<random>`:
/// a read of a missing lockfile, create-if-absent twice, read-after-write, update-if-match,
/// an update with a stale version, a read after it; then deletes the scratch lockfile.
/// A permanent error on the first call (no bucket, bad credentials) is returned as an
/// error; later errors are failed probes.
pub async fn doctor(uri: &str, options: &LockOptions) -> Result<Report> {
    crate::store::Location::parse(uri)?; // the scratch lock's URI would hide what is wrong
    let scratch = format!(
        "{}/.blob-lock-doctor-{}",
        uri.trim_end_matches('/'),
        &new_owner_id()[..12]
    );
    let store = store::open(&scratch, &options.store, &options.timing)?;
    doctor_on(uri, &scratch, store).await
}

/// [`doctor`] on a given scratch store (tests bring their own).
pub async fn doctor_on(uri: &str, scratch: &str, store: Arc<dyn LockStore>) -> Result<Report> {
    let mut probes = Vec::new();
    let (read, t) = timed(store.read()).await;
    match read {
        Ok(None) => probes.push(ok("read a missing lockfile", t, "none, as expected".into())),
        Ok(Some(_)) => probes.push(bad("read a missing lockfile", t, "found one".into())),
        Err(e) => return Err(e),
    }
    let outcome = probe_writes(&store, &mut probes).await;
    let (deleted, t) = timed(store.delete()).await;
    probes.push(match deleted {
        Ok(()) => ok("delete the scratch lockfile", t, "deleted".into()),
        Err(e) => bad("delete the scratch lockfile", t, e.to_string()),
    });
    let (create_is_conditional, update_is_conditional, reads_see_writes) = outcome;
    Ok(Report {
        uri: uri.to_string(),
        scratch: scratch.to_string(),
        probes,
        create_is_conditional,
        update_is_conditional,
        reads_see_writes,
    })
}

fn ok(name: &'static str, seconds: f64, detail: String) -> Probe {
    Probe {
        name,
        ok: true,
        seconds,
        detail,
    }
}

fn bad(name: &'static str, seconds: f64, detail: String) -> Probe {
    Probe {
        name,
        ok: false,
        seconds,
        detail,
    }
}

/// The write probes: (create is conditional, update is conditional, reads see writes).
async fn probe_writes(store: &Arc<dyn LockStore>, probes: &mut Vec<Probe>) -> (bool, bool, bool) {
    let body = |tag: &str| Bytes::from(format!("{{\"blob_lock_doctor\": \"{tag}\"}}"));
    let mut reads_ok = true;

    let (first, t) = timed(store.create(body("first"))).await;
    match first {
        Ok(Write::Done(_)) => probes.push(ok("create if absent", t, "created".into())),
        Ok(Write::Conflict { .. }) => {
            probes.push(bad(
                "create if absent",
                t,
                "refused on a missing lockfile".into(),
            ));
            return (false, false, false);
        }
        Err(e) => {
            probes.push(bad("create if absent", t, e.to_string()));
            return (false, false, false);
        }
    }

    let (second, t) = timed(store.create(body("second"))).await;
    let create_ok = match second {
        Ok(Write::Conflict { .. }) => {
            probes.push(ok("create again", t, "refused: it exists".into()));
            true
        }
        Ok(Write::Done(_)) => {
            probes.push(bad(
                "create again",
                t,
                "overwrote the lockfile: the store ignores If-None-Match".into(),
            ));
            false
        }
        Err(e) => {
            probes.push(bad("create again", t, e.to_string()));
            false
        }
    };

    let expected_first = if create_ok { "first" } else { "second" };
    let Some(v1) = read_back(
        store,
        probes,
        "read after write",
        &body(expected_first),
        &mut reads_ok,
    )
    .await
    else {
        return (create_ok, false, false);
    };

    let (update, t) = timed(store.update(body("third"), &v1)).await;
    match update {
        Ok(Write::Done(_)) => probes.push(ok("update if match", t, "updated".into())),
        Ok(Write::Conflict { .. }) => {
            probes.push(bad(
                "update if match",
                t,
                "refused with the version just read".into(),
            ));
            return (create_ok, false, reads_ok);
        }
        Err(e) => {
            probes.push(bad("update if match", t, e.to_string()));
            return (create_ok, false, reads_ok);
        }
    }

    let (stale, t) = timed(store.update(body("stale"), &v1)).await;
    let update_ok = match stale {
        Ok(Write::Conflict { .. }) => {
            probes.push(ok(
                "update with a stale version",
                t,
                "refused: it changed".into(),
            ));
            true
        }
        Ok(Write::Done(_)) => {
            probes.push(bad(
                "update with a stale version",
                t,
                "overwrote the lockfile: the store ignores If-Match".into(),
            ));
            false
        }
        Err(e) => {
            probes.push(bad("update with a stale version", t, e.to_string()));
            false
        }
    };

    let expected_last = if update_ok { "third" } else { "stale" };
    read_back(
        store,
        probes,
        "read after update",
        &body(expected_last),
        &mut reads_ok,
    )
    .await;
    (create_ok, update_ok, reads_ok)
}

async fn read_back(
    store: &Arc<dyn LockStore>,
    probes: &mut Vec<Probe>,
    name: &'static str,
    expected: &Bytes,
    reads_ok: &mut bool,
) -> Option<Version> {
    let (read, t) = timed(store.read()).await;
    match read {
        Ok(Some(snap)) if snap.bytes == expected => {
            probes.push(ok(name, t, "saw the write".into()));
            Some(snap.version)
        }
        Ok(Some(snap)) => {
            *reads_ok = false;
            probes.push(bad(
                name,
                t,
                format!(
                    "saw {:?} instead of the write: reads may be stale",
                    String::from_utf8_lossy(&snap.bytes)
                ),
            ));
            Some(snap.version)
        }
        Ok(None) => {
            *reads_ok = false;
            probes.push(bad(name, t, "saw no lockfile: reads may be stale".into()));
            None
        }
        Err(e) => {
            *reads_ok = false;
            probes.push(bad(name, t, e.to_string()));
            None
        }
    }
}
