//! What kind of file system a lockfile's folder is on, looked at once per folder: where its
//! calls may run, and how the lockfiles its updates replace are removed.
//!
//! On ext4 without a journal (some cloud VMs' disks, scratch volumes), the inode allocator
//! skips every free inode deleted in the last 30 to 60 seconds (`recently_deleted` in
//! fs/ext4/ialloc.c), each skip a look into the inode table; inodes freed in the current
//! second are reused at once. Removing replaced lockfiles in batches ([`super::sweeper`])
//! puts a batch's worth of inodes through each second instead of two, and every file
//! creation in the folder's block group then scans past them: measured on a journal-less
//! ext4, a loop of fresh locks slowed from 190 to 600-780 µs a cycle within 40 seconds
//! with the sweeper, and stayed at 210-270 µs removing each file at once (2026-11-26, in
//! `git log -p BENCHMARKS.md`).
//! So there the caller removes its own; with a journal the check is off and the sweeper
//! saves the caller the removal.

use std::path::Path;

/// Not looked at yet.
pub(super) const UNKNOWN: u8 = 0;
/// A local file system: calls may run on the caller's thread, and a caller leaves the
/// removal of replaced lockfiles to the sweeper.
pub(super) const LOCAL: u8 = 1;
/// Not known to be local (NFS, or not Linux): calls run on the blocking pool.
pub(super) const REMOTE: u8 = 2;
/// Local ext4 without a journal: as [`LOCAL`], but a caller removes replaced lockfiles at once.
pub(super) const LOCAL_NO_JOURNAL: u8 = 3;

/// Whether calls may run on the caller's thread.
pub(super) fn is_local(place: u8) -> bool {
    place == LOCAL || place == LOCAL_NO_JOURNAL
}

/// The place of `dir` (or of its nearest existing ancestor): [`LOCAL`] or
/// [`LOCAL_NO_JOURNAL`] on a file system known to be local, else [`REMOTE`]. Calls
/// `statfs`, which can hang on NFS: run it on the blocking pool.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn of(dir: &Path) -> u8 {
    use nix::sys::statfs::{self as sfs, statfs};
    // XFS's number is written out: nix leaves its constant out on musl.
    let xfs = sfs::FsType(0x5846_5342 as _);
    let local = [
        sfs::EXT4_SUPER_MAGIC, // also ext2 and ext3: one magic number
        xfs,
        sfs::BTRFS_SUPER_MAGIC,
        sfs::TMPFS_MAGIC,
        sfs::OVERLAYFS_SUPER_MAGIC,
        sfs::F2FS_SUPER_MAGIC,
    ];
    let Some((found, fs)) = dir
        .ancestors()
        .find_map(|d| statfs(d).ok().map(|fs| (d, fs)))
    else {
        return REMOTE;
    };
    match fs.filesystem_type() {
        sfs::EXT4_SUPER_MAGIC if ext4_journal(found) == Some(false) => LOCAL_NO_JOURNAL,
        kind if local.contains(&kind) => LOCAL,
        _ => REMOTE,
    }
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
pub(super) fn of(_dir: &Path) -> u8 {
    REMOTE
}

/// Whether the ext4 file system holding `path` has a journal; `None` when the kernel does
/// not say (no /proc or /sys). The device's name comes from /sys/dev/block; ext4 lists each
/// file system it mounted in `/proc/fs/ext4/<device>`, and jbd2 each journal it runs as
/// `/proc/fs/jbd2/<device>-<inode>` (since Linux 2.6.28). A journal on another device is not
/// seen, and reads as none: that file system only loses the sweeper.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn ext4_journal(path: &Path) -> Option<bool> {
    let name = block_device(path)?;
    if !Path::new("/proc/fs/ext4").join(&name).exists() {
        return None;
    }
    let prefix = format!("{name}-");
    let journals = match std::fs::read_dir("/proc/fs/jbd2") {
        Ok(entries) => entries,
        // jbd2 not loaded: no file system has a journal.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    Some(journals.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&prefix))
    }))
}

/// The kernel's name of the block device holding `path` (`vda`, `nvme0n1p1`, `dm-0`), as
/// /sys/dev/block names it; `None` off a block device (tmpfs, overlayfs) or without /sys.
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(super) fn block_device(path: &Path) -> Option<String> {
    use nix::sys::stat::{major, minor};
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let link = std::fs::read_link(format!("/sys/dev/block/{}:{}", major(dev), minor(dev))).ok()?;
    Some(link.file_name()?.to_str()?.to_string())
}
