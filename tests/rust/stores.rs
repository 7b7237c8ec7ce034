//! The store conformance suite (tests/rust/conformance) run for every store the lock core has:
//! memory, local files, S3 on moto, Azure on Azurite and GCS on the fake, over HTTP; the
//! counting wrapper over each; and the simulation's store. The servers are started by
//! tests/servers/servers.py, which runs this test with their addresses in `BLOB_LOCK_TEST_STORES`
//! (`make test-rust` does: `python tests/servers/servers.py cargo test`).

mod conformance;
mod sim;

use blob_lock::store::{self, Access, Counted, LockStore, Requests};
use conformance::Deletes;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::path::Path;
use std::sync::Arc;

const VIEWS: usize = 8;

fn open(uri: &str, access: &Access) -> Arc<dyn LockStore> {
    store::open(
        uri,
        access,
        &blob_lock::LockOptions::new(30.0).unwrap().timing,
    )
    .unwrap()
}

fn fresh(root: &str) -> String {
    format!("{root}/{}", uuid::Uuid::new_v4().simple())
}

/// Views of a new lock below `root`.
fn views(root: &str, access: &Access) -> conformance::Views {
    let uri = fresh(root);
    (0..VIEWS).map(|_| open(&uri, access)).collect()
}

fn memory_views() -> conformance::Views {
    views("memory://conformance", &Access::default())
}

fn file_views(root: &Path) -> conformance::Views {
    views(root.to_str().unwrap(), &Access::default())
}

/// A store of tests/servers/servers.py: its root URI (an empty bucket) and storage options.
fn served(name: &str) -> (String, Access) {
    let Ok(stores) = std::env::var("BLOB_LOCK_TEST_STORES") else {
        panic!(
            "BLOB_LOCK_TEST_STORES is not set: run the Rust tests as `make test-rust` does, \
             `python tests/servers/servers.py cargo test`, which starts moto, Azurite and the GCS fake"
        )
    };
    let stores: serde_json::Value = serde_json::from_str(&stores).unwrap();
    let store = &stores[name];
    let options = store["options"]
        .as_object()
        .unwrap_or_else(|| panic!("no store {name} in BLOB_LOCK_TEST_STORES"))
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    (
        store["root"].as_str().unwrap().to_string(),
        Access::options(options),
    )
}

async fn served_store_conforms(name: &str) {
    let (root, access) = served(name);
    // Each of the served stores honours a conditional delete (S3 and Azure If-Match, GCS
    // x-goog-if-generation-match), which blob-lock sends itself (object_store has none).
    conformance::all(|| views(&root, &access), Deletes::Conditional).await;
    conformance::all(|| counted(views(&root, &access)), Deletes::Conditional).await;
    conformance::lists(&fresh(&root), &access).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_on_moto_conforms() {
    served_store_conforms("s3").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_on_azurite_conforms() {
    served_store_conforms("az").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcs_on_the_fake_conforms() {
    served_store_conforms("gs").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_and_files_list() {
    conformance::lists(&fresh("memory://conformance"), &Access::default()).await;
    let root = tempfile::tempdir().unwrap();
    let prefix = fresh(root.path().to_str().unwrap());
    std::fs::create_dir(&prefix).unwrap();
    conformance::lists(&prefix, &Access::default()).await;
}

fn counted(views: conformance::Views) -> conformance::Views {
    views
        .into_iter()
        .map(|v| Arc::new(Counted::new(v)) as Arc<dyn LockStore>)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_conforms() {
    conformance::all(memory_views, Deletes::Conditional).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_store_conforms() {
    let root = tempfile::tempdir().unwrap();
    conformance::all(|| file_views(root.path()), Deletes::Conditional).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counted_stores_conform() {
    let root = tempfile::tempdir().unwrap();
    conformance::all(|| counted(memory_views()), Deletes::Conditional).await;
    // Through the wrapper a conditional delete stays conditional.
    conformance::all(|| counted(file_views(root.path())), Deletes::Conditional).await;
}

/// The counting wrapper's own promise: one count per request, by kind.
#[tokio::test]
async fn the_counting_wrapper_counts_each_request_by_kind() {
    let c = Counted::new(memory_views().remove(0));
    let s: &dyn LockStore = &c;
    let body = || bytes::Bytes::from_static(b"{}");
    s.read().await.unwrap();
    let store::Write::Done(v) = s.create(body()).await.unwrap() else {
        panic!("the first create must land")
    };
    s.update(body(), &v).await.unwrap();
    s.overwrite(body()).await.unwrap();
    s.overwrite(body()).await.unwrap();
    s.delete().await.unwrap();
    let want = Requests {
        reads: 1,
        creates: 1,
        updates: 1,
        overwrites: 2,
        deletes: 1,
    };
    assert_eq!(c.requests(), want);
    assert_eq!(want.total(), 6);
}

/// The simulation's store, without faults, on virtual time: the oracle of the simulation
/// judges locks over it, so it must keep the contract itself.
#[tokio::test(start_paused = true)]
async fn simulated_store_conforms() {
    let faults = sim::Faults::of(sim::Mode::Healthy);
    let views = || {
        let world = sim::World::new();
        let mut rng = StdRng::seed_from_u64(7);
        (0..VIEWS)
            .map(|i| sim::Process::new(&world, &format!("p{i}"), &faults, &mut rng).store(i as u64))
            .collect()
    };
    conformance::all(views, Deletes::None).await;
}
