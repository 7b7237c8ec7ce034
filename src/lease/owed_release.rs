//! What an interrupted acquisition owes: a write it abandoned may still land, so the lock is
//! released in the background after the store has quiesced, and the next acquisition on the
//! same object waits for that ([`crate::owed`]).

use super::{Lease, Lock};
use crate::owed::Debt;
use std::sync::Arc;

/// A release owed by an interrupted acquisition ([`Lock::owe_cleanup`]): run in the
/// background by [`Cleanup::give_back`] or [`Cleanup::release_unheld`], or when dropped.
#[derive(Debug)]
pub struct Cleanup {
    pub(super) lock: Lock,
    pub(super) debt: Option<Debt>,
}

impl Cleanup {
    /// Releases `lease` (an acquisition that ended after nobody waited for it any more).
    pub fn give_back(mut self, lease: Arc<Lease>) {
        let (lock, debt) = (self.lock.clone(), self.debt.take());
        crate::owed::spawn(async move {
            if let Err(e) = lease.release().await {
                log::warn!(
                    "{}: release after a cancelled acquisition failed: {e}",
                    lock.uri()
                );
                lock.leave_unreleased(&lease).await;
            }
            drop(debt);
        });
    }

    /// Releases whatever the lockfile shows for this lock's owner.
    pub fn release_unheld(self) {
        drop(self);
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Some(debt) = self.debt.take() else { return };
        let lock = self.lock.clone();
        crate::owed::spawn(async move {
            lock.store().quiesced().await;
            if let Err(e) = lock.release_unheld().await {
                log::warn!(
                    "{}: release after an interrupted acquisition failed: {e}",
                    lock.uri()
                );
            }
            drop(debt);
        });
    }
}
