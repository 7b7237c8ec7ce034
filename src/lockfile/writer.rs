//! Who writes a lockfile, as people read it: the thread, host, process and user.

use std::sync::{Arc, OnceLock};

/// The OS thread id, as Python's threading.get_native_id() reports it on Linux; elsewhere 0
/// (the field is for people, and std has no portable thread id). Asked once per thread (a
/// system call each write otherwise), and again in a child made by fork, whose one thread
/// has an id of its own.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn this_thread_id() -> i64 {
    use std::cell::Cell;
    thread_local! {
        static TID: Cell<(u64, i64)> = const { Cell::new((0, 0)) };
    }
    let process = crate::per_process::generation();
    TID.with(|seen| match seen.get() {
        (p, tid) if p == process => tid,
        _ => {
            let tid = i64::from(nix::unistd::gettid().as_raw());
            seen.set((process, tid));
            tid
        }
    })
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) fn this_thread_id() -> i64 {
    0
}

/// This machine's name, looked up once per process (a system call each write otherwise;
/// it is there for people reading the lockfile), and shared by every lockfile it writes.
pub(super) fn this_hostname() -> &'static Arc<str> {
    static NAME: OnceLock<Arc<str>> = OnceLock::new();
    NAME.get_or_init(|| {
        hostname::get()
            .map(|h| h.to_string_lossy().into())
            .unwrap_or_else(|_| "".into())
    })
}

/// This process's id as lockfiles write it, made once per process (a system call and a
/// string each write otherwise: every heartbeat writes it).
pub(super) fn this_pid() -> &'static Arc<str> {
    static PID: crate::per_process::PerProcess<Arc<str>> =
        crate::per_process::PerProcess::new(|| crate::per_process::pid().to_string().into());
    PID.get()
}

/// The name of a protocol as lockfiles write it, one copy for all of them.
pub(super) fn protocol_name(name: &str) -> Arc<str> {
    static NAMES: [OnceLock<Arc<str>>; 2] = [OnceLock::new(), OnceLock::new()];
    match name {
        "cas" => NAMES[0].get_or_init(|| "cas".into()).clone(),
        "lww" => NAMES[1].get_or_init(|| "lww".into()).clone(),
        other => other.into(),
    }
}

/// This process as a person reads it: `user@host (pid N)`.
pub fn this_process() -> String {
    format!(
        "{}@{} (pid {})",
        this_user(),
        this_hostname(),
        crate::per_process::pid()
    )
}

#[cfg(unix)]
fn this_user() -> String {
    let uid = nix::unistd::getuid();
    std::env::var("LOGNAME")
        .or_else(|_| std::env::var("USER"))
        .ok()
        .or_else(|| Some(nix::unistd::User::from_uid(uid).ok()??.name))
        .unwrap_or_else(|| format!("uid {uid}"))
}

#[cfg(not(unix))]
fn this_user() -> String {
    std::env::var("USERNAME").unwrap_or_else(|_| "unknown user".into())
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    #[test]
    fn each_thread_writes_its_own_id_though_it_is_asked_once() {
        let tid = || i64::from(nix::unistd::gettid().as_raw());
        assert_eq!(
            (super::this_thread_id(), super::this_thread_id()),
            (tid(), tid())
        );
        let other = std::thread::spawn(move || (super::this_thread_id(), tid()))
            .join()
            .unwrap();
        assert_eq!(other.0, other.1);
        assert_ne!(other.0, super::this_thread_id());
    }
}
