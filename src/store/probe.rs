//! Does a store honour conditional writes? Some S3-compatible stores accept `If-None-Match`
//! and `If-Match` and ignore them (s3rver, older MinIO, some Ceph gateways); `cas` there
//! lets two owners in. So before its first `cas` write to a store (scheme, bucket, endpoint,
//! options: one [`super::request::client::Client`]), a process checks, once, on a scratch key beside
//! the lock, in four requests: create-if-absent (must land), create-if-absent again (must
//! be refused), update-if-match with a version that never existed (must be refused), delete.
//! The verdict is kept for the process (a child made by fork keeps it).
//!
//! It cannot see writes that are checked and then made in two steps, which two racers can
//! both pass (moto's server); `blob-lock doctor --race` races clients to find those.

use super::lock_store::{Version, Write};
use super::request::answers::status_in;
use super::request::client::Facts;
use super::request::gate::Gate;
use crate::errors::{Error, Result};
use bytes::Bytes;
use object_store::path::Path;
use object_store::{PutMode, UpdateVersion};
use std::time::Instant;

/// What the probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Both conditional writes are refused when their condition fails.
    Honoured,
    /// The storage options said to trust the store (no probe was made).
    Trusted,
    /// A second create-if-absent landed: `If-None-Match` is ignored.
    CreateIgnored,
    /// An update with a version that never existed landed: `If-Match` is ignored.
    UpdateIgnored,
    /// The store or the client refuses conditional writes altogether.
    Unsupported,
    /// A create-if-absent of a key that did not exist was refused.
    CreateRefused,
}

impl Verdict {
    /// Whether `cas` is safe on the store.
    pub fn honoured(self) -> bool {
        matches!(self, Verdict::Honoured | Verdict::Trusted)
    }

    /// The failed check, in words.
    pub fn why(self) -> &'static str {
        match self {
            Verdict::Honoured => "conditional writes are honoured",
            Verdict::Trusted => "conditional writes are trusted (blob_lock_conditional_writes=trust)",
            Verdict::CreateIgnored => "create-if-absent (If-None-Match: *) is ignored: a second create of a scratch key overwrote it",
            Verdict::UpdateIgnored => "update-if-match (If-Match) is ignored: an update with a version that never existed overwrote a scratch key",
            Verdict::Unsupported => "the store (or its client configuration, such as aws_conditional_put=disabled) does not support conditional writes",
            Verdict::CreateRefused => "create-if-absent was refused on a scratch key that did not exist",
        }
    }

    fn code(self) -> u8 {
        self as u8 + 1
    }

    fn of(code: u8) -> Option<Verdict> {
        [
            Verdict::Honoured,
            Verdict::Trusted,
            Verdict::CreateIgnored,
            Verdict::UpdateIgnored,
            Verdict::Unsupported,
            Verdict::CreateRefused,
        ]
        .into_iter()
        .find(|v| v.code() == code)
    }
}

/// The verdict for the store behind `gate`: known, trusted, or probed now in the folder of
/// the object `beside` (a lockfile, or the object `write_once` publishes).
pub(crate) async fn verdict(gate: &Gate, beside: &Path) -> Result<Verdict> {
    let client = &gate.client;
    if client.trusted() {
        return Ok(Verdict::Trusted);
    }
    let known = |facts: &Facts| Verdict::of(facts.verdict_code());
    let probed = async {
        let began = Instant::now();
        let v = probe(gate, beside).await?;
        log::debug!(
            "{}: conditional writes probed in {:.1} ms: {}",
            client.name(),
            began.elapsed().as_secs_f64() * 1000.0,
            v.why()
        );
        Ok(v)
    };
    client
        .known_or_probed(known, probed, |facts, v| facts.set_verdict_code(v.code()))
        .await
}

/// See [`super::lock_store::LockStore::conditional_writes`].
pub(crate) async fn conditional_writes(gate: &Gate, beside: &Path, required: bool) -> Result<bool> {
    let v = verdict(gate, beside).await?;
    if v.honoured() {
        return Ok(true);
    }
    if required {
        return Err(Error::UnsafeStore {
            uri: gate.lock_uri(),
            check: v.why().to_string(),
        });
    }
    if gate.client.facts().first_warning() {
        log::warn!(
            "{}: {}, so cas could let two owners in; protocol \"auto\" uses lww on this store, which is best effort (see docs/guarantees.md). To silence this warning pass protocol=\"lww\"; if `blob-lock doctor --race` finds the store safe, set the storage option blob_lock_conditional_writes=trust",
            gate.client.name(),
            v.why()
        );
    }
    Ok(false)
}

/// See [`super::lock_store::LockStore::known_conditional_writes`].
pub(crate) fn known_conditional_writes(gate: &Gate) -> Option<bool> {
    if gate.client.trusted() {
        return Some(true);
    }
    Some(Verdict::of(gate.client.facts().verdict_code())?.honoured())
}

/// A scratch object's path in the folder of `beside`.
fn scratch_beside(beside: &Path) -> Path {
    let parts: Vec<_> = beside.parts().collect();
    let dir = Path::from_iter(parts[..parts.len().saturating_sub(1)].iter().cloned());
    dir.join(format!(
        ".blob-lock-probe-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..16]
    ))
}

