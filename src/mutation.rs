//! Seeded bugs, for the model check (tests/rust/model.rs): with the `mutations` feature a test
//! switches one on, and the exhaustive explorer must find a schedule that breaks a
//! property. Per thread: a simulated world runs on its test's thread (a current-thread
//! runtime), so tests side by side seed nothing into each other; or for a whole process from
//! the environment (`BLOB_LOCK_MUTATION`: the soak's mutant, tests/soak/). Without the feature
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
    /// An acquisition from the receipt of our own release writes the released token, not
    /// one more (src/protocol/cas/).
    ReceiptTokenReused,
    /// An acquisition from the receipt of our own release writes whatever the lockfile holds,
    /// not on the version in the receipt only.
    ReceiptUnconditional,
    /// An acquisition that guesses the lock is new creates it by writing over whatever is
    /// there, not only if absent.
    CreateFirstOverwrites,
    /// prune deletes the lockfile it took whatever it holds by then, not only at its own
    /// write's version (src/inventory.rs).
    PruneUnconditional,
    /// A fresh lockfile's first token is 1, not the wall clock's floor: after a delete
    /// (prune) tokens start again below those written before it (src/protocol/engine/).
    TokenRestartsAtOne,
    /// Every acquisition of one semaphore writes the same owner id, so that a slot another
    /// acquisition of the process holds is counted free: it reads as ours (src/semaphore/).
    SemaphoreSharedOwner,
    /// A semaphore uses the number of slots asked for, not the one stored.
    SemaphoreAskedNumber,
    /// A slot won is reported held without reading the stored number after its write: a
    /// waiter that read the number before it was lowered takes a slot above it.
    SemaphoreUncheckedSlot,
    /// A missing configuration is written again with the number asked for, even where slots
    /// were taken before (the number was lost, not never set).
    SemaphoreConfigRecreated,
    /// An unreadable configuration is written over with the number asked for.
    SemaphoreConfigReplaced,
    /// The first configuration is written over whatever is there, not only if absent: two
    /// first-comers asking different numbers each use their own.
    SemaphoreConfigOverwritten,
    /// A configuration found missing and then a slot taken is called lost without reading
    /// it again: a first-comer refuses because another wrote both meanwhile.
    SemaphoreLostUnread,
    /// A write of ours confirmed with a token raised to the floor (a write found landed by
    /// a read, or acknowledged too late to hold) is not noted among the acquisition's writes
    /// of unknown outcome: when that renewal lands unanswered, the next attempt takes its
    /// own lockfile for another holder's and waits out its lifetime (src/protocol/engine/).
    RaisedTokenNotNoted,
    /// A semaphore's configuration write (`set_slots`) retries a refused update without
    /// bound or pause: on a store that refuses every conditional update it never returns
    /// (src/semaphore/config.rs).
    ConfigWriteUnbounded,
}

