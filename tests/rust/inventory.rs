//! Every lock under a prefix (`ls`) and the pruning of old ones, on the memory and file
//! stores: nested locks, pages, each state, unreadable lockfiles, and prune deleting only
//! what is released or expired long enough and unchanged since it was listed.

use blob_lock::inventory::{prune, Entry, Inventory, Pruned, PAGE};
use blob_lock::lease::Settings;
use blob_lock::lockfile::LockFile;
use blob_lock::store;
use blob_lock::{Lock, LockOptions, LockState};
use bytes::Bytes;
use chrono::Utc;
use std::collections::BTreeMap;
use std::time::Duration;

fn opts() -> LockOptions {
    LockOptions::new(30.0).unwrap()
}

/// Locks that prune may delete a moment after their last acquisition (with [`trusting`]):
/// no create of theirs can be on its way for longer than their short expire.
fn short() -> LockOptions {
    LockOptions::new(SHORT).unwrap()
}

const SHORT: f64 = 0.5;

/// prune with clocks trusted to agree (`clock_skew` 0): it keeps a lockfile only until no
/// create of its last acquisition can be on its way ([`settled`]).
fn trusting() -> LockOptions {
    let mut o = opts();
    o.timing = Settings {
        clock_skew: Some(0.0),
        ..Settings::with_expire(30.0)
    }
    .timing()
    .unwrap();
    o
}

/// Waits until the locks of [`short`] acquired before may be pruned.
async fn settled() {
    tokio::time::sleep(Duration::from_secs_f64(SHORT * 1.2)).await;
}

async fn all(prefix: &str) -> BTreeMap<String, Entry> {
    let mut inventory = Inventory::new(prefix, &opts()).unwrap();
    let mut out = BTreeMap::new();
    loop {
        let page = inventory.next_page().await.unwrap();
        if page.is_empty() {
            return out;
        }
        assert!(page.len() <= PAGE + 16, "a page of {}", page.len());
        for e in page {
            assert!(out.insert(e.uri.clone(), e).is_none(), "listed twice");
        }
    }
}

fn state(e: &Entry) -> &'static str {
    e.seen.as_ref().map_or("invalid", |s| s.state.as_str())
}

/// A lockfile last written `ago` by its writer's clock, as a dead holder leaves it.
async fn abandoned(uri: &str, ago: Duration, token: u64) {
    let wall = Utc::now() - chrono::Duration::from_std(ago).unwrap();
    let body = LockFile::acquired("dead", Duration::from_secs(30), token, "cas", wall);
    let st = store::open(uri, &store::Access::default(), &opts().timing).unwrap();
    st.overwrite(Bytes::from(body.encode())).await.unwrap();
}

async fn raw(uri: &str, bytes: &'static [u8]) {
    let st = store::open(uri, &store::Access::default(), &opts().timing).unwrap();
    st.overwrite(Bytes::from_static(bytes)).await.unwrap();
}

