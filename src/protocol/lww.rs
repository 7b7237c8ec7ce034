//! Last writer wins: for stores whose conditional writes cannot be trusted. Read, write
//! blindly, wait out any writer that read before us, and read again: whoever is there then
//! holds it. Best effort (the simulation counts how often two owners overlap).

use super::acquisition::{Acquisition, Attempt, OurWrite};
use super::engine::Engine;
use super::Steps;
use crate::errors::Result;
use crate::store::{Version, Write};
use async_trait::async_trait;
use bytes::Bytes;
use std::sync::Arc;

/// The lww protocol's steps.
pub(super) struct Lww;

#[async_trait]
impl Steps for Lww {
    fn conditional(&self) -> bool {
        false
    }

    async fn attempt(
        &self,
        engine: &Engine,
        owner: &Arc<str>,
        acquisition: &mut Acquisition,
    ) -> Result<Attempt> {
        let read_start = engine.clock.now();
        let current = engine.read().await?;
        let read_time = engine.clock.now() - read_start;
        let mut write_time = std::time::Duration::ZERO;
        let (token, start) = match current
            .as_ref()
            .and_then(|(lf, _)| acquisition.resolves(owner, lf).map(|s| (lf.token, s)))
        {
            // A write of ours from an earlier attempt landed: settle, then read it back.
            Some(resolved) => resolved,
            None => {
                if let Some((lf, snap)) =
                    current.as_ref().filter(|(lf, _)| *lf.writer_id != **owner)
                {
                    let now = engine.clock.now();
                    if let Some(busy) = engine.judge(lf, snap, now, acquisition) {
                        return Ok(busy);
                    }
                }
                let token = engine.next_token(current.as_ref().map(|(lf, _)| lf));
                engine.reserve().await?;
                let body = engine.body(owner, token);
                let start = engine.clock.now();
                acquisition.note(token, start);
                engine
                    .overwrite_lockfile(Bytes::from(body.encode()))
                    .await?;
                write_time = engine.clock.now() - start;
                (token, start)
            }
        };
        // Another writer that read before our write may still be about to write; wait for
        // the larger of the set margin and twice the round trips we measured, then look.
        let settle = engine.timing.lww_settle(read_time + write_time);
        engine.clock.sleep(settle).await;
        acquisition.watch = None;
        match engine.read().await? {
            Some((lf, snap))
                if *lf.writer_id == **owner && lf.token == token && !lf.is_released() =>
            {
                Ok(Attempt::Acquired(engine.our_write(
                    owner,
                    lf,
                    snap.version,
                    start,
                )))
            }
            other => Ok(Attempt::Busy {
                holder: other.map(|(lf, _)| lf),
                expires_in: None,
            }),
        }
    }

    /// One renewal: read, and overwrite only a lockfile that is still ours.
    async fn renew(
        &self,
        engine: &Engine,
        ours: &mut OurWrite,
        writer_name: Option<&str>,
    ) -> Result<()> {
        // mops writes blindly; we read first and stop if the owner changed.
        match engine.read().await? {
            Some((lf, snap)) if Engine::still_ours(ours, &lf) => {
                Engine::adopt_body(ours, lf, snap.version);
                engine.reserve().await?;
                let start = engine.clock.now();
                let body = ours.next_body(writer_name, start, engine.clock.wall());
                let version = engine
                    .overwrite_lockfile(Bytes::from(body.encode()))
                    .await?;
                ours.version.clone_from(&version);
                ours.body.clone_from(&body);
                ours.lease_start = start;
                Ok(())
            }
            other => Err(engine.not_ours(ours, other.as_ref().map(|(lf, _)| lf))),
        }
    }

    /// Blind: the caller has read that the lockfile is still ours; it never conflicts.
    async fn write_over(&self, engine: &Engine, body: Bytes, _version: &Version) -> Result<Write> {
        engine.overwrite_lockfile(body).await.map(Write::Done)
    }
}
