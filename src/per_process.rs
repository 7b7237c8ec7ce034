//! State that belongs to one process. A child made by fork inherits a copy of its parent's
//! memory, including mutexes that a parent thread held at the fork (locked for ever in the
//! child) and objects tied to the parent's threads (a runtime, its connections). So each
//! process makes its own value on first use, and the parent's copy is kept, never dropped
//! nor waited for, for the child to look at when it safely can.
//!
//! A process is told by its generation, which every child made by fork counts up at once
//! (`pthread_atfork`), not by its pid: a descendant can be given the pid of an ancestor
//! whose values it inherited (the ancestor gone, pids wrapped), and would take the
//! ancestor's runtime, whose threads it does not have, for its own.
//!
//! The one module allowed `unsafe`: reading an atomic pointer to an entry that, once
//! stored, is leaked and never freed or changed, and registering the fork handler. A mutex
//! here is what fork breaks.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

/// This process image's generation: 1 in the first process, one more in each child made by
/// fork than in its parent (0: not counted yet).
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Counts one more generation: run in every child at the fork.
#[cfg_attr(not(unix), allow(dead_code))]
extern "C" fn forked() {
    GENERATION.fetch_add(1, Ordering::SeqCst);
}

/// This process's generation; registers the fork handler on first use.
pub(crate) fn generation() -> u64 {
    let g = GENERATION.load(Ordering::Acquire);
    if g != 0 {
        return g;
    }
    static REGISTER: std::sync::Once = std::sync::Once::new();
    REGISTER.call_once(|| {
        #[cfg(unix)]
        // SAFETY: `forked` only adds to an atomic, which is async-signal-safe, as a handler
        // run in the child of a multithreaded process must be.
        unsafe {
            libc::pthread_atfork(None, None, Some(forked));
        }
        let _ = GENERATION.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire);
    });
    GENERATION.load(Ordering::Acquire)
}

/// This process's id, asked of the system once per process (`getpid` is a system call each
/// time, and some paths ask on every write).
pub(crate) fn pid() -> u32 {
    static PID: PerProcess<u32> = PerProcess::new(std::process::id);
    *PID.get()
}

/// A value per process, made by `make` on first use in each process.
pub(crate) struct PerProcess<T: 'static> {
    current: AtomicPtr<Entry<T>>,
    /// The generation one of whose threads is making (or made) its value.
    maker: AtomicU64,
    make: fn() -> T,
    /// This process's generation ([`generation`]; a test's own counter in tests).
    generation: fn() -> u64,
}

struct Entry<T: 'static> {
    generation: u64,
    value: T,
    parent: Option<&'static T>,
}

impl<T: Send + Sync + 'static> PerProcess<T> {
    /// Nothing made yet; `make` makes this process's value when first asked for.
    pub(crate) const fn new(make: fn() -> T) -> Self {
        PerProcess {
            current: AtomicPtr::new(std::ptr::null_mut()),
            maker: AtomicU64::new(0),
            make,
            generation,
        }
    }

    /// As `new`, with generations counted by `generation` (a test's, that moves no other).
    #[cfg(test)]
    const fn counted_by(make: fn() -> T, generation: fn() -> u64) -> Self {
        PerProcess {
            current: AtomicPtr::new(std::ptr::null_mut()),
            maker: AtomicU64::new(0),
            make,
            generation,
        }
    }

    /// This process's value, if it made one already.
    pub(crate) fn made(&self) -> Option<&'static T> {
        // SAFETY: entries are leaked, never freed, once stored.
        let entry = unsafe { self.current.load(Ordering::Acquire).as_ref() }?;
        (entry.generation == (self.generation)()).then_some(&entry.value)
    }

    /// This process's value.
    pub(crate) fn get(&self) -> &'static T {
        self.with_parent().0
    }

    /// This process's value, and the value of the process it was forked from, if that one
    /// had made one.
    pub(crate) fn with_parent(&self) -> (&'static T, Option<&'static T>) {
        let me = (self.generation)();
        loop {
            let seen = self.current.load(Ordering::Acquire);
            // SAFETY: entries are leaked, never freed, once stored.
            let entry: Option<&'static Entry<T>> = unsafe { seen.as_ref() };
            if let Some(e) = entry.filter(|e| e.generation == me) {
                return (&e.value, e.parent);
            }
            // One thread of this process makes the value (a runtime, a thread); the others
            // wait for it. A maker of another generation is an ancestor's, at the fork.
            let maker = self.maker.load(Ordering::Acquire);
            let making = maker != me
                && self
                    .maker
                    .compare_exchange(maker, me, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok();
            if !making {
                std::thread::yield_now();
                continue;
            }
            struct GiveBack<'a>(&'a AtomicU64);
            impl Drop for GiveBack<'_> {
                fn drop(&mut self) {
                    self.0.store(0, Ordering::Release); // `make` panicked: another may try
                }
            }
            let give_back = GiveBack(&self.maker);
            let fresh = Box::leak(Box::new(Entry {
                generation: me,
                value: (self.make)(),
                parent: entry.map(|e| &e.value),
            }));
            std::mem::forget(give_back);
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

    /// A process with the pid of the one that made a value, but another process image (a
    /// descendant given its ancestor's pid again): the fork handler leaves a new generation
    /// under the same pid, and the inherited value must not pass for its own.
    #[test]
    fn a_new_process_image_under_the_same_pid_makes_its_own_value() {
        static MADE: AtomicU64 = AtomicU64::new(0);
        static GENERATION: AtomicU64 = AtomicU64::new(1);
        static VALUE: PerProcess<u64> = PerProcess::counted_by(
            || MADE.fetch_add(1, Ordering::SeqCst) + 1,
            || GENERATION.load(Ordering::SeqCst),
        );
        let first = *VALUE.get();
        // What the fork handler does in a child; the pid stays this test's.
        GENERATION.fetch_add(1, Ordering::SeqCst);
        assert!(
            VALUE.made().is_none(),
            "the parent's value passed for this process's"
        );
        let (mine, parent) = VALUE.with_parent();
        assert_eq!((*mine, parent.copied()), (first + 1, Some(first)));
    }
}
