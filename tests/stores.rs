//! The store conformance suite (tests/conformance) run for every store the lock core has:
//! memory, local files, the counting wrapper over each, and the simulation's store. The
//! cloud stores run the same contract over HTTP in the Python tests (moto, Azurite, the GCS
//! fake) and in the probe every process makes before its first cas write.

mod conformance;
mod sim;

use blob_lock::store::{self, Counted, LockStore, Requests};
use conformance::Deletes;
use rand::rngs::StdRng;
use rand::SeedableRng;
use std::path::Path;
use std::sync::Arc;

const VIEWS: usize = 8;

fn open(uri: &str) -> Arc<dyn LockStore> {
    store::open(
        uri,
        &store::Access::default(),
        &blob_lock::LockOptions::new(30.0).unwrap().timing,
    )
    .unwrap()
}

fn memory_views() -> conformance::Views {
    let uri = format!("memory://conformance/{}", uuid::Uuid::new_v4().simple());
    (0..VIEWS).map(|_| open(&uri)).collect()
}

fn file_views(root: &Path) -> conformance::Views {
    let dir = root.join(uuid::Uuid::new_v4().simple().to_string());
    let uri = dir.to_str().unwrap().to_string();
    (0..VIEWS).map(|_| open(&uri)).collect()
}

fn counted(views: conformance::Views) -> conformance::Views {
    views
        .into_iter()
        .map(|v| Arc::new(Counted::new(v)) as Arc<dyn LockStore>)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_conforms() {
    conformance::all(memory_views, Deletes::Unconditional).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_store_conforms() {
    let root = tempfile::tempdir().unwrap();
    conformance::all(|| file_views(root.path()), Deletes::Conditional).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counted_stores_conform() {
    let root = tempfile::tempdir().unwrap();
    conformance::all(|| counted(memory_views()), Deletes::Unconditional).await;
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
