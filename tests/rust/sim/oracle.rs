//! The oracle: what must hold in every run, checked on the events of true virtual time.

use super::{Event, Mode, World, DRIFT};
use blob_lock::Protocol;

pub struct Outcome {
    /// The mode the run was in, for the replay hint.
    pub mode: Mode,
    /// What broke exclusion, tokens or the grace (safety).
    pub violations: Vec<String>,
    /// What broke progress: a call past its bound, a wait behind our own write
    /// (`liveness.rs`).
    pub progress: Vec<String>,
    pub trace: Vec<String>,
    /// Lockfiles deleted in the run (by prune).
    pub deletes: usize,
}

/// The oracle.
pub fn check(events: &[Event], mode: Mode) -> Vec<String> {
    let mut v = Vec::new();
    // Belief intervals per owner (an orchestrator and its remote share the owner id).
    let mut spans: Vec<(String, u64, f64, f64)> = Vec::new();
    for e in events {
        if let Event::Belief { owner, token, at } = e {
            match spans.iter_mut().find(|s| &s.0 == owner) {
                Some(s) => {
                    s.2 = s.2.min(*at);
                    s.3 = s.3.max(*at);
                }
                None => spans.push((owner.clone(), *token, *at, *at)),
            }
        }
    }
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if a.2 <= b.3 && b.2 <= a.3 {
                v.push(format!(
                    "{} (token {}) and {} (token {}) both held the lock in [{:.3}s, {:.3}s]",
                    a.0,
                    a.1,
                    b.0,
                    b.1,
                    a.2.max(b.2),
                    a.3.min(b.3)
                ));
            }
        }
    }
    let mut acquired: Vec<(f64, &str, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Acquired { owner, token, at } => Some((*at, owner.as_str(), *token)),
            _ => None,
        })
        .collect();
    acquired.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Across deletes too: a fresh lockfile's tokens start above every earlier one
    // (crate::lockfile::token); whose lockfile a delete may remove is checked on the
    // store's history (tests/rust/model.rs).
    for w in acquired.windows(2) {
        if w[1].2 <= w[0].2 {
            v.push(format!(
                "token did not grow: {} got {} at {:.3}s after {} got {} at {:.3}s",
                w[1].1, w[1].2, w[1].0, w[0].1, w[0].2, w[0].0
            ));
        }
    }
    // The launch grace: an orchestrator that handed off and crashed keeps its lock for the
    // grace (by the slowest clock), unless its remote began writing or the lock was taken.
    for e in events {
        let Event::HandedOffAndCrashed { owner, grace, at } = e else {
            continue;
        };
        let kept_from = events.iter().find_map(|k| match k {
            Event::KeepStarted { owner: o, at: k } if o == owner && k >= at => Some(*k),
            _ => None,
        });
        let until = at + grace / (1.0 + DRIFT) - 1e-3;
        let early = acquired.iter().find(|(t, who, _)| {
            *who != owner && *t > *at && *t < until && kept_from.is_none_or(|k| *t < k)
        });
        if let Some((t, who, token)) = early {
            v.push(format!(
                "{who} took the lock (token {token}) at {t:.3}s, within the {grace:.3}s launch grace that {owner} granted at {at:.3}s"
            ));
        }
    }
    if mode == Mode::Healthy {
        // On a healthy store a running orchestrator is never told it lost the lock. (A
        // remote is, legitimately, when its orchestrator crashed and the lock moved on.)
        for e in events {
            if let Event::Lost {
                owner,
                remote: false,
                at,
            } = e
            {
                v.push(format!(
                    "{owner} was told it lost the lock at {at:.3}s on a healthy store"
                ));
            }
        }
    }
    v
}

pub fn report(seed: u64, protocol: Protocol, out: &Outcome) {
    eprintln!(
        "--- seed {seed} ({}, {:?}): replay with SIM_SEED={seed} SIM_MODE='{:?}'",
        protocol.as_str(),
        out.mode,
        out.mode
    );
    for line in &out.trace {
        eprintln!("{line}");
    }
    for violation in &out.violations {
        eprintln!("VIOLATION: {violation}");
    }
    for late in &out.progress {
        eprintln!("VIOLATION (progress): {late}");
    }
}

/// A release that tells its holder the lock was lost did not land: the store's true
/// history has no release of that owner's acquisition (a resent release that landed, then
/// written over by the next holder, is the holder's own release, not a loss).
pub fn told_lost_only_when_lost(world: &World) -> Vec<String> {
    let history = world.history.lock().unwrap();
    let events = world.events.lock().unwrap();
    let releases: Vec<_> = history
        .iter()
        .filter_map(|s| blob_lock::LockFile::decode(&s.bytes).ok())
        .filter(|lf| lf.is_released() && lf.broken_by.is_none())
        .collect();
    let mut found = Vec::new();
    for e in events.iter() {
        if let Event::ReleaseRefused {
            owner,
            token,
            status,
        } = e
        {
            if releases
                .iter()
                .any(|lf| &*lf.writer_id == owner && lf.token == *token)
            {
                found.push(format!(
                    "the release of {owner} (token {token}) landed, yet it answered {status}: its holder was told it lost the lock"
                ));
            }
        }
    }
    found
}
