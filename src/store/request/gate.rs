//! The gate every request to an object_store store goes through: a pass of the store's
//! [`Load`](crate::store::load::Load) first (renewals ahead of the rest), a timeout that follows
//! the store's latency, a request whose connection closed under it sent again at once, a
//! throttling answer tried again after a short pause (three tries in all, as the clouds'
//! SDKs make, each throttle slowing the whole process down), a panic inside object_store
//! turned into an error, and the store's answers noted, so that a store that has never
//! answered this process fails at once instead of being waited for. What an answer means
//! is `answers.rs` and `transport.rs`. object_store itself retries nothing (`store/cloud/`): this is
//! the one place a request is tried again.

use super::answers::{
    answered_by_store, missing_bucket, names_a_missing_bucket, store_error, throttling,
};
use super::client::{Client, Deleted};
use super::guarded::Guarded;
use super::transport::{dropped_connection, resendable};
use crate::errors::{Error, Result, StoreErrorKind};
use crate::store::load::{self, Ending, TooLate};
use crate::store::lock_store::{Version, Write};
use crate::timing::Timing;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How long one request may take: never less than `floor` (the lock's request timeout),
/// longer when the store's latency asks for it, never longer than `ceiling` (what a lease
/// can afford: a write that lands later cannot be claimed) nor, for a renewal, its lease's
/// deadline.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// The least time a request is given.
    pub floor: Duration,
    /// The most.
    pub ceiling: Duration,
}

impl Timeouts {
    /// The timeouts of a lock's requests.
    pub fn of(timing: &Timing) -> Timeouts {
        Timeouts {
            floor: timing.request_timeout(),
            ceiling: timing.longest_request(),
        }
    }

    /// A request of its own kind (a listing, a result): `floor`, up to four times as long
    /// on a slow store.
    pub fn at_least(floor: Duration) -> Timeouts {
        Timeouts {
            floor,
            ceiling: floor * 4,
        }
    }
}

/// Requests to one store on behalf of one lock.
#[derive(Clone)]
pub struct Gate {
    pub(crate) client: Arc<Client>,
    /// The lockfile's URI, for messages (shared with the lock as its identity, where equal).
    pub(crate) uri: Arc<str>,
    timeouts: Timeouts,
}

/// Why a call failed: an object_store error for the caller to read (a conflict, a missing
/// object), or one of ours already decided.
pub(crate) enum Failure {
    Store(object_store::Error),
    Ours(Error),
}

impl Gate {
    /// Requests to `client`'s store for the lockfile `uri`, each bounded by `timeouts`.
    pub fn new(client: Arc<Client>, uri: String, timeouts: Timeouts) -> Gate {
        Gate {
            client,
            uri: uri.into(),
            timeouts,
        }
    }

    /// The lock's URI (without `/lock.json`), for messages.
    pub(crate) fn lock_uri(&self) -> String {
        let suffix = format!("/{}", crate::lockfile::LOCKFILE_NAME);
        self.uri
            .strip_suffix(&suffix)
            .unwrap_or(&self.uri)
            .to_string()
    }

    /// Runs the request `make` makes through the gate (see the module doc); it may make it
    /// twice, when a connection closed under the first.
    pub(crate) async fn call<T, F>(
        &self,
        during: &str,
        make: impl FnMut() -> F,
    ) -> std::result::Result<T, Failure>
    where
        F: Future<Output = object_store::Result<T>> + Send,
    {
        self.send(during, make, true, &mut false).await
    }

    /// [`Gate::call`], also saying whether the request was sent more than once.
    async fn call_resending<T, F>(
        &self,
        during: &str,
        make: impl FnMut() -> F,
    ) -> (std::result::Result<T, Failure>, bool)
    where
        F: Future<Output = object_store::Result<T>> + Send,
    {
        let mut resent = false;
        let result = self.send(during, make, true, &mut resent).await;
        (result, resent)
    }

    /// Runs one request through the gate, never twice (the next item of a listing).
    pub(crate) async fn call_once<T>(
        &self,
        during: &str,
        request: impl Future<Output = object_store::Result<T>> + Send,
    ) -> std::result::Result<T, Failure> {
        let mut once = Some(request);
        // `send` makes it once when told not to try again.
        let make = move || once.take().expect("a call_once request is made once");
        self.send(during, make, false, &mut false).await
    }

