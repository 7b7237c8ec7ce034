//! The library's own threads leave the signals that ask a process something (SIGINT,
//! SIGTERM, SIGHUP, ...) to its other threads.
//!
//! The kernel hands a signal sent to a process to any one of its threads that does not
//! block it. A handler run on one of ours interrupts nothing there: Python runs its signal
//! handlers on its main thread only, at its next chance, and a main thread blocked in a
//! system call (`blob-lock run` in `waitpid` for its command) is not woken. Under qemu-user
//! a SIGTERM sent to `blob-lock run` was taken by one of our threads in three runs of four
//! and never passed on to the command (2026-11-28). The signals of a fault (SIGSEGV and
//! the like) stay with the thread that caused them.

#![allow(unsafe_code)]

/// Starts a named thread of the library's that leaves those signals to the others: how the
/// file store's threads and the Python callers start (the runtime's call
/// [`leave_to_other_threads`] from tokio's `on_thread_start`).
pub(crate) fn spawn<F, T>(name: &str, f: F) -> std::io::Result<std::thread::JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            leave_to_other_threads();
            f()
        })
}

/// Blocks, on the calling thread, every signal but those of a fault. Called first thing on
/// each thread the library starts.
pub(crate) fn leave_to_other_threads() {
    #[cfg(unix)]
    // SAFETY: sigset_t is plain data that sigemptyset/sigfillset initialise, and
    // pthread_sigmask changes only the calling thread's mask. glibc and musl keep their
    // own signals (thread cancellation, setxid) out of a filled set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        for fault in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGILL,
            libc::SIGTRAP,
            libc::SIGABRT,
            libc::SIGSYS,
        ] {
            libc::sigdelset(&mut set, fault);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

// The runtime's threads are checked in src/runtime.rs, with these helpers: the runtime
// calls on this file, never this file on the runtime.
#[cfg(all(test, target_os = "linux"))]
pub(crate) mod tests {
    use super::spawn;

    /// The calling thread's blocked signals, from /proc (the kernel's own account).
    pub(crate) fn blocked() -> u64 {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = status.lines().find(|l| l.starts_with("SigBlk:")).unwrap();
        u64::from_str_radix(line["SigBlk:".len()..].trim(), 16).unwrap()
    }

    pub(crate) fn bit(signal: i32) -> u64 {
        1 << (signal - 1)
    }

    #[test]
    fn a_thread_of_ours_blocks_the_asking_signals_and_not_the_faults() {
        let mask = spawn("blob-lock-test", blocked).unwrap().join().unwrap();
        for asked in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGUSR1,
            libc::SIGCHLD,
        ] {
            assert_ne!(mask & bit(asked), 0, "signal {asked} not blocked: {mask:x}");
        }
        for fault in [libc::SIGSEGV, libc::SIGBUS, libc::SIGABRT] {
            assert_eq!(
                mask & bit(fault),
                0,
                "fault signal {fault} blocked: {mask:x}"
            );
        }
    }
}
