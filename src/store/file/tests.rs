//! The file store's own tests: torn reads, strays, waiting updaters, where calls run.

use super::dir::STRAY_AGE;
use super::place::{self, UNKNOWN};
// Only the Linux tests tell file systems apart (elsewhere every folder reads as remote).
#[cfg(any(target_os = "linux", target_os = "android"))]
use super::place::{LOCAL, LOCAL_NO_JOURNAL, REMOTE};
use super::*;
use std::fs::File;
use std::path::Path;
use std::time::Instant;

fn store(dir: &Path) -> FileStore {
    FileStore::new(
        dir.join("lock").join("lock.json"),
        "file://test".into(),
        Duration::from_secs(5),
    )
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_see_one_whole_lockfile_or_another_while_it_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(store(dir.path()));
    let body = |i: usize| Bytes::from(format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(i % 300)));
    let Write::Done(mut version) = store.create(body(0)).await.unwrap() else {
        panic!("a new lockfile is created")
    };
    let reader = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut reads = 0;
            loop {
                let seen = store.read().await.unwrap().expect("never missing");
                let text = String::from_utf8(seen.bytes.to_vec()).unwrap();
                assert!(
                    text.starts_with("{\"n\":") && text.ends_with("\"}"),
                    "{text}"
                );
                reads += 1;
                if text.starts_with("{\"n\":2000,") {
                    return reads;
                }
            }
        })
    };
    for i in 1..=2000 {
        version = loop {
            match store.update(body(i), &version).await {
                Ok(Write::Done(v)) => break v,
                Ok(Write::Conflict { .. }) => panic!("update {i} conflicted with no other writer"),
                // On Windows a rename over a lockfile that the reader holds open can be
                // refused (errors.rs): a pass, which a renewal retries. Elsewhere nothing does.
                Err(e) if cfg!(windows) && e.is_transient() => continue,
                Err(e) => panic!("update {i}: {e}"),
            }
        };
    }
    assert!(reader.await.unwrap() > 0);
    let last = store.read().await.unwrap().unwrap();
    assert_eq!(
        last.version, version,
        "the version a write returns is the one read back"
    );
    let stale = Version {
        e_tag: Some("0-0.0-0-0".into()),
        version: None,
    };
    assert!(matches!(
        store.update(body(1), &stale).await.unwrap(),
        Write::Conflict { .. }
    ));
    assert_eq!(
        store.overwrite(body(7)).await.unwrap(),
        store.read().await.unwrap().unwrap().version
    );
    // No temporary file is left behind once the replaced ones are removed: only the
    // lockfile and the guard.
    sweeper::flush();
    assert_eq!(
        names(&dir.path().join("lock")),
        [".lock.json.guard", "lock.json"]
    );
}

/// Heartbeats update on the blocking pool; they remove the replaced lockfile themselves,
/// at once, rather than queue it for the sweeper's one thread (which fell behind
/// 10,000 locks renewing each second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_on_the_pool_removes_the_replaced_file_itself() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let Write::Done(mut version) = store.create(Bytes::from_static(b"{}")).await.unwrap() else {
        panic!("a new lockfile is created")
    };
    for i in 0..20 {
        let body = Bytes::from(format!("{{\"n\":{i}}}"));
        let Write::Done(v) = store.update(body, &version).await.unwrap() else {
            panic!("no other writer")
        };
        version = v;
        assert_eq!(
            names(&dir.path().join("lock")),
            [".lock.json.guard", "lock.json"],
            "nothing left for the sweeper"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_write_removes_old_stray_temporary_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("lock");
    fs::create_dir_all(&folder).unwrap();
    let stray = |name: &str, age: Duration| {
        let file = File::create(folder.join(name)).unwrap();
        file.set_modified(std::time::SystemTime::now() - age)
            .unwrap();
    };
    stray(".lock.json.0123456789abcdef-1f-0.tmp", STRAY_AGE * 2); // left by a dead process
    stray(".lock.json.0123456789abcdef-1f-1.tmp", Duration::ZERO); // a write in flight
    stray("result.tmp", STRAY_AGE * 2); // not ours
    let store = store(dir.path());
    let Write::Done(_) = store.create(Bytes::from_static(b"{}")).await.unwrap() else {
        panic!("a new lockfile is created")
    };
    assert_eq!(
        names(&folder),
        [
            ".lock.json.0123456789abcdef-1f-1.tmp",
            "lock.json",
            "result.tmp"
        ]
    );
}

/// Users make a fresh lock object for every `with`: one made on a folder this process has
/// used knows where its calls may run before its first call, and does not list the folder
/// again for strays within STRAY_AGE of the last listing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_store_on_a_known_folder_does_not_look_at_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let first = store(dir.path());
    assert_eq!(first.files.place.load(Ordering::Relaxed), UNKNOWN);
    let Write::Done(_) = first.create(Bytes::from_static(b"{}")).await.unwrap() else {
        panic!("a new lockfile is created")
    };
    let place = first.files.place.load(Ordering::Relaxed);
    assert_ne!(place, UNKNOWN, "the first call looked");
    let stray = dir
        .path()
        .join("lock")
        .join(".lock.json.0123456789abcdef-1f-0.tmp");
    File::create(&stray)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - STRAY_AGE * 2)
        .unwrap();
    let fresh = store(dir.path());
    assert_eq!(fresh.files.place.load(Ordering::Relaxed), place);
    fresh.overwrite(Bytes::from_static(b"{}")).await.unwrap();
    assert!(stray.exists(), "the folder was listed again for strays");
    // Another folder is looked at as before.
    let other = tempfile::tempdir().unwrap();
    assert_eq!(
        store(other.path()).files.place.load(Ordering::Relaxed),
        UNKNOWN
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_makes_a_missing_lockfile_and_its_folder() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let version = store.overwrite(Bytes::from_static(b"{}")).await.unwrap();
    assert_eq!(store.read().await.unwrap().unwrap().version, version);
    assert_eq!(names(&dir.path().join("lock")), ["lock.json"]);
}

