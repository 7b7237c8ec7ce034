//! Every choice the simulation makes (a request's latency and fate, a stale read, a pause, a
//! clock's rate and offset, a crash), made through one [`Chooser`]: a seeded generator for
//! the random campaigns, or [`Dfs`], which an explorer drives through every combination of
//! choices within a bound (stateless model checking: run, record each choice point and how
//! many ways it had, take the next untried way at the deepest point, run again).

use rand::rngs::StdRng;
use rand::Rng;
use std::sync::{Arc, Mutex};

/// Where the simulation's choices come from.
pub trait Chooser: Send {
    /// True with chance `p`. Exploring: two ways, false first (the fault is the other).
    fn chance(&mut self, p: f64, what: &'static str) -> bool;
    /// A fraction of a bound, in [0, 1). Exploring: half, then near zero, then near one.
    fn fraction(&mut self, what: &'static str) -> f64;
    /// How far a fault goes, as a fraction of its bound in [0, 1) (how stale a read is).
    /// Exploring: none, then near the bound.
    fn extent(&mut self, what: &'static str) -> f64;
    /// One of the outcomes whose chances are `weights`, or None for the rest (one draw).
    /// Exploring: None first, then each outcome whose chance is not zero.
    fn pick(&mut self, weights: &[f64], what: &'static str) -> Option<usize>;
    /// A number in `lo..hi` (`lo..=hi` when `inclusive`). Exploring: `lo`, then `hi`.
    fn within(&mut self, lo: f64, hi: f64, inclusive: bool, what: &'static str) -> f64;
    /// A number in `lo..hi` that is never a choice point (the spacing of a holder's checks):
    /// exploring, `lo`, the finest.
    fn step(&mut self, lo: f64, hi: f64) -> f64;
    /// A seed for what stays random inside (a clock's jitter). Exploring: fixed.
    fn seed(&mut self) -> u64;
    /// A draw whose value is not used, kept so that a random stream stays as it was.
    /// Exploring: nothing.
    fn spare(&mut self);
}

/// A chooser shared by the views of the store of one world.
pub type Shared = Arc<Mutex<dyn Chooser>>;

/// Today's random draws, exactly as the campaigns made them before choosers: each named
/// seed keeps its schedule.
impl Chooser for StdRng {
    fn chance(&mut self, p: f64, _: &'static str) -> bool {
        self.random::<f64>() < p
    }
    fn fraction(&mut self, _: &'static str) -> f64 {
        self.random::<f64>()
    }
    fn extent(&mut self, _: &'static str) -> f64 {
        self.random::<f64>()
    }
    fn pick(&mut self, weights: &[f64], _: &'static str) -> Option<usize> {
        let r = self.random::<f64>();
        let mut below = 0.0;
        for (i, w) in weights.iter().enumerate() {
            below += w;
            if r < below {
                return Some(i);
            }
        }
        None
    }
    fn within(&mut self, lo: f64, hi: f64, inclusive: bool, _: &'static str) -> f64 {
        if inclusive {
            self.random_range(lo..=hi)
        } else {
            self.random_range(lo..hi)
        }
    }
    fn step(&mut self, lo: f64, hi: f64) -> f64 {
        self.random_range(lo..hi)
    }
    fn seed(&mut self) -> u64 {
        self.random()
    }
    fn spare(&mut self) {
        let _ = self.random::<f64>();
    }
}

/// One choice point of a run: the way taken, out of `ways`, and what it chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    pub taken: u32,
    pub ways: u32,
    pub what: &'static str,
}

/// The explorer's chooser: takes the ways of `prefix` at the first points, the first way at
/// the rest, and records every point. Ways other than the first are faults (or the other
/// edge of a bound): at most `budget` of them in one run, and no choice points after
/// `depth` of them (the first way only, unrecorded).
#[derive(Debug, Default)]
pub struct Dfs {
    pub prefix: Vec<u32>,
    pub points: Vec<Point>,
    pub budget: u32,
    pub spent: u32,
    pub depth: usize,
    seeds: u64,
}

impl Dfs {
    pub fn new(prefix: Vec<u32>, budget: u32, depth: usize) -> Dfs {
        Dfs {
            prefix,
            budget,
            depth,
            ..Dfs::default()
        }
    }

    /// The way to take at the next point, which has `ways`.
    fn way(&mut self, ways: u32, what: &'static str) -> u32 {
        let at = self.points.len();
        if ways <= 1 || at >= self.depth {
            return 0;
        }
        let taken = self.prefix.get(at).copied().unwrap_or(0);
        assert!(
            taken < ways,
            "replay diverged at point {at} ({what}): {taken} of {ways}"
        );
        // With the budget spent, only the first way is left: not a point to branch on.
        let ways = if self.spent >= self.budget && taken == 0 {
            1
        } else {
            ways
        };
        self.spent += u32::from(taken != 0);
        self.points.push(Point { taken, ways, what });
        taken
    }

    /// The choices of the run after `points`, depth first: the deepest point with a way left
    /// takes its next way; None when every combination was run.
    pub fn next(points: &[Point]) -> Option<Vec<u32>> {
        let at = points.iter().rposition(|p| p.taken + 1 < p.ways)?;
        let mut prefix: Vec<u32> = points[..at].iter().map(|p| p.taken).collect();
        prefix.push(points[at].taken + 1);
        Some(prefix)
    }
}

const HALF: f64 = 0.5;
const LOW: f64 = 0.02;
const HIGH: f64 = 0.98;

impl Chooser for Dfs {
    fn chance(&mut self, p: f64, what: &'static str) -> bool {
        if p <= 0.0 {
            return false;
        }
        self.way(2, what) == 1
    }
    fn fraction(&mut self, what: &'static str) -> f64 {
        [HALF, LOW, HIGH][self.way(3, what) as usize]
    }
    fn extent(&mut self, what: &'static str) -> f64 {
        [0.0, HIGH][self.way(2, what) as usize]
    }
    fn pick(&mut self, weights: &[f64], what: &'static str) -> Option<usize> {
        let possible: Vec<usize> = (0..weights.len()).filter(|&i| weights[i] > 0.0).collect();
        match self.way(possible.len() as u32 + 1, what) {
            0 => None,
            n => Some(possible[n as usize - 1]),
        }
    }
    fn within(&mut self, lo: f64, hi: f64, inclusive: bool, what: &'static str) -> f64 {
        let top = if inclusive { hi } else { lo + (hi - lo) * HIGH };
        [lo, top][self.way(2, what) as usize]
    }
    fn step(&mut self, lo: f64, _hi: f64) -> f64 {
        lo
    }
    fn seed(&mut self) -> u64 {
        self.seeds += 1;
        self.seeds
    }
    fn spare(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two binary points and a budget of one fault: (0,0), (0,1), (1,0); never (1,1).
    #[test]
    fn dfs_runs_every_combination_within_the_budget_once() {
        let mut seen = Vec::new();
        let mut prefix = Some(Vec::new());
        while let Some(p) = prefix {
            let mut d = Dfs::new(p, 1, 100);
            let a = d.chance(0.5, "a");
            let b = d.chance(0.5, "b");
            seen.push((a, b));
            prefix = Dfs::next(&d.points);
        }
        assert_eq!(seen, vec![(false, false), (false, true), (true, false)]);
    }
}