/// See [`super::lock_store::LockStore::conditional_deletes`]: known, or probed now beside `beside`
/// (create a scratch object, delete it at a version it does not have, then at its own).
pub(crate) async fn conditional_deletes(
    gate: &Gate,
    beside: &Path,
) -> std::result::Result<(), String> {
    let client = &gate.client;
    if client.parts().is_none() {
        return Err(format!("{} has no conditional delete", client.name()));
    }
    let probed = async {
        let honoured = probe_deletes(gate, beside).await.map_err(|e| {
            format!(
                "{}: a conditional delete could not be sent: {e}",
                client.name()
            )
        })?;
        log::debug!(
            "{}: conditional deletes honoured: {honoured}",
            client.name()
        );
        Ok::<_, String>(honoured)
    };
    let honoured = client
        .known_or_probed(Facts::conditional_deletes, probed, |facts, honoured| {
            facts.set_conditional_deletes(*honoured)
        })
        .await?;
    match honoured {
        true => Ok(()),
        false => Err(format!(
            "{} ignores the condition of a conditional delete (a probe's delete at a version its object did not have deleted it)",
            client.name()
        )),
    }
}

async fn probe_deletes(gate: &Gate, beside: &Path) -> Result<bool> {
    let scratch = scratch_beside(beside);
    let body = Bytes::from_static(b"{\"blob_lock_probe\": \"delete\"}");
    let Write::Done(created) = gate.put_at(&scratch, body, PutMode::Create).await? else {
        return Ok(false); // a fresh name taken: nothing here is to be trusted
    };
    let honoured = async {
        if gate.delete_at_if(&scratch, &never(&created)).await? {
            return Ok(false);
        }
        // Refused; and at its own version it goes.
        gate.delete_at_if(&scratch, &created).await
    }
    .await;
    if !matches!(honoured, Ok(true)) {
        if let Err(e) = gate.delete_at(&scratch).await {
            log::warn!(
                "{}: cannot delete the scratch object {scratch} of the conditional-delete probe: {e}",
                gate.client.name()
            );
        }
    }
    honoured
}

/// A version the object at `created` does not have: an ETag no store gives, and a
/// generation other than its own (GCS's are timestamps, but a counter that starts at 1, as
/// in a test server, could give a scratch object generation 1).
fn never(created: &Version) -> Version {
    let generation = match created.version.as_deref().map(str::parse::<u64>) {
        Some(Ok(g)) => g.wrapping_add(1),
        _ => 1,
    };
    Version {
        e_tag: Some("\"00000000000000000000000000000000\"".into()),
        version: Some(generation.to_string()),
    }
}

/// The four requests (see the module doc).
async fn probe(gate: &Gate, beside: &Path) -> Result<Verdict> {
    let scratch = scratch_beside(beside);
    let body = |n: u8| Bytes::from(format!("{{\"blob_lock_probe\": {n}}}"));
    let first = gate.put_at(&scratch, body(1), PutMode::Create).await;
    let verdict = match first {
        Ok(Write::Conflict { resent: false }) => Ok(Verdict::CreateRefused),
        // Sent again after its connection failed: the conflict may be with our own first
        // send, which landed. The scratch name is fresh, so whatever is there is ours.
        Ok(Write::Conflict { resent: true }) => match gate.head_at(&scratch).await {
            Ok(Some(created)) => second_and_third(gate, &scratch, &created, body).await,
            Ok(None) => Ok(Verdict::CreateRefused),
            Err(e) => Err(e),
        },
        Ok(Write::Done(created)) => second_and_third(gate, &scratch, &created, body).await,
        Err(Error::Store { message, .. }) if unsupported(&message) => Ok(Verdict::Unsupported),
        Err(e) => {
            // The create may have landed before it failed: removed in the background, so
            // that the error is reported now.
            let gate = gate.clone();
            crate::owed::spawn(async move {
                if let Err(e) = gate.delete_at(&scratch).await {
                    log::debug!("{}: scratch object {scratch} not deleted: {e}", gate.uri);
                }
            });
            return Err(e);
        }
    };
    if let Err(e) = gate.delete_at(&scratch).await {
        log::warn!(
            "{}: cannot delete the scratch object {scratch} of the conditional-write probe: {e} (grant delete permission, or set the storage option blob_lock_conditional_writes=trust to skip the probe)",
            gate.client.name()
        );
    }
    verdict
}

async fn second_and_third(
    gate: &Gate,
    scratch: &Path,
    created: &Version,
    body: impl Fn(u8) -> Bytes,
) -> Result<Verdict> {
    if let Write::Done(_) = gate.put_at(scratch, body(2), PutMode::Create).await? {
        return Ok(Verdict::CreateIgnored);
    }
    let never = never(created);
    let never = UpdateVersion {
        e_tag: never.e_tag,
        version: never.version,
    };
    match gate.put_at(scratch, body(3), PutMode::Update(never)).await {
        Ok(Write::Done(_)) => Ok(Verdict::UpdateIgnored),
        Ok(Write::Conflict { .. }) => Ok(Verdict::Honoured),
        Err(Error::Store { message, .. }) if unsupported(&message) => Ok(Verdict::Unsupported),
        Err(e) => Err(e),
    }
}

/// object_store's NotImplemented (conditional puts disabled), or a store's 501.
fn unsupported(message: &str) -> bool {
    message.contains("NotImplemented")
        || message.contains("not yet implemented")
        || status_in(message) == Some(501)
}
