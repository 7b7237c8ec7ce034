//! What can go wrong in a simulated run: the fault modes of the matrix and the faults each
//! process's view of the store injects.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Small latencies and clock drift only.
    Healthy,
    /// Every fault but stale reads.
    Faulty,
    /// Every fault, and reads that may return an older version.
    Eventual,
    /// Healthy but for a few requests delayed up to 3 x expire (lww's first weakness).
    SlowWriter,
    /// Healthy but for reads that may return a version up to expire / 2 old (lww's second).
    StaleReads,
    /// Healthy (drift and crashes included) plus one fault at the rate `Faulty` has it:
    /// the rows of docs/guarantees.md's table of which protocol survives which fault.
    Only(Fault),
}

/// The faults one at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// A few requests delayed up to 3 x expire.
    SlowRequests,
    /// Writes that fail without landing.
    LostWrites,
    /// Writes that land but report an error.
    GhostWrites,
    /// Writes that land but come back as a conflict (a retried request).
    EchoedConflicts,
    /// Reads that fail transiently.
    ReadErrors,
    /// Processes paused past expire, then resumed.
    Pauses,
    /// Reads that may return a version up to expire / 2 old (eventual consistency).
    StaleReads,
}

#[derive(Debug, Clone)]
pub struct Faults {
    pub latency: Duration,
    pub slow_p: f64,
    pub slow_latency: Duration,
    pub lost_write_p: f64,
    pub ghost_write_p: f64,
    pub echo_conflict_p: f64,
    pub read_error_p: f64,
    pub stale_for: Duration,
    /// Reads lag by exactly `stale_for` rather than up to it (scripted schedules).
    pub exact_lag: bool,
    pub pauses: bool,
    pub crashes: bool,
    /// Every update-if-match refused as a conflict (a store, or a proxy before it, that
    /// rewrites ETags): progress only, nothing of it lands.
    pub refuse_updates: bool,
}

impl Mode {
    /// Every mode, for `SIM_MODE` (written as the replay hint prints it).
    pub fn all() -> Vec<Mode> {
        let mut all = vec![
            Mode::Healthy,
            Mode::Faulty,
            Mode::Eventual,
            Mode::SlowWriter,
            Mode::StaleReads,
        ];
        all.extend(
            [
                Fault::SlowRequests,
                Fault::LostWrites,
                Fault::GhostWrites,
                Fault::EchoedConflicts,
                Fault::ReadErrors,
                Fault::Pauses,
                Fault::StaleReads,
            ]
            .map(Mode::Only),
        );
        all
    }

    /// The mode named `name` as `{:?}` prints it.
    pub fn named(name: &str) -> Option<Mode> {
        Mode::all().into_iter().find(|m| format!("{m:?}") == name)
    }
}

impl Faults {
    pub fn of(mode: Mode) -> Faults {
        let expire = Duration::from_secs_f64(EXPIRE);
        let healthy = Faults {
            latency: Duration::from_millis(30),
            slow_p: 0.0,
            slow_latency: Duration::ZERO,
            lost_write_p: 0.0,
            ghost_write_p: 0.0,
            echo_conflict_p: 0.0,
            read_error_p: 0.0,
            stale_for: Duration::ZERO,
            exact_lag: false,
            pauses: false,
            crashes: true,
            refuse_updates: false,
        };
        let faulty = Faults {
            latency: Duration::from_millis(80),
            slow_p: 0.04,
            slow_latency: expire * 3,
            lost_write_p: 0.03,
            ghost_write_p: 0.03,
            echo_conflict_p: 0.03,
            read_error_p: 0.03,
            pauses: true,
            ..healthy.clone()
        };
        let calm = Faults {
            crashes: false,
            ..healthy.clone()
        };
        match mode {
            Mode::SlowWriter => Faults {
                slow_p: 0.04,
                slow_latency: expire * 3,
                ..calm
            },
            Mode::StaleReads => Faults {
                stale_for: expire / 2,
                ..calm
            },
            Mode::Healthy => healthy,
            Mode::Only(fault) => {
                let mut one = healthy;
                match fault {
                    Fault::SlowRequests => {
                        one.slow_p = faulty.slow_p;
                        one.slow_latency = faulty.slow_latency;
                    }
                    Fault::LostWrites => one.lost_write_p = faulty.lost_write_p,
                    Fault::GhostWrites => one.ghost_write_p = faulty.ghost_write_p,
                    Fault::EchoedConflicts => one.echo_conflict_p = faulty.echo_conflict_p,
                    Fault::ReadErrors => one.read_error_p = faulty.read_error_p,
                    Fault::Pauses => one.pauses = true,
                    Fault::StaleReads => one.stale_for = expire / 2,
                }
                one
            }
            Mode::Faulty => faulty,
            Mode::Eventual => Faults {
                stale_for: expire / 2,
                ..faulty
            },
        }
    }
}
