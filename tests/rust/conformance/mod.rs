//! What every [`LockStore`] promises the protocol, written once and run for every store
//! (tests/rust/stores.rs), in the manner of object_store's `integration.rs`. A new store passes
//! these before a lock runs on it.
//!
//! Each check takes *views*: store objects that name the same, initially absent, lockfile
//! (as two processes' stores would); most use one.

use blob_lock::store::{self, Access, Listing, LockStore, Version, Write};
use bytes::Bytes;
use std::sync::Arc;
use std::time::Duration;

/// Views of one absent lockfile.
pub type Views = Vec<Arc<dyn LockStore>>;

fn body(n: u32) -> Bytes {
    Bytes::from(format!("{{\"writer_id\": \"conformance\", \"n\": {n}}}"))
}

async fn read_bytes(store: &dyn LockStore) -> Option<(Bytes, Version)> {
    store.read().await.unwrap().map(|s| (s.bytes, s.version))
}

/// Create, update and overwrite on one view: each write's outcome, the version it returns,
/// and what a read shows after it.
pub async fn writes_and_reads(views: Views) {
    let s = views[0].as_ref();
    assert!(
        s.read().await.unwrap().is_none(),
        "a new lockfile is absent"
    );

    // Create-if-absent lands once; the version it returns is the one a read shows.
    let Write::Done(v1) = s.create(body(1)).await.unwrap() else {
        panic!("the first create must land")
    };
    let (bytes, read_v) = read_bytes(s).await.unwrap();
    assert_eq!(bytes, body(1));
    assert_eq!(read_v, v1, "a read shows the version the write returned");
    assert_eq!(
        s.create(body(2)).await.unwrap(),
        Write::Conflict { resent: false }
    );
    assert_eq!(
        read_bytes(s).await.unwrap().0,
        body(1),
        "a refused create wrote nothing"
    );

    // Update-if-match lands on the current version only, and every write changes it.
    let Write::Done(v2) = s.update(body(3), &v1).await.unwrap() else {
        panic!("an update on the current version must land")
    };
    assert_ne!(v2, v1);
    assert_eq!(read_bytes(s).await.unwrap(), (body(3), v2.clone()));
    assert_eq!(
        s.update(body(4), &v1).await.unwrap(),
        Write::Conflict { resent: false },
        "stale"
    );
    // A version never written, in the shape the store's versions have (GCS's carry a
    // generation number, which its conditional update requires).
    let never = Version {
        e_tag: Some("\"never-written\"".into()),
        version: v1.version.as_ref().map(|_| "987654321".into()),
    };
    assert_eq!(
        s.update(body(5), &never).await.unwrap(),
        Write::Conflict { resent: false }
    );
    assert_eq!(
        read_bytes(s).await.unwrap().0,
        body(3),
        "refused updates wrote nothing"
    );

    // The same bytes again land on the current version; the version may stay (S3's ETag is
    // the bytes' MD5), so the protocol never writes the same bytes twice: every body it
    // writes carries a new write count and time.
    let Write::Done(v3) = s.update(body(3), &v2).await.unwrap() else {
        panic!("an update on the current version must land")
    };
    assert_eq!(read_bytes(s).await.unwrap(), (body(3), v3.clone()));

    // Overwrite lands whatever is there, and its version is current.
    let v4 = s.overwrite(body(6)).await.unwrap();
    assert_ne!(v4, v3);
    assert_eq!(read_bytes(s).await.unwrap(), (body(6), v4.clone()));
    assert!(matches!(
        s.update(body(7), &v4).await.unwrap(),
        Write::Done(_)
    ));
}

/// Overwrite makes a lockfile that is not there (lww's first acquisition).
pub async fn overwrite_creates(views: Views) {
    let s = views[0].as_ref();
    let v = s.overwrite(body(1)).await.unwrap();
    assert_eq!(read_bytes(s).await.unwrap(), (body(1), v));
}

/// A write by one view is what another reads, with the same version, and the other can
/// update on it.
pub async fn views_agree(views: Views) {
    let (a, b) = (views[0].as_ref(), views[1].as_ref());
    let Write::Done(v1) = a.create(body(1)).await.unwrap() else {
        panic!("the first create must land")
    };
    assert_eq!(read_bytes(b).await.unwrap(), (body(1), v1.clone()));
    assert_eq!(
        b.create(body(2)).await.unwrap(),
        Write::Conflict { resent: false }
    );
    let Write::Done(_) = b.update(body(3), &v1).await.unwrap() else {
        panic!("another view's update on the current version must land")
    };
    assert_eq!(
        a.update(body(4), &v1).await.unwrap(),
        Write::Conflict { resent: false }
    );
    assert_eq!(read_bytes(a).await.unwrap().0, body(3));
}

/// Views racing the same conditional write: exactly one lands, and the lockfile holds its
/// body. (A store whose conditions fail here would let two owners hold a cas lock.)
pub async fn racing_writes_have_one_winner(views: Views) {
    // Each round writes bytes of its own: the same bytes again may keep the version (S3's
    // ETag is their MD5), and a second update on it would land too.
    async fn race(views: &Views, round: u32, expected: Option<Version>) -> Vec<usize> {
        let tasks: Vec<_> = views
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let (s, expected) = (s.clone(), expected.clone());
                tokio::spawn(async move {
                    let b = body(round + i as u32);
                    let w = match expected {
                        None => s.create(b).await.unwrap(),
                        Some(v) => s.update(b, &v).await.unwrap(),
                    };
                    matches!(w, Write::Done(_))
                })
            })
            .collect();
        let mut won = Vec::new();
        for (i, t) in tasks.into_iter().enumerate() {
            if t.await.unwrap() {
                won.push(i);
            }
        }
        won
    }
    let won = race(&views, 100, None).await;
    assert_eq!(won.len(), 1, "racing creates: winners {won:?}");
    let (bytes, version) = read_bytes(views[0].as_ref()).await.unwrap();
    assert_eq!(bytes, body(100 + won[0] as u32));
    let won = race(&views, 200, Some(version)).await;
    assert_eq!(won.len(), 1, "racing updates: winners {won:?}");
    assert_eq!(
        read_bytes(views[0].as_ref()).await.unwrap().0,
        body(200 + won[0] as u32)
    );
}