/// How long [`another_updater`] holds the guard.
const HOLD: Duration = Duration::from_millis(300);

/// Another process in the middle of an update: it holds the guard (from before this
/// returns) for [`HOLD`].
fn another_updater(dir: &Path) -> std::thread::JoinHandle<()> {
    let guard = File::create(dir.join("lock").join(".lock.json.guard")).unwrap();
    guard.lock().unwrap();
    std::thread::spawn(move || {
        std::thread::sleep(HOLD);
        drop(guard);
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_waits_for_another_updater_instead_of_failing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let Write::Done(version) = store.create(Bytes::from_static(b"{}")).await.unwrap() else {
        panic!("a new lockfile is created")
    };
    // Counted from before the other updater's thread starts its hold: a test thread held
    // up after the spawn (a loaded machine) would otherwise count less than the hold.
    let started = Instant::now();
    let other = another_updater(dir.path());
    let done = store
        .update(Bytes::from_static(b"{\"n\":1}"), &version)
        .await
        .unwrap();
    assert!(matches!(done, Write::Done(_)));
    assert!(
        started.elapsed() >= HOLD - Duration::from_millis(50),
        "it waited for the guard"
    );
    other.join().unwrap();
}

#[test]
fn on_a_callers_own_thread_an_update_still_waits_for_another_updater() {
    use crate::runtime::drive;
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let Write::Done(version) = drive(store.create(Bytes::from_static(b"{}"))).unwrap() else {
        panic!("a new lockfile is created")
    };
    // The first call looked at the file system; from now on calls driven here run here
    // if it is local, never on a runtime worker.
    let local = place::is_local(store.files.place.load(Ordering::Relaxed));
    assert_eq!(drive(async { store.inline() }), local);
    assert!(
        !store.inline(),
        "not on a thread that drives a caller's wait"
    );
    let started = Instant::now(); // before the hold starts, as above
    let other = another_updater(dir.path());
    let done = drive(store.update(Bytes::from_static(b"{\"n\":1}"), &version)).unwrap();
    assert!(matches!(done, Write::Done(_)));
    assert!(
        started.elapsed() >= HOLD - Duration::from_millis(50),
        "it waited for the guard"
    );
    other.join().unwrap();
}

#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn calls_run_inline_only_on_file_systems_known_to_be_local() {
    let on = |dir: &str| place::of(&Path::new(dir).join("lock"));
    assert_eq!(on("/dev/shm"), LOCAL, "tmpfs is local");
    // procfs stands for any file system not on the list (NFS, SMB, FUSE).
    assert_eq!(on("/proc/self"), REMOTE);
}

/// The journal as jbd2's /proc listing shows it, against ext4's own word where the kernel
/// gives it (/sys/fs/ext4/<device>/journal_task, `<none>` without a journal).
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn an_ext4_journal_is_seen_as_the_kernel_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(name) = place::block_device(dir.path()) else {
        eprintln!("skipped: the temporary folder is on no block device (tmpfs, overlayfs)");
        return;
    };
    let Ok(task) = fs::read_to_string(format!("/sys/fs/ext4/{name}/journal_task")) else {
        eprintln!("skipped: {name} is not ext4, or the kernel has no journal_task file");
        return;
    };
    let journal = task.trim() != "<none>";
    assert_eq!(place::ext4_journal(dir.path()), Some(journal));
    let expected = if journal { LOCAL } else { LOCAL_NO_JOURNAL };
    assert_eq!(place::of(dir.path()), expected);
}

