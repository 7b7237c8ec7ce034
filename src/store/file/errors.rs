//! What an I/O error on a lockfile means for the caller: worth retrying, or not.

use super::dir::LockDir;
use crate::errors::{Error, StoreErrorKind};
use std::io;

/// Whether waiting may fix `e`, met `during` a step, on Windows or not.
fn kind_of(e: &io::Error, during: &str, windows: bool) -> StoreErrorKind {
    // What waiting cannot fix fails at once; a full disk, a lack of file descriptors or an
    // NFS server away may pass.
    let permanent = errno_is_permanent(e)
        || matches!(
            e.kind(),
            io::ErrorKind::PermissionDenied
                | io::ErrorKind::ReadOnlyFilesystem
                | io::ErrorKind::NotADirectory
                | io::ErrorKind::IsADirectory
                | io::ErrorKind::InvalidInput
                | io::ErrorKind::Unsupported
        );
    // On Windows a rename over a lockfile that another program (an antivirus, a backup, an
    // editor) holds open without share-delete fails with PermissionDenied until it closes
    // it: the caller's retries (a renewal's, within its deadline) may outlast that
    // (docs/platforms.md).
    let held_open = windows && during == "replacing" && e.kind() == io::ErrorKind::PermissionDenied;
    if permanent && !held_open {
        StoreErrorKind::Permanent
    } else {
        StoreErrorKind::Transient
    }
}

impl LockDir {
    pub(super) fn error(&self, e: io::Error, during: &str) -> Error {
        let kind = kind_of(&e, during, cfg!(windows));
        Error::Store {
            uri: self.uri.clone(),
            message: format!("{during} {} failed: {e}", self.path.display()),
            kind,
        }
    }

    /// The lock's folder cannot be made: a missing or forbidden ancestor (a path under
    /// /proc), which waiting will not fix; a full disk, a lack of descriptors or a network
    /// file system's hiccup may pass.
    pub(super) fn folder_error(&self, e: io::Error) -> Error {
        let passing = errno_may_pass(&e)
            || matches!(
                e.kind(),
                io::ErrorKind::StorageFull
                    | io::ErrorKind::QuotaExceeded
                    | io::ErrorKind::OutOfMemory
                    | io::ErrorKind::Interrupted
                    | io::ErrorKind::WouldBlock
                    | io::ErrorKind::TimedOut
                    | io::ErrorKind::StaleNetworkFileHandle
                    | io::ErrorKind::ResourceBusy
            );
        match self.error(e, "creating the folder of") {
            Error::Store { uri, message, .. } if !passing => Error::Store {
                uri,
                message,
                kind: StoreErrorKind::Permanent,
            },
            other => other,
        }
    }
}

/// Unix errors that waiting cannot fix, beyond what the error's kind says.
#[cfg(unix)]
fn errno_is_permanent(e: &io::Error) -> bool {
    use nix::errno::Errno;
    matches!(
        e.raw_os_error().map(Errno::from_raw),
        Some(
            Errno::ENAMETOOLONG
                | Errno::ELOOP
                | Errno::EACCES
                | Errno::EPERM
                | Errno::EROFS
                | Errno::ENOTDIR
                | Errno::EISDIR
                | Errno::EINVAL
                | Errno::EXDEV
        )
    )
}

/// Unix errors in making a folder that may pass, beyond what the error's kind says.
#[cfg(unix)]
fn errno_may_pass(e: &io::Error) -> bool {
    use nix::errno::Errno;
    matches!(
        e.raw_os_error().map(Errno::from_raw),
        Some(Errno::EMFILE | Errno::ENFILE | Errno::EIO | Errno::EAGAIN)
    )
}

/// Elsewhere (Windows) the error's kind alone decides.
#[cfg(not(unix))]
fn errno_is_permanent(_e: &io::Error) -> bool {
    false
}

#[cfg(not(unix))]
fn errno_may_pass(_e: &io::Error) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rename_refused_on_windows_is_retried_and_nothing_else_forbidden_is() {
        let denied = || io::Error::from(io::ErrorKind::PermissionDenied);
        assert_eq!(
            kind_of(&denied(), "replacing", true),
            StoreErrorKind::Transient
        );
        assert_eq!(
            kind_of(&denied(), "replacing", false),
            StoreErrorKind::Permanent
        );
        assert_eq!(
            kind_of(&denied(), "creating", true),
            StoreErrorKind::Permanent
        );
        let busy = io::Error::from(io::ErrorKind::TimedOut);
        assert_eq!(
            kind_of(&busy, "replacing", false),
            StoreErrorKind::Transient
        );
    }
}
