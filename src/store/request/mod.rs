//! What happens to a request to an object store, in the order it happens: the store's one
//! client in this process ([`client`]), the [`gate`] (credentials made ready, a pass of the
//! store's load taken, `store/load/`, a timeout that follows the store's latency, a dropped
//! connection resent, a throttle tried again, a panic caught by [`guarded`]), and what the
//! answer meant (`answers.rs`, `transport.rs`). [`counted`] counts the requests a lockfile's
//! store makes.

pub(crate) mod answers;
pub mod client;
pub mod counted;
pub mod gate;
pub mod guarded;
pub(crate) mod transport;

pub use counted::{Counted, Requests};
