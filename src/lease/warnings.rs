//! Warnings that many locks would each log at the same moment (an outage fails every
//! renewal at once): the first is logged, the others of the next [`EVERY`] are counted and
//! said with the next one logged. Thousands of identical lines help nobody, and each is work
//! for the process when it can least afford it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// At most one warning of a kind in this long.
pub(crate) const EVERY: Duration = Duration::from_secs(10);

/// One kind of warning.
pub(crate) struct Warning {
    /// When the current [`EVERY`] began, and how many were logged in it.
    last: Mutex<Option<(Instant, u32)>>,
    held_back: AtomicU64,
    /// How many are logged in one [`EVERY`] before the rest are counted.
    burst: u32,
}

impl Warning {
    /// One logged per [`EVERY`]: warnings of many locks at once, that say the same.
    pub(crate) const fn new() -> Self {
        Warning::allowing(1)
    }

    /// `burst` logged per [`EVERY`]: warnings each about a lock of its own, which a few
    /// locks should each see, and thousands should not.
    pub(crate) const fn allowing(burst: u32) -> Self {
        Warning {
            last: Mutex::new(None),
            held_back: AtomicU64::new(0),
            burst,
        }
    }

    /// Logs `message` at WARN level unless the burst of the last [`EVERY`] was logged; then
    /// it is counted, and the next one logged says how many were held back.
    pub(crate) fn warn(&self, message: impl FnOnce() -> String) {
        let now = Instant::now();
        {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            match &mut *last {
                Some((began, logged)) if now - *began < EVERY => {
                    if *logged >= self.burst {
                        drop(last);
                        self.held_back.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    *logged += 1;
                }
                _ => *last = Some((now, 1)),
            }
        }
        let held_back = self.held_back.swap(0, Ordering::Relaxed);
        let message = message();
        if held_back == 0 {
            log::warn!("{message}");
        } else {
            log::warn!(
                "{message} (and {held_back} more like it in the last {}s, not logged one by one)",
                EVERY.as_secs()
            );
        }
    }
}