impl Mutation {
    /// Every seeded bug.
    pub const ALL: [Mutation; 19] = [
        Mutation::AdoptForeignWrite,
        Mutation::ExpireAtHalf,
        Mutation::ConflictAsSuccess,
        Mutation::IgnoreGrace,
        Mutation::TokenNotIncremented,
        Mutation::ReceiptTokenReused,
        Mutation::ReceiptUnconditional,
        Mutation::CreateFirstOverwrites,
        Mutation::PruneUnconditional,
        Mutation::TokenRestartsAtOne,
        Mutation::SemaphoreSharedOwner,
        Mutation::SemaphoreAskedNumber,
        Mutation::SemaphoreUncheckedSlot,
        Mutation::SemaphoreConfigRecreated,
        Mutation::SemaphoreConfigReplaced,
        Mutation::SemaphoreConfigOverwritten,
        Mutation::SemaphoreLostUnread,
        Mutation::RaisedTokenNotNoted,
        Mutation::ConfigWriteUnbounded,
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

/// The bug seeded for the whole process by the environment: `BLOB_LOCK_MUTATION` names one
/// (`ConflictAsSuccess`), read once. How the soak (tests/soak/) seeds a bug into the Python
/// extension, whose requests run on the runtime's threads, where nothing calls `seed`. A
/// name that is no seeded bug ends the process, naming them: a soak that ran the code as
/// written instead would pass, and prove nothing.
#[cfg(feature = "mutations")]
fn from_environment() -> u8 {
    static SEEDED: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    *SEEDED.get_or_init(|| {
        let Ok(name) = std::env::var("BLOB_LOCK_MUTATION") else {
            return 0;
        };
        match Mutation::ALL.into_iter().find(|m| format!("{m:?}") == name) {
            Some(m) => m as u8,
            None => {
                eprintln!(
                    "BLOB_LOCK_MUTATION={name}: no such seeded bug; one of {:?}",
                    Mutation::ALL
                );
                std::process::exit(2)
            }
        }
    })
}

/// This thread's seed, else the environment's (`from_environment`).
#[cfg(feature = "mutations")]
fn current() -> u8 {
    match ACTIVE.with(|a| a.get()) {
        0 => from_environment(),
        seeded => seeded,
    }
}

/// The bug seeded on this thread (or for the process, by `BLOB_LOCK_MUTATION`), if any.
#[cfg(feature = "mutations")]
pub fn seeded() -> Option<Mutation> {
    let active = current();
    Mutation::ALL.into_iter().find(|m| *m as u8 == active)
}

/// Whether `mutation` is seeded.
#[inline(always)]
pub fn active(mutation: Mutation) -> bool {
    #[cfg(feature = "mutations")]
    {
        current() == mutation as u8
    }
    #[cfg(not(feature = "mutations"))]
    {
        let _ = mutation;
        false
    }
}

/// The branches of the paths that decide who holds a lock and the requests they save
/// (src/protocol/cas/, src/protocol/released.rs): the model check counts the runs that reach each
/// (tests/rust/model.rs prints them and fails on one never reached). Without the `mutations`
/// feature [`reached`] compiles away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Branch {
    /// An acquisition had a receipt of this process's own release.
    ReceiptTaken,
    /// ... and none (first of its lock here, or taken by another acquisition).
    NoReceipt,
    /// The receipt's version, updated at once: nobody wrote since, one request acquired.
    ReceiptCurrent,
    /// ... refused: someone wrote since our release.
    ReceiptRefused,
    /// The last receipt was stale: this one is read and compared instead of used.
    ReceiptCompared,
    /// ... and found current (the next receipt is used again).
    ComparedCurrent,
    /// ... and found stale.
    ComparedStale,
    /// No receipt, new locks likely: created first, and it was new.
    CreateFirstWon,
    /// ... created first against a lockfile that exists.
    CreateFirstRefused,
    /// No receipt, read first, and no lockfile (new locks likely from now).
    ReadFirstAbsent,
    /// ... read first and a lockfile was there.
    ReadFirstPresent,
    /// No lockfile read: created it.
    AbsentCreated,
    /// ... the create refused, and the lockfile read again.
    AbsentCreateRefused,
    /// ... the create refused, and the lockfile gone again before the read.
    AbsentGone,
    /// A read showed a write of ours whose outcome was unknown: confirmed by a renewal.
    ResolvedByRead,
    /// The lockfile read is held (or not yet judged free).
    Busy,
    /// The update over a free lockfile landed.
    UpdateWon,
    /// ... refused, and a read showed it was ours after all.
    UpdateRefusedOurs,
    /// ... refused, and another holds the lock.
    UpdateRefusedHeld,
    /// ... refused, and the lockfile gone.
    UpdateRefusedGone,
    /// A write of ours found by a read, confirmed by a renewal.
    ConfirmHeld,
    /// ... which a renewal showed was not ours (a stale read).
    ConfirmNotOurs,
    /// A renewal landed.
    RenewLanded,
    /// A renewal refused, and the lockfile our own write, retried.
    RenewOwnRetried,
    /// A renewal refused by a co-owner's renewal: adopted, written again.
    RenewCoOwnerAdopted,
    /// A renewal refused by another owner's write, or the lockfile gone: lost.
    RenewLost,
    /// A release that landed conditionally: its receipt kept.
    ReceiptSet,
}

impl Branch {
    /// Every branch counted.
    pub const ALL: [Branch; 27] = [
        Branch::ReceiptTaken,
        Branch::NoReceipt,
        Branch::ReceiptCurrent,
        Branch::ReceiptRefused,
        Branch::ReceiptCompared,
        Branch::ComparedCurrent,
        Branch::ComparedStale,
        Branch::CreateFirstWon,
        Branch::CreateFirstRefused,
        Branch::ReadFirstAbsent,
        Branch::ReadFirstPresent,
        Branch::AbsentCreated,
        Branch::AbsentCreateRefused,
        Branch::AbsentGone,
        Branch::ResolvedByRead,
        Branch::Busy,
        Branch::UpdateWon,
        Branch::UpdateRefusedOurs,
        Branch::UpdateRefusedHeld,
        Branch::UpdateRefusedGone,
        Branch::ConfirmHeld,
        Branch::ConfirmNotOurs,
        Branch::RenewLanded,
        Branch::RenewOwnRetried,
        Branch::RenewCoOwnerAdopted,
        Branch::RenewLost,
        Branch::ReceiptSet,
    ];
}

#[cfg(feature = "mutations")]
thread_local! {
    static REACHED: std::cell::RefCell<[u64; Branch::ALL.len()]> =
        const { std::cell::RefCell::new([0; Branch::ALL.len()]) };
}

/// Counts a run through `branch` on this thread.
#[inline(always)]
pub fn reached(branch: Branch) {
    #[cfg(feature = "mutations")]
    REACHED.with(|r| r.borrow_mut()[branch as usize] += 1);
    #[cfg(not(feature = "mutations"))]
    let _ = branch;
}

/// How often each branch was reached on this thread since the last call (which resets).
#[cfg(feature = "mutations")]
pub fn take_reached() -> Vec<(Branch, u64)> {
    let counts = REACHED.with(|r| std::mem::take(&mut *r.borrow_mut()));
    Branch::ALL
        .iter()
        .map(|&b| (b, counts[b as usize]))
        .collect()
}