/// On ext4 without a journal a caller removes the lockfile its update replaced at once
/// (batched removals slow every later file creation there, `place`); elsewhere it may
/// leave it to the sweeper.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[test]
fn without_a_journal_a_caller_removes_what_its_update_replaced() {
    use crate::runtime::drive;
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let Write::Done(mut version) = drive(store.create(Bytes::from_static(b"{}"))).unwrap() else {
        panic!("a new lockfile is created")
    };
    // Wherever the test runs (a journal, tmpfs, overlayfs): told it is ext4 without one.
    store.files.place.store(LOCAL_NO_JOURNAL, Ordering::Relaxed);
    for i in 0..20 {
        let body = Bytes::from(format!("{{\"n\":{i}}}"));
        let Write::Done(v) = drive(store.update(body, &version)).unwrap() else {
            panic!("no other writer")
        };
        version = v;
        assert_eq!(
            names(&dir.path().join("lock")),
            [".lock.json.guard", "lock.json"],
            "no replaced lockfile waits for the sweeper"
        );
    }
}

/// A store on `dir`'s lockfile, created, if the folder is on a local file system (on NFS
/// waiters poll, and there is nothing to watch).
#[cfg(any(target_os = "linux", target_os = "android"))]
async fn local_lockfile(dir: &Path) -> Option<FileStore> {
    let store = store(dir);
    let Write::Done(_) = store.create(Bytes::from_static(b"{}")).await.unwrap() else {
        panic!("a new lockfile is created")
    };
    place::is_local(store.files.place.load(Ordering::Relaxed)).then_some(store)
}

/// Whether a write by another store object on `dir` (which no in-process waker hears)
/// wakes every one of `wakes` within a generous 10 s.
#[cfg(any(target_os = "linux", target_os = "android"))]
async fn a_write_wakes(dir: &Path, wakes: &[&std::sync::Arc<tokio::sync::Notify>]) -> bool {
    let mut woken: Vec<_> = wakes.iter().map(|w| Box::pin(w.notified())).collect();
    for w in &mut woken {
        w.as_mut().enable();
    }
    store(dir)
        .overwrite(Bytes::from_static(b"{}"))
        .await
        .unwrap();
    let all = async {
        for w in woken {
            w.await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), all)
        .await
        .is_ok()
}

/// Another process's write wakes the waiters of a lockfile on a local file system;
/// nothing else would. Waiters on one folder share its watch.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_from_elsewhere_wakes_the_watchers_of_a_local_lockfile() {
    let dir = tempfile::tempdir().unwrap();
    let Some(waiter) = local_lockfile(dir.path()).await else {
        return;
    };
    let wake = std::sync::Arc::new(tokio::sync::Notify::new());
    let watch = waiter.watch(&wake).expect("a local folder is watched");
    let again = waiter.watch(&wake).expect("two waiters share the watch");
    for _ in 0..2 {
        assert!(
            a_write_wakes(dir.path(), &[&wake]).await,
            "the write woke the waiter"
        );
    }
    drop(watch);
    assert!(
        a_write_wakes(dir.path(), &[&wake]).await,
        "the second waiter still hears"
    );
    drop(again);
}

/// Spellings of one folder (`a/./lock`, `a/lock`) make locks with wakers of their own: a
/// write wakes every waiter's, whichever spelling it waits through.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_wakes_the_waiters_of_every_spelling_of_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let Some(plain) = local_lockfile(dir.path()).await else {
        return;
    };
    let dotted = store(&dir.path().join("."));
    let a = std::sync::Arc::new(tokio::sync::Notify::new());
    let b = std::sync::Arc::new(tokio::sync::Notify::new());
    let _wa = plain.watch(&a).expect("watched");
    let wb = dotted.watch(&b).expect("watched");
    assert!(
        a_write_wakes(dir.path(), &[&a, &b]).await,
        "both spellings' waiters were woken"
    );
    drop(wb);
    assert!(
        a_write_wakes(dir.path(), &[&a]).await,
        "the other spelling's waiter still hears"
    );
}

#[tokio::test]
async fn delete_if_deletes_only_the_version_expected_and_keeps_the_guard() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let Write::Done(first) = store.create(Bytes::from_static(b"{}")).await.unwrap() else {
        panic!("a new lockfile is created")
    };
    let Write::Done(second) = store
        .update(Bytes::from_static(b"{\"a\":1}"), &first)
        .await
        .unwrap()
    else {
        panic!("updated")
    };
    assert!(!store.delete_if(&first).await.unwrap(), "an older version");
    assert!(store.read().await.unwrap().is_some());
    assert!(store.delete_if(&second).await.unwrap());
    assert!(store.read().await.unwrap().is_none());
    assert!(dir.path().join("lock").join(".lock.json.guard").exists());
    assert!(
        !store.delete_if(&second).await.unwrap(),
        "nothing left to delete"
    );
}