    async fn send<T, F>(
        &self,
        during: &str,
        mut make: impl FnMut() -> F,
        again: bool,
        resent_any: &mut bool,
    ) -> std::result::Result<T, Failure>
    where
        F: Future<Output = object_store::Result<T>> + Send,
    {
        let Some(load) = self.client.load() else {
            return make().await.map_err(Failure::Store); // memory: no network to guard
        };
        let facts = self.client.facts();
        // Credentials first, under their own bound: a slow token endpoint is not a store
        // that does not answer, and what failed is named as such.
        if let Some(parts) = self.client.parts() {
            if let Err(message) = parts.ready().await {
                return Err(Failure::Ours(Error::Credentials {
                    uri: self.uri.to_string(),
                    message,
                }));
            }
        }
        // The wait for a pass is this process's own queue, not the store's answer: it is
        // bounded by the callers' deadlines (an acquisition's timeout, a lease's), and only
        // the request itself by its timeout.
        let Timeouts { floor, ceiling } = self.timeouts;
        let kind = load::current_kind();
        let reserved = load.reserved();
        let pass = match reserved {
            Some(pass) => pass,
            None => match load.enter(kind, floor, ceiling).await {
                Ok(pass) => pass,
                Err(TooLate(message)) => {
                    return Err(Failure::Ours(Error::Saturated {
                        uri: self.uri.to_string(),
                        message,
                    }))
                }
            },
        };
        let mut pass = pass;
        let timeout = pass.timeout();
        let give_up = tokio::time::Instant::now() + timeout;
        let (mut resent, mut throttled) = (0, 0);
        let e = loop {
            let attempt = tokio::time::timeout_at(give_up, Guarded(Box::pin(make())));
            match attempt.await {
                Ok(Ok(Ok(value))) => {
                    facts.mark_answered();
                    pass.end(Ending::Answered);
                    return Ok(value);
                }
                Ok(Ok(Err(e))) if self.credentials_failure(&e).is_some() => {
                    pass.end(Ending::Unanswered);
                    let message = self.credentials_failure(&e).unwrap_or_default();
                    return Err(Failure::Ours(Error::Credentials {
                        uri: self.uri.to_string(),
                        message,
                    }));
                }
                Ok(Ok(Err(e))) if answered_by_store(&e) => {
                    facts.mark_answered();
                    if !throttling(&e) {
                        pass.end(Ending::Answered);
                        return Err(Failure::Store(e));
                    }
                    pass.note(Ending::Throttled);
                    // Tried again after a pause that doubles (jittered), while the request
                    // has time left; a write that landed all the same is resolved by the
                    // protocol.
                    let pause = THROTTLED_PAUSE.mul_f64((1 << throttled) as f64 * jitter());
                    let time_left = give_up.saturating_duration_since(tokio::time::Instant::now());
                    if !again || throttled + 1 >= TRIES || time_left <= pause * 2 {
                        pass.end(Ending::Throttled);
                        return Err(Failure::Store(e));
                    }
                    throttled += 1;
                    tokio::time::sleep(pause).await;
                    pass.resend();
                    *resent_any = true;
                }
                // A connection the pool kept, closed by the store under this request (or
                // one not made at all): again at once, as object_store's own retries did (a
                // write that landed all the same is resolved by the protocol).
                Ok(Ok(Err(e)))
                    if again && resent < RESENDS && facts.answered() && resendable(&e) =>
                {
                    resent += 1;
                    pass.resend();
                    *resent_any = true;
                }
                Ok(Ok(Err(e))) => break e,
                Ok(Err(panic)) => {
                    pass.end(Ending::Unanswered);
                    return Err(Failure::Ours(Error::Store {
                        uri: self.uri.to_string(),
                        message: format!(
                            "{during} failed: object_store could not make the request ({panic}); check the endpoint and the storage options of {}",
                            self.client.name()
                        ),
                        kind: StoreErrorKind::Permanent,
                    }));
                }
                Err(_elapsed) => {
                    pass.end(Ending::TimedOut);
                    let timed_out = Error::Store {
                        uri: self.uri.to_string(),
                        message: format!(
                            "{during} failed: no answer within {:.1}s",
                            timeout.as_secs_f64()
                        ),
                        kind: StoreErrorKind::Transient,
                    };
                    return Err(Failure::Ours(if facts.answered() {
                        timed_out
                    } else {
                        self.unreachable(timed_out)
                    }));
                }
            }
        };
        pass.end(Ending::Unanswered);
        if facts.answered() {
            return Err(Failure::Store(e));
        }
        // A connection accepted and then dropped: something listens, perhaps behind a
        // flaky path. Retried a few times (as transient) before failing fast.
        let dropped = dropped_connection(&e);
        let known = store_error(&self.uri, e, during, &self.client.credentials_source());
        if dropped && facts.forgive_drop() {
            return Err(Failure::Ours(known));
        }
        Err(Failure::Ours(self.unreachable(known)))
    }

    /// `failed` as the failure of a store that has never answered this process: permanent,
    /// so that a typo in an endpoint fails at once instead of being waited for.
    fn unreachable(&self, failed: Error) -> Error {
        let message = match failed {
            Error::Store { message, .. } => message,
            other => other.to_string(),
        };
        Error::Store {
            uri: self.uri.to_string(),
            message: format!(
                "{message}; {} has not answered this process yet, so blob-lock does not wait for it: check the endpoint, the network and the credentials",
                self.client.name()
            ),
            kind: StoreErrorKind::Permanent,
        }
    }

