//! What a remote calls: keeps its orchestrator's lease alive as a co-owner.

use super::retry::with_retries;
use super::{Lease, LockOptions};
use crate::errors::{Error, Result};
use crate::lease::lifecycle::{Lifecycle, State};
use crate::protocol::{Engine, OurWrite, Protocol, REMOTE};
use crate::store::{self, LockStore};
use std::sync::Arc;

/// What the remote calls: keeps the lease of `owner` alive as a co-owner until stopped.
/// `Error::NotFound` when there is no lockfile, `Error::Stolen` when it names another owner
/// or is released. Never releases.
pub async fn keep_alive(uri: &str, owner: &str, options: &LockOptions) -> Result<Lease> {
    let store = store::open(uri, &options.store, &options.timing)?;
    let (mut engine, ours, lifecycle) = adopt(store, owner, options).await?;
    // Requests are bounded by the lock's own schedule, which only the lockfile told us.
    if engine.timing.request_timeout() != options.timing.request_timeout() {
        engine.store = store::open(uri, &options.store, &engine.timing)?;
    }
    Ok(remote_lease(engine, ours, lifecycle, options))
}

/// [`keep_alive`] on a given store.
pub async fn keep_alive_on(
    store: Arc<dyn LockStore>,
    owner: &str,
    options: &LockOptions,
) -> Result<Lease> {
    let (engine, ours, lifecycle) = adopt(store, owner, options).await?;
    Ok(remote_lease(engine, ours, lifecycle, options))
}

/// The remote's lease on what [`adopt`] took up, renewed as the remote's writes.
fn remote_lease(
    engine: Engine,
    ours: OurWrite,
    lifecycle: Arc<Lifecycle>,
    options: &LockOptions,
) -> Lease {
    Lease::start(
        Arc::new(engine),
        ours,
        true,
        options.on_lost.clone(),
        lifecycle,
    )
}

/// Takes up `owner`'s lock as a co-owner: the engine on the lock's own schedule, what it
/// holds, and its lifecycle.
async fn adopt(
    store: Arc<dyn LockStore>,
    owner: &str,
    options: &LockOptions,
) -> Result<(Engine, OurWrite, Arc<Lifecycle>)> {
    if owner.is_empty() || owner.contains('/') {
        return Err(Error::InvalidArgument(format!(
            "owner {owner:?} is not an owner id; pass the `owner` of the orchestrator's held lock"
        )));
    }
    let mut engine = options.engine(store);
    let lifecycle = Arc::new(Lifecycle::starting_in(
        engine.uri(),
        owner,
        State::Acquiring,
    ));
    // A remote starting during a store blip retries for a heartbeat before giving up.
    let until = engine.clock.now() + engine.timing.heartbeat;
    let adopted = with_retries(&engine, "keep_alive", until, || async {
        let protocol = Protocol::for_store(engine.store.as_ref(), options.protocol).await?;
        let engine = engine.with_protocol(protocol);
        Ok((engine.adopt(owner, Some(REMOTE)).await?, protocol))
    });
    let (ours, protocol) = match adopted.await.0 {
        Ok(adopted) => adopted,
        Err(e) => {
            lifecycle.enter(State::Failed, &e);
            return Err(e);
        }
    };
    engine.protocol = protocol;
    lifecycle.enter(
        State::Held,
        format_args!("kept alive, token {}", ours.token()),
    );
    // The remote renews on the orchestrator's schedule: the lockfile's expire_s, not ours.
    match engine.timing.with_expire(ours.body.expire_s) {
        Ok(timing) => engine.timing = Arc::new(timing),
        Err(e) => {
            let e = Error::InvalidArgument(format!(
                "the lock's expire_s ({}s, from its lockfile) does not fit the options given to keep_alive: {e}",
                ours.body.expire_s
            ));
            lifecycle.enter(State::Failed, &e);
            return Err(e);
        }
    }
    Ok((engine, ours, lifecycle))
}
