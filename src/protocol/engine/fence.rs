//! How an acquisition picks its fencing token: one more than the lockfile's, and at least
//! its writer's wall clock in microseconds, so that tokens only grow across a deleted
//! lockfile too ([`crate::lockfile::token`]).

use super::Engine;
use crate::lockfile::LockFile;
use crate::protocol::acquisition::{Acquisition, OurWrite};

/// How an acquisition picks its fencing token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Fence {
    /// One more than the lockfile's, and at least the wall clock's floor.
    #[default]
    Floor,
    /// One more than the lockfile's: prune's own acquisition, whose token must stay just
    /// above the listed one it judged old enough to delete.
    Counted,
}

impl Engine {
    /// The token an acquisition writes over `found` (the lockfile it takes over, or none):
    /// one more, and at least the wall clock's floor ([`crate::lockfile::token`]); counted
    /// only, from the floor when `found` has no token, for prune's own acquisition.
    pub(in crate::protocol) fn next_token(&self, found: Option<&LockFile>) -> u64 {
        let after = found.map_or(0, |lf| lf.token);
        if after == 0 && crate::mutation::active(crate::mutation::Mutation::TokenRestartsAtOne) {
            return 1;
        }
        match (self.fence, after) {
            (Fence::Counted, 1..) => after.saturating_add(1),
            _ => crate::lockfile::token::next_token(after, self.clock.wall()),
        }
    }

    /// A token of ours found landed by a read, raised to the floor for its confirmation: a
    /// write unanswered for longer than its request's time may have landed after a delete,
    /// and the deleted lockfile's tokens be larger than the floor it was sent with.
    /// (Under `lww`, whose renewal writes only over a lockfile with our token, unchanged.)
    pub(crate) fn refloor(&self, token: u64) -> u64 {
        match self.fence {
            Fence::Floor if self.protocol.steps().conditional() => {
                token.max(crate::lockfile::token::floor(self.clock.wall()))
            }
            _ => token,
        }
    }

    /// [`Engine::refloor`]s `ours` before the renewal that confirms it, and notes the raised
    /// token among `acquisition`'s writes of unknown outcome: should that renewal land
    /// unanswered, the next attempt's read then finds the lockfile ours, not another holder's
    /// to wait out for a whole lifetime.
    pub(crate) fn raise_to_confirm(&self, ours: &mut OurWrite, acquisition: &mut Acquisition) {
        ours.body.token = self.refloor(ours.token());
        if !crate::mutation::active(crate::mutation::Mutation::RaisedTokenNotNoted) {
            acquisition.note(ours.token(), self.clock.now());
        }
    }
}