    /// Takes a pass of the store's load for the task's next request now (see
    /// [`load::Load::reserve`]): what a write stamped with the time it leaves waits for first.
    pub(crate) async fn reserve(&self) -> Result<()> {
        let Some(load) = self.client.load() else {
            return Ok(()); // memory: no load to wait for
        };
        let Timeouts { floor, ceiling } = self.timeouts;
        load.reserve(floor, ceiling)
            .await
            .map_err(|TooLate(message)| Error::Saturated {
                uri: self.uri.to_string(),
                message,
            })
    }

    /// Turns a failure into our error, deciding whether a retry can help.
    pub(crate) fn error(&self, failure: Failure, during: &str) -> Error {
        match failure {
            Failure::Ours(e) => e,
            Failure::Store(e) => {
                store_error(&self.uri, e, during, &self.client.credentials_source())
            }
        }
    }

    pub(crate) async fn put_at(&self, path: &Path, body: Bytes, mode: PutMode) -> Result<Write> {
        let store = self.client.store();
        let put = || {
            let opts = PutOptions {
                mode: mode.clone(),
                ..Default::default()
            };
            store.put_opts(path, PutPayload::from(body.clone()), opts)
        };
        let (result, resent) = self.call_resending("writing", put).await;
        match result {
            Ok(r) => Ok(Write::Done(Version {
                e_tag: r.e_tag,
                version: r.version,
            })),
            Err(Failure::Store(object_store::Error::AlreadyExists { .. }))
            | Err(Failure::Store(object_store::Error::Precondition { .. })) => {
                Ok(Write::Conflict { resent })
            }
            Err(Failure::Store(object_store::Error::NotFound { source, .. })) => {
                let msg = source.to_string();
                let what = names_a_missing_bucket(&msg)
                    .unwrap_or("the bucket or container does not exist");
                Err(missing_bucket(&self.uri, what, &msg))
            }
            Err(failure) => Err(self.error(failure, "writing")),
        }
    }

    /// A failed fetch of the client's credentials inside `e`, if that is what failed.
    fn credentials_failure(&self, e: &object_store::Error) -> Option<String> {
        self.client.parts()?.credentials_failure(e)
    }

    /// Deletes `path` if it is still at `expected` (see [`super::client::CloudParts::delete_if`]): true
    /// if it did.
    pub(crate) async fn delete_at_if(&self, path: &Path, expected: &Version) -> Result<bool> {
        let Some(parts) = self.client.parts() else {
            return Err(Error::InvalidArgument(format!(
                "{} has no conditional delete",
                self.client.name()
            )));
        };
        // The signed URL outlives no request timeout by much: held up longer, the store
        // refuses it by its own clock too.
        let valid_for = Duration::from_secs(60);
        let delete = || parts.delete_if(path, expected, valid_for);
        match self.call_resending("deleting", delete).await {
            (Ok(Deleted::Yes), _) => Ok(true),
            // Sent again after its connection failed: an earlier send may have deleted it,
            // and this one found it gone. Gone is what the caller asked for.
            (Ok(Deleted::Changed), true) => Ok(self.head_at(path).await?.is_none()),
            (Ok(Deleted::Changed), false) => Ok(false),
            (Err(failure), _) => Err(self.error(failure, "deleting")),
        }
    }

    /// The version of the object at `path`, if there is one.
    pub(crate) async fn head_at(&self, path: &Path) -> Result<Option<Version>> {
        let store = self.client.store();
        match self.call("reading", || store.head(path)).await {
            Ok(meta) => Ok(Some(Version {
                e_tag: meta.e_tag,
                version: meta.version,
            })),
            Err(Failure::Store(object_store::Error::NotFound { .. })) => Ok(None),
            Err(failure) => Err(self.error(failure, "reading")),
        }
    }

    pub(crate) async fn delete_at(&self, path: &Path) -> Result<()> {
        let store = self.client.store();
        match self.call("deleting", || store.delete(path)).await {
            Ok(()) | Err(Failure::Store(object_store::Error::NotFound { .. })) => Ok(()),
            Err(failure) => Err(self.error(failure, "deleting")),
        }
    }
}

/// Tries of a request the store answers with a throttling answer.
const TRIES: u32 = 3;
/// The pause before the second try; it doubles before the third.
const THROTTLED_PAUSE: Duration = Duration::from_millis(50);
/// Sends of a request again at once when its connection failed before an answer (the
/// connection pool may hold several the store closed).
const RESENDS: u32 = 3;

/// A factor between 0.5 and 1.5, so that requests throttled together do not come back
/// together.
fn jitter() -> f64 {
    0.5 + rand::random::<f64>()
}
