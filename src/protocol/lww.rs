//! Last writer wins: for stores whose conditional writes cannot be trusted. Read, write
//! blindly, wait out any writer that read before us, and read again: whoever is there then
//! holds it. Best effort (the simulation counts how often two owners overlap).

use super::engine::{Acquisition, Attempt, Engine, Held};
use crate::errors::Result;
use bytes::Bytes;

impl Engine {
    pub(super) async fn attempt_lww(
        &self,
        owner: &str,
        acquisition: &mut Acquisition,
    ) -> Result<Attempt> {
        let read_start = self.clock.now();
        let current = self.read().await?;
        let read_time = self.clock.now() - read_start;
        let mut write_time = std::time::Duration::ZERO;
        let (token, start) = match current
            .as_ref()
            .and_then(|(lf, _)| acquisition.settles(owner, lf).map(|s| (lf.token, s)))
        {
            // A write of ours from an earlier attempt landed: settle, then read it back.
            Some(settled) => settled,
            None => {
                let token = match &current {
                    None => 1,
                    Some((lf, snap)) => {
                        if lf.writer_id != owner {
                            let now = self.clock.now();
                            if let Some(busy) = self.judge(lf, snap, now, acquisition) {
                                return Ok(busy);
                            }
                        }
                        lf.token + 1
                    }
                };
                let body = self.body(owner, token);
                let start = self.clock.now();
                acquisition.note(token, start);
                self.overwrite_lockfile(Bytes::from(body.encode())).await?;
                write_time = self.clock.now() - start;
                (token, start)
            }
        };
        // Another writer that read before our write may still be about to write; wait for
        // the larger of the set margin and twice the round trips we measured, then look.
        let settle = self.timing.settle.max((read_time + write_time) * 2);
        self.clock.sleep(settle).await;
        acquisition.watch = None;
        match self.read().await? {
            Some((lf, snap)) if lf.writer_id == owner && lf.token == token && !lf.is_released() => {
                Ok(Attempt::Acquired(self.held(owner, lf, snap.version, start)))
            }
            other => Ok(Attempt::Busy {
                holder: other.map(|(lf, _)| lf),
                expires_in: None,
            }),
        }
    }

    /// One renewal: read, and overwrite only a lockfile that is still ours.
    pub(super) async fn renew_lww(&self, held: &mut Held, writer_name: Option<&str>) -> Result<()> {
        // mops writes blindly; we read first and stop if the owner changed.
        match self.read().await? {
            Some((lf, snap)) if Self::still_ours(held, &lf) => {
                Self::adopt_body(held, lf, snap.version);
                let start = self.clock.now();
                let body = held.next_body(writer_name, start, self.clock.wall());
                let version = self.overwrite_lockfile(Bytes::from(body.encode())).await?;
                held.version.clone_from(&version);
                held.body.clone_from(&body);
                held.lease_start = start;
                Ok(())
            }
            other => Err(super::engine::lost(
                self.uri(),
                Self::why_not_ours(held, other.as_ref().map(|(lf, _)| lf)),
            )),
        }
    }
}
