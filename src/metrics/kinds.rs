//! What the metrics count by: store requests by kind and outcome, acquisitions by how they
//! ended, each with the name `stats()` and the exporters show. Losses are counted by their
//! cause, [`crate::errors::LossCause`], which names itself the same way.

/// A store request made by the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// A read of the lockfile.
    Read,
    /// A create-if-absent write.
    Create,
    /// An update-if-match write.
    Update,
    /// An unconditional write (lww, and breaks on lww stores).
    Overwrite,
}

impl Request {
    /// Every kind, in the order of [`super::Snapshot::requests`].
    pub const ALL: [Request; 4] = [
        Request::Read,
        Request::Create,
        Request::Update,
        Request::Overwrite,
    ];

    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Request::Read => "read",
            Request::Create => "create",
            Request::Update => "update",
            Request::Overwrite => "overwrite",
        }
    }
}

/// How a store request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It did what was asked.
    Ok,
    /// A conditional write whose condition failed.
    Conflict,
    /// A read that found no lockfile.
    NotFound,
    /// An error (the store's or the network's).
    Error,
}

impl Outcome {
    /// Every outcome, in the order of [`super::Snapshot::requests`].
    pub const ALL: [Outcome; 4] = [
        Outcome::Ok,
        Outcome::Conflict,
        Outcome::NotFound,
        Outcome::Error,
    ];

    /// The outcome's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Conflict => "conflict",
            Outcome::NotFound => "not_found",
            Outcome::Error => "error",
        }
    }
}

/// The outcome a request's result shows.
pub trait Outcomes {
    /// The outcome.
    fn outcome(&self) -> Outcome;
}

/// How an acquisition ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acquired {
    /// The lock is ours.
    Acquired,
    /// One attempt (`try_acquire`) found it held.
    Busy,
    /// The timeout passed first.
    TimedOut,
    /// An error ended it.
    Failed,
    /// It was refused without a request: the store was saturated
    /// ([`crate::Error::Saturated`]).
    Saturated,
}

impl Acquired {
    /// Every ending, in the order of [`super::Snapshot::acquisitions`].
    pub const ALL: [Acquired; 5] = [
        Acquired::Acquired,
        Acquired::Busy,
        Acquired::TimedOut,
        Acquired::Failed,
        Acquired::Saturated,
    ];

    /// The ending's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Acquired::Acquired => "acquired",
            Acquired::Busy => "busy",
            Acquired::TimedOut => "timed_out",
            Acquired::Failed => "failed",
            Acquired::Saturated => "saturated",
        }
    }
}
