//! What a store is opened from, before any request: the lock URI ([`uri`]) and the table of
//! schemes ([`schemes`]), the options and credentials given ([`Access`], split by
//! [`options`]), and the environment read once ([`environment`]).

pub mod access;
#[cfg(feature = "cloud")]
pub mod credentials;
pub mod environment;
pub mod options;
pub mod schemes;
pub mod uri;

pub use access::Access;
pub use environment::Environment;
pub use schemes::{names_a_fixed_place, Cloud, StoreKind};
pub use uri::Location;