/// `aged`: the store's clock can be set back too (a file's mtime), as it is for a lockfile
/// really written long ago; otherwise the store says the old lockfile was written just now.
async fn every_state_listed_and_pruned(root: &str, aged: bool) {
    let o = opts();
    let held = Lock::new(&format!("{root}/a/held"), &o).unwrap();
    let _lease = held.acquire(None).await.unwrap();
    let released = Lock::new(&format!("{root}/a/b/released"), &short()).unwrap();
    released
        .acquire(None)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    abandoned(&format!("{root}/old"), Duration::from_secs(7200), 4).await;
    if aged {
        let two_hours_ago = std::time::SystemTime::now() - Duration::from_secs(7200);
        std::fs::File::options()
            .write(true)
            .open(format!("{root}/old/lock.json"))
            .unwrap()
            .set_modified(two_hours_ago)
            .unwrap();
    }
    abandoned(&format!("{root}/recent"), Duration::from_secs(40), 2).await;
    raw(&format!("{root}/junk"), b"not a lockfile").await;

    let listed = all(root).await;
    let states: BTreeMap<_, _> = listed
        .iter()
        .map(|(uri, e)| (uri.strip_prefix(root).unwrap().to_string(), state(e)))
        .collect();
    let expected: BTreeMap<String, &str> = [
        ("/a/held", "held"),
        ("/a/b/released", "released"),
        ("/old", "expired"),
        ("/recent", "expired"),
        ("/junk", "invalid"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(states, expected);
    // Listing under a sub-prefix names the same locks.
    let sub = all(&format!("{root}/a/")).await;
    assert_eq!(
        sub.keys().cloned().collect::<Vec<_>>(),
        [format!("{root}/a/b/released"), format!("{root}/a/held")]
    );

    let hour = Duration::from_secs(3600);
    let mut outcomes = BTreeMap::new();
    for (uri, e) in &listed {
        let dry = prune(e, hour, &o, false).await;
        let done = prune(e, hour, &o, true).await;
        outcomes.insert(uri.strip_prefix(root).unwrap().to_string(), (dry, done));
    }
    if aged {
        assert_eq!(outcomes["/old"], (Pruned::WouldDelete, Pruned::Deleted));
    } else {
        // Both clocks must agree that it is old: the store's says it was written just now.
        assert_eq!(outcomes["/old"], (Pruned::TooRecent, Pruned::TooRecent));
    }
    assert_eq!(outcomes["/a/held"], (Pruned::Held, Pruned::Held));
    assert_eq!(outcomes["/recent"], (Pruned::TooRecent, Pruned::TooRecent));
    assert_eq!(outcomes["/a/b/released"].1, Pruned::TooRecent);
    assert!(matches!(outcomes["/junk"].1, Pruned::Unreadable(_)));
    let after = all(root).await;
    assert_eq!(after.contains_key(&format!("{root}/old")), !aged);
    assert_eq!(after.len(), if aged { 4 } else { 5 });
    // A released lock is pruned with a short enough age, once its last acquisition is older
    // than how far clocks may disagree (`clock_skew`, 60 s by default) plus its expire: deleted
    // sooner, a writer whose clock is behind ours could start the next tokens below its last.
    let e = &after[&format!("{root}/a/b/released")];
    let last = e.seen.as_ref().unwrap().lockfile.as_ref().unwrap().token;
    assert_eq!(prune(e, Duration::ZERO, &o, true).await, Pruned::TooRecent);
    settled().await;
    assert_eq!(
        prune(e, Duration::ZERO, &trusting(), true).await,
        Pruned::Deleted
    );
    assert_eq!(
        released.inspect().await.unwrap().state,
        LockState::Unlocked,
        "deleted"
    );
    // The next acquisition starts a new lockfile's tokens above the deleted one's: a
    // resource fenced by them refuses every earlier holder still.
    let again = released.acquire(None).await.unwrap();
    assert!(again.token() > last + 1, "{} after {last}", again.token());
    again.release().await.unwrap();
}

#[tokio::test]
async fn every_state_is_listed_and_only_old_free_locks_are_pruned_in_memory() {
    every_state_listed_and_pruned("memory://inventory/root", false).await;
}

#[tokio::test]
async fn every_state_is_listed_and_only_old_free_locks_are_pruned_in_files() {
    let dir = tempfile::tempdir().unwrap();
    every_state_listed_and_pruned(dir.path().to_str().unwrap(), true).await;
    assert!(!dir.path().join("old").join("lock.json").exists());
}

#[tokio::test]
async fn a_lock_taken_and_released_since_it_was_listed_is_not_pruned() {
    let uri = "memory://inventory-changed/x";
    let lock = Lock::new(uri, &short()).unwrap();
    let first = lock.acquire(None).await.unwrap();
    first.release().await.unwrap();
    let listed = all("memory://inventory-changed").await;
    let entry = &listed[uri];
    // Someone takes and releases it after the listing: a new token.
    let second = lock.acquire(None).await.unwrap();
    second.release().await.unwrap();
    settled().await;
    let pruned = prune(entry, Duration::ZERO, &trusting(), true).await;
    let said = format!("token {} then, {} now", first.token(), second.token());
    assert!(
        matches!(&pruned, Pruned::Changed(why) if why.contains(&said)),
        "{pruned:?}"
    );
    let seen = lock.inspect().await.unwrap();
    assert_eq!(seen.state, LockState::Released, "kept, and released again");
    assert_eq!(
        seen.lockfile.unwrap().token,
        second.token() + 1,
        "the prune's own take counted"
    );
}

#[tokio::test]
async fn a_lock_held_since_it_was_listed_is_not_pruned() {
    let uri = "memory://inventory-held/x";
    let lock = Lock::new(uri, &short()).unwrap();
    lock.acquire(None).await.unwrap().release().await.unwrap();
    let listed = all("memory://inventory-held").await;
    settled().await;
    let lease = lock.acquire(None).await.unwrap();
    let pruned = prune(&listed[uri], Duration::ZERO, &trusting(), true).await;
    assert!(matches!(pruned, Pruned::Changed(_)), "{pruned:?}");
    assert!(!lease.is_lost());
    assert_eq!(lock.inspect().await.unwrap().state, LockState::Held);
}

#[tokio::test]
async fn a_name_no_lock_uri_can_have_is_listed_as_invalid_and_the_rest_still_listed() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a#b", "fine"] {
        std::fs::create_dir(dir.path().join(name)).unwrap();
        std::fs::write(dir.path().join(name).join("lock.json"), b"{}").unwrap();
    }
    // A file:// URI cannot hold '#' (a plain path could).
    let listed = all(&format!("file://{}", dir.path().display())).await;
    let states: Vec<_> = listed.values().map(state).collect();
    assert_eq!(states, ["invalid", "invalid"], "{listed:?}");
    let odd = listed.keys().find(|u| u.ends_with("a#b")).unwrap();
    assert!(listed[odd].seen.as_ref().unwrap_err().contains('#'));
}

#[tokio::test]
async fn pages_cover_a_large_prefix_once_each() {
    let o = opts();
    let n = PAGE * 2 + 7;
    for i in 0..n {
        let lock = Lock::new(&format!("memory://inventory-many/l{i:04}"), &o).unwrap();
        lock.acquire(None).await.unwrap().release().await.unwrap();
    }
    let listed = all("memory://inventory-many").await;
    assert_eq!(listed.len(), n);
    assert!(listed.values().all(|e| state(e) == "released"));
}

#[tokio::test]
async fn a_prefix_that_is_no_uri_or_no_folder_is_refused() {
    for (prefix, why) in [
        ("", "invalid prefix"),
        ("ftp://host/x", "unknown scheme"),
        ("s3:bucket/x", "two slashes"),
        ("/no/such/folder/for/blob-lock", "no folder at"),
    ] {
        let err = Inventory::new(prefix, &opts()).unwrap_err().to_string();
        assert!(err.contains(why), "{prefix:?}: {err}");
    }
}
