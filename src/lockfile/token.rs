//! Fencing tokens, which only grow, across a deleted lockfile too. An acquisition writes
//! the larger of one more than the lockfile it takes over and its writer's wall clock in
//! microseconds since the epoch (the floor); a fresh lockfile (none there, or one written
//! by mops, which sets no token) starts from the floor. A lockfile deleted (prune, a
//! lifecycle rule, a person) takes its history with it; the next holder's token is still
//! above every earlier one when the machines' wall clocks disagree by less than
//! `clock_skew` and the last acquisition before the delete was longer ago than that
//! allowance plus the longest a write may be on its way (a holder learns of its write
//! within its request's time; a write that lands later, unanswered, is taken over or
//! confirmed with a fresh floor). prune deletes only such lockfiles ([`may_delete`]).

use chrono::{DateTime, Utc};
use std::time::Duration;

/// The floor at `wall` (a writer's clock): microseconds since the epoch, at least 1 (a
/// clock set before 1970 still writes a valid token).
pub fn floor(wall: DateTime<Utc>) -> u64 {
    u64::try_from(wall.timestamp_micros()).unwrap_or(0).max(1)
}

/// The token an acquisition at `wall` writes over a lockfile whose token is `found` (0:
/// none there, or none written): one more, and at least the floor.
pub fn next_token(found: u64, wall: DateTime<Utc>) -> u64 {
    found.saturating_add(1).max(floor(wall))
}

/// Whether a lockfile whose last token is `token` may be deleted at `now` (the deleter's
/// wall clock), `allowance` being how far clocks may disagree plus the longest a write may
/// be on its way: the next holder's token is then above it.
pub fn may_delete(token: u64, now: DateTime<Utc>, allowance: Duration) -> bool {
    let back = chrono::Duration::from_std(allowance).unwrap_or(chrono::Duration::MAX);
    let then = now.checked_sub_signed(back).map_or(0, floor);
    token.saturating_add(1) < then
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(s, 0).unwrap()
    }

    #[test]
    fn a_token_is_one_more_than_the_last_and_at_least_the_wall_clock() {
        let t = next_token(0, at(1_800_000_000));
        assert_eq!(t, 1_800_000_000_000_000);
        assert_eq!(next_token(t, at(0)), t + 1); // a clock behind: one more
        assert_eq!(next_token(t, at(1_800_000_001)), t + 1_000_000); // later: the floor
        assert_eq!(next_token(7, at(5)), 5_000_000); // a lockfile of an earlier version
        assert_eq!(floor(at(-10)), 1);
        assert_eq!(next_token(u64::MAX, at(5)), u64::MAX);
    }

    #[test]
    fn a_lockfile_deleted_after_the_allowance_is_followed_by_larger_tokens() {
        let allowance = Duration::from_secs(90);
        let last = next_token(0, at(1_000)) + 1_000; // a thousand acquisitions at once
                                                     // Deletable once the deleter's clock reads the allowance past it; a clock behind
                                                     // the deleter's by up to the skew allowance (60 s of the 90) then starts above.
        assert!(!may_delete(last, at(1_000 + 90), allowance));
        assert!(may_delete(last, at(1_000 + 91), allowance));
        assert!(next_token(0, at(1_000 + 91 - 60)) > last);
        assert!(!may_delete(last, at(1_000), Duration::MAX));
    }
}
