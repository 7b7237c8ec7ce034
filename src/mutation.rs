//! Seeded bugs, for the model check (tests/model.rs): with the `mutations` feature a test
//! switches one on, and the exhaustive explorer must find a schedule that breaks a
//! property. Per thread: a simulated world runs on its test's thread (a current-thread
//! runtime), so tests side by side seed nothing into each other. Without the feature
//! `active` is a constant false, and each seeded branch compiles away.

/// The bugs that can be seeded, each at one place in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// A renewal takes a lockfile written by another owner for its own
    /// (`Engine::still_ours`).
    AdoptForeignWrite = 1,
    /// A waiter judges a lock expired after half its lifetime (`Engine::judge`).
    ExpireAtHalf,
    /// A cas acquisition whose update came back as a conflict counts as acquired.
    ConflictAsSuccess,
    /// A waiter ignores the launch grace of a hand-off and waits `expire` only.
    IgnoreGrace,
    /// A cas acquisition writes the token it found instead of one more.
    TokenNotIncremented,
}

impl Mutation {
    /// Every seeded bug.
    pub const ALL: [Mutation; 5] = [
        Mutation::AdoptForeignWrite,
        Mutation::ExpireAtHalf,
        Mutation::ConflictAsSuccess,
        Mutation::IgnoreGrace,
        Mutation::TokenNotIncremented,
    ];
}

#[cfg(feature = "mutations")]
thread_local! {
    static ACTIVE: std::cell::Cell<u8> = const { std::cell::Cell::new(0) };
}

/// Seeds `mutation` (None: the code as written) on this thread.
#[cfg(feature = "mutations")]
pub fn seed(mutation: Option<Mutation>) {
    ACTIVE.with(|a| a.set(mutation.map_or(0, |m| m as u8)));
}

/// Whether `mutation` is seeded.
#[inline(always)]
pub fn active(mutation: Mutation) -> bool {
    #[cfg(feature = "mutations")]
    {
        ACTIVE.with(|a| a.get()) == mutation as u8
    }
    #[cfg(not(feature = "mutations"))]
    {
        let _ = mutation;
        false
    }
}
