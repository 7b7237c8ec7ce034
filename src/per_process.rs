//! State that belongs to one process. A child made by fork inherits a copy of its parent's
//! memory, including mutexes that a parent thread held at the fork (locked for ever in the
//! child) and objects tied to the parent's threads (a runtime, its connections). So each
//! process makes its own value on first use, and the parent's copy is kept, never dropped
//! nor waited for, for the child to look at when it safely can.
//!
//! The one module allowed `unsafe`: reading an atomic pointer to an entry that, once
//! stored, is leaked and never freed or changed. A mutex here is what fork breaks.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

/// A value per process, made by `make` on first use in each process.
pub(crate) struct PerProcess<T: 'static> {
    current: AtomicPtr<Entry<T>>,
    /// The process one of whose threads is making (or made) its value.
    maker: AtomicU32,
    make: fn() -> T,
}

struct Entry<T: 'static> {
    pid: u32,
    value: T,
    parent: Option<&'static T>,
}

impl<T: Send + Sync + 'static> PerProcess<T> {
    /// Nothing made yet; `make` makes this process's value when first asked for.
    pub(crate) const fn new(make: fn() -> T) -> Self {
        PerProcess {
            current: AtomicPtr::new(std::ptr::null_mut()),
            maker: AtomicU32::new(0),
            make,
        }
    }

    /// This process's value, if it made one already.
    pub(crate) fn made(&self) -> Option<&'static T> {
        // SAFETY: entries are leaked, never freed, once stored.
        let entry = unsafe { self.current.load(Ordering::Acquire).as_ref() }?;
        (entry.pid == std::process::id()).then_some(&entry.value)
    }

    /// This process's value.
    pub(crate) fn get(&self) -> &'static T {
        self.with_parent().0
    }

    /// This process's value, and the value of the process it was forked from, if that one
    /// had made one.
    pub(crate) fn with_parent(&self) -> (&'static T, Option<&'static T>) {
        let pid = std::process::id();
        loop {
            let seen = self.current.load(Ordering::Acquire);
            // SAFETY: entries are leaked, never freed, once stored.
            let entry: Option<&'static Entry<T>> = unsafe { seen.as_ref() };
            if let Some(e) = entry.filter(|e| e.pid == pid) {
                return (&e.value, e.parent);
            }
            // One thread of this process makes the value (a runtime, a thread); the others
            // wait for it. A maker of another process is the parent's, at the fork.
            let maker = self.maker.load(Ordering::Acquire);
            let claimed = maker != pid
                && self
                    .maker
                    .compare_exchange(maker, pid, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
            if !claimed {
                std::thread::yield_now();
                continue;
            }
            struct Unclaim<'a>(&'a AtomicU32);
            impl Drop for Unclaim<'_> {
                fn drop(&mut self) {
                    self.0.store(0, Ordering::Release); // `make` panicked: another may try
                }
            }
            let unclaim = Unclaim(&self.maker);
            let fresh = Box::leak(Box::new(Entry {
                pid,
                value: (self.make)(),
                parent: entry.map(|e| &e.value),
            }));
            std::mem::forget(unclaim);
            self.current.store(fresh, Ordering::Release);
            return (&fresh.value, fresh.parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[test]
    fn one_value_per_process_shared_by_threads() {
        static COUNTER: PerProcess<Mutex<u32>> = PerProcess::new(|| Mutex::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| std::thread::spawn(|| *COUNTER.get().lock().unwrap() += 1))
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*COUNTER.get().lock().unwrap(), 8);
        assert!(COUNTER.with_parent().1.is_none());
        assert!(COUNTER.made().is_some());
        static UNUSED: PerProcess<u8> = PerProcess::new(|| 1);
        assert!(UNUSED.made().is_none());
    }
}
