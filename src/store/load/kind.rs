//! What a request is, for the order in which requests get passes, and where each kind
//! stands in the queue.

use super::queue::Rank;
use tokio::time::Instant;

/// What a request is, for the order in which requests get passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A renewal of a held lease, which is lost if it does not land by `deadline`.
    Renewal {
        /// The lease's deadline.
        deadline: Instant,
    },
    /// A release. Of a held lease (its `deadline`), it goes with the renewals, by that
    /// deadline: it ends the lease's renewals, so it lightens the store's load. Without a
    /// lease (what an interrupted acquisition may have written), after the renewals.
    Release {
        /// The deadline of the lease released, if there is one.
        deadline: Option<Instant>,
    },
    /// Anything else: acquisitions, reads from outside, listings, probes.
    Other,
}

/// Where a request of `kind` stands in the queue.
pub(super) fn rank_of(kind: Kind) -> Rank {
    match kind {
        Kind::Renewal { deadline } => Rank::Renewal(deadline),
        Kind::Release { deadline: Some(d) } => Rank::LeaseRelease(d),
        Kind::Release { deadline: None } => Rank::Release,
        Kind::Other => Rank::Other,
    }
}