/// Every view of one lockfile names it alike (the key of the process-wide tables: receipts, wakers), and
/// `quiesced` returns once nothing is running.
pub async fn identity_and_quiesced(views: Views) {
    let id = views[0].identity();
    for v in &views[1..] {
        assert_eq!(v.identity(), id, "views of one lockfile share an identity");
    }
    views[0].read().await.unwrap();
    views[0].quiesced().await;
}

/// What a store's deletes promise (`prune` and `doctor` rely on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deletes {
    /// It has none (the simulation's store): not checked.
    None,
    /// `delete_if` deletes only at the version given.
    Conditional,
}

/// `delete` removes the lockfile and a create then starts afresh; `delete_if` at the
/// current version deletes and says so; a stale one, where deletes are conditional, leaves
/// the lockfile and says false; every view sees what a delete did.
pub async fn deletes(views: Views, kind: Deletes) {
    if kind == Deletes::None {
        return;
    }
    let (a, b) = (views[0].as_ref(), views[1].as_ref());
    let said = b.conditional_deletes().await;
    assert_eq!(
        said.is_ok(),
        kind == Deletes::Conditional,
        "the store says of its conditional deletes: {said:?}"
    );
    let Write::Done(first) = a.create(body(1)).await.unwrap() else {
        panic!("the first create must land")
    };
    a.delete().await.unwrap();
    assert!(
        b.read().await.unwrap().is_none(),
        "another view still reads a deleted lockfile"
    );
    let Write::Done(v1) = b.create(body(2)).await.unwrap() else {
        panic!("a create after a delete must land")
    };
    let Write::Done(v2) = a.update(body(3), &v1).await.unwrap() else {
        panic!("an update at the current version must land")
    };
    match kind {
        Deletes::Conditional => {
            for stale in [&first, &v1] {
                assert!(
                    !b.delete_if(stale).await.unwrap(),
                    "deleted at a stale version"
                );
                assert_eq!(
                    read_bytes(a).await.unwrap().0,
                    body(3),
                    "a stale delete_if removed it"
                );
            }
        }
        Deletes::None => {}
    }
    assert!(
        b.delete_if(&v2).await.unwrap(),
        "delete_if at the current version"
    );
    assert!(
        a.read().await.unwrap().is_none(),
        "delete_if said it deleted, and it is there"
    );
}

/// The store says it honours conditional writes (the probe of a store over HTTP agrees):
/// cas runs on it.
pub async fn honours_conditions(views: Views) {
    assert!(
        views[0].conditional_writes(true).await.unwrap(),
        "the store says it does not honour conditional writes"
    );
}

async fn list_all(prefix: &str, access: &Access, page: usize) -> Vec<String> {
    let mut listing = Listing::new(prefix, access, Duration::from_secs(30)).unwrap();
    let mut all = Vec::new();
    loop {
        let next = listing.next_page(page).await.unwrap();
        if next.is_empty() {
            break;
        }
        all.extend(next);
    }
    all.sort();
    all
}

/// `Listing` (`ls`, `prune`) finds every lock below a prefix, at any depth, in pages of any
/// size, and nothing that is not a lockfile; a deleted lock is gone from the next listing.
/// `prefix` is an empty place (a new folder, or a new key prefix in a bucket).
pub async fn lists(prefix: &str, access: &Access) {
    let timing = blob_lock::LockOptions::new(30.0).unwrap().timing;
    let names = ["a", "b/c", "b/d/e", "f"];
    let mut stores = Vec::new();
    for name in names {
        let s = store::open(&format!("{prefix}/{name}"), access, &timing).unwrap();
        assert!(matches!(s.create(body(1)).await.unwrap(), Write::Done(_)));
        stores.push(s);
    }
    // A result beside the locks, as mops keeps them: not a lock.
    let result = format!("{prefix}/b/result.json");
    let other = store::open_object(&result, access, Duration::from_secs(30)).unwrap();
    assert!(matches!(
        other.create(body(2)).await.unwrap(),
        Write::Done(_)
    ));

    let want: Vec<String> = names.iter().map(|n| format!("{prefix}/{n}")).collect();
    for page in [1, 2, 1000] {
        assert_eq!(
            list_all(prefix, access, page).await,
            want,
            "pages of {page}"
        );
    }
    stores[1].delete().await.unwrap();
    let left: Vec<String> = want
        .iter()
        .filter(|u| !u.ends_with("/b/c"))
        .cloned()
        .collect();
    assert_eq!(list_all(prefix, access, 2).await, left, "after a delete");
}

/// Every check above, each on fresh views from `views` (a new absent lockfile each call).
pub async fn all(views: impl Fn() -> Views, kind: Deletes) {
    honours_conditions(views()).await;
    writes_and_reads(views()).await;
    overwrite_creates(views()).await;
    views_agree(views()).await;
    racing_writes_have_one_winner(views()).await;
    identity_and_quiesced(views()).await;
    deletes(views(), kind).await;
}
