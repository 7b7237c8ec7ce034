//! What an I/O error on a lockfile means for the caller: worth retrying, or not.

use super::dir::LockDir;
use crate::errors::{Error, StoreErrorKind};
use nix::errno::Errno;
use std::io;

impl LockDir {
    pub(super) fn error(&self, e: io::Error, during: &str) -> Error {
        // What waiting cannot fix fails at once; a full disk, a lack of file descriptors
        // or an NFS server away may pass.
        let errno = e.raw_os_error().map(Errno::from_raw);
        let permanent = matches!(
            errno,
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
        ) || matches!(
            e.kind(),
            io::ErrorKind::PermissionDenied
                | io::ErrorKind::ReadOnlyFilesystem
                | io::ErrorKind::NotADirectory
                | io::ErrorKind::IsADirectory
                | io::ErrorKind::InvalidInput
                | io::ErrorKind::Unsupported
        );
        let kind = if permanent {
            StoreErrorKind::Permanent
        } else {
            StoreErrorKind::Transient
        };
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
        let errno = e.raw_os_error().map(Errno::from_raw);
        let passing = matches!(
            errno,
            Some(
                Errno::ENOSPC
                    | Errno::EDQUOT
                    | Errno::EMFILE
                    | Errno::ENFILE
                    | Errno::EIO
                    | Errno::ENOMEM
                    | Errno::EINTR
                    | Errno::EAGAIN
                    | Errno::ETIMEDOUT
                    | Errno::ESTALE
                    | Errno::EBUSY
            )
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
