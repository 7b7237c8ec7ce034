//! The load of a store on its own: who gets the passes, and what is refused.

use super::*;

const MS: Duration = Duration::from_millis(1);
const FLOOR: Duration = Duration::from_secs(1);

fn load() -> Arc<Load> {
    Arc::new(Load::new("s3://test".into()))
}

fn waiting(load: &Load) -> usize {
    load.state().waiting
}

/// Every pass of `load` taken by a renewal that can wait.
async fn renewals_with_every_pass(load: &Arc<Load>, now: Instant) -> Vec<Pass> {
    let mut busy = Vec::new();
    for _ in 0..load.limit() {
        let kind = Kind::Renewal {
            deadline: now + FLOOR * 100,
        };
        busy.push(load.enter(kind, FLOOR, FLOOR).await.unwrap());
    }
    busy
}

/// Requests queued one after another, each noting its name when it gets a pass.
type Queued = (
    Arc<Mutex<Vec<&'static str>>>,
    Vec<tokio::task::JoinHandle<()>>,
);

async fn queued_in_order(load: &Arc<Load>, requests: Vec<(&'static str, Kind)>) -> Queued {
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for (name, kind) in requests {
        let (load, order) = (load.clone(), order.clone());
        tasks.push(tokio::spawn(async move {
            let pass = load.enter(kind, FLOOR, FLOOR).await.unwrap();
            order.lock().unwrap().push(name);
            tokio::time::sleep(MS).await;
            pass.end(Ending::Answered);
        }));
        tokio::task::yield_now().await;
    }
    (order, tasks)
}

/// Frees `busy` one pass at a time, then the order in which the queued requests went.
async fn order_of(busy: Vec<Pass>, (order, tasks): Queued) -> Vec<&'static str> {
    for pass in busy {
        pass.end(Ending::Answered);
        tokio::time::sleep(MS * 10).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    order
}

#[tokio::test(start_paused = true)]
async fn renewals_get_freed_passes_first_earliest_deadline_first() {
    let load = load();
    let limit = load.limit();
    // Every pass taken (reads may take three quarters of them).
    let now = Instant::now();
    let mut busy = Vec::new();
    for i in 0..limit {
        let kind = match i < limit - limit / 4 {
            true => Kind::Other,
            false => Kind::Renewal {
                deadline: now + FLOOR * 100,
            },
        };
        busy.push(load.enter(kind, FLOOR, FLOOR).await.unwrap());
    }
    let queued = queued_in_order(
        &load,
        vec![
            ("read", Kind::Other),
            (
                "late renewal",
                Kind::Renewal {
                    deadline: now + MS * 9000,
                },
            ),
            ("release", Kind::Release { deadline: None }),
            (
                "urgent renewal",
                Kind::Renewal {
                    deadline: now + MS * 3000,
                },
            ),
        ],
    )
    .await;
    assert_eq!(waiting(&load), 4);
    // Passes come free one at a time.
    assert_eq!(
        order_of(busy, queued).await,
        ["urgent renewal", "late renewal", "release", "read"]
    );
    assert_eq!(waiting(&load), 0);
    assert_eq!(load.depth(), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_quarter_of_the_passes_stays_free_for_renewals() {
    let load = load();
    let limit = load.limit();
    let mut held = Vec::new();
    for _ in 0..limit - limit / 4 {
        held.push(load.enter(Kind::Other, FLOOR, FLOOR).await.unwrap());
    }
    let more = tokio::time::timeout(MS * 100, load.enter(Kind::Other, FLOOR, FLOOR)).await;
    assert!(more.is_err(), "a read waits");
    let deadline = Instant::now() + FLOOR * 10;
    let renewal = tokio::time::timeout(
        MS * 100,
        load.enter(Kind::Renewal { deadline }, FLOOR, FLOOR),
    );
    assert!(renewal.await.is_ok(), "a renewal goes at once");
}

#[tokio::test(start_paused = true)]
async fn a_waiter_that_leaves_gives_its_place_and_any_pass_back() {
    let load = load();
    let limit = load.limit();
    let mut held = Vec::new();
    for _ in 0..limit {
        let deadline = Instant::now() + FLOOR * 10;
        held.push(
            load.enter(Kind::Renewal { deadline }, FLOOR, FLOOR)
                .await
                .unwrap(),
        );
    }
    for _ in 0..5 {
        let left = tokio::time::timeout(MS, load.enter(Kind::Other, FLOOR, FLOOR)).await;
        assert!(left.is_err());
    }
    assert_eq!(waiting(&load), 0, "those who left wait no more");
    drop(held);
    assert_eq!(load.depth().1, 0, "every pass given back");
    let pass = load.enter(Kind::Other, FLOOR, FLOOR).await.unwrap();
    drop(pass);
    assert_eq!(load.depth(), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_renewal_that_could_not_land_before_its_deadline_is_not_sent() {
    let load = load();
    // The store answers in 200 ms at best.
    let p = load.enter(Kind::Other, FLOOR, FLOOR).await.unwrap();
    tokio::time::sleep(MS * 200).await;
    p.end(Ending::Answered);
    let limit = load.limit();
    let mut held = Vec::new();
    for _ in 0..limit {
        let far = Instant::now() + FLOOR * 100;
        held.push(
            load.enter(Kind::Renewal { deadline: far }, FLOOR, FLOOR)
                .await
                .unwrap(),
        );
    }
    let deadline = Instant::now() + MS * 500;
    let load2 = load.clone();
    let late =
        tokio::spawn(async move { load2.enter(Kind::Renewal { deadline }, FLOOR, FLOOR).await });
    // A pass frees up when only 150 ms are left: less than the store's fastest answer.
    tokio::time::sleep(MS * 350).await;
    held.pop();
    match late.await.unwrap() {
        Err(TooLate(why)) => assert!(why.contains("not sent"), "{why}"),
        other => panic!("sent: {other:?}"),
    }
    assert_eq!(waiting(&load), 0);
}

#[tokio::test(start_paused = true)]
async fn a_renewal_may_take_until_its_deadline_on_a_slow_store() {
    let load = load();
    // The store answers in 3 s: the floor of 1 s would cut every request off.
    for _ in 0..20 {
        let p = load.enter(Kind::Other, FLOOR, FLOOR * 30).await.unwrap();
        tokio::time::sleep(FLOOR * 3).await;
        p.end(Ending::Answered);
    }
    let read = load.enter(Kind::Other, FLOOR, FLOOR * 30).await.unwrap();
    assert!(read.timeout() >= FLOOR * 3, "{:?}", read.timeout());
    assert!(read.timeout() <= FLOOR * 30);
    let deadline = Instant::now() + FLOOR * 4;
    let renewal = load
        .enter(Kind::Renewal { deadline }, FLOOR, FLOOR * 30)
        .await
        .unwrap();
    let t = renewal.timeout();
    assert!(t >= FLOOR * 3 && t <= FLOOR * 4, "{t:?}");
    drop(renewal);
    // A renewal may take half of what its lease has left, whatever the store showed.
    let deadline = Instant::now() + FLOOR * 20;
    let renewal = load
        .enter(Kind::Renewal { deadline }, FLOOR, FLOOR * 30)
        .await
        .unwrap();
    assert_eq!(renewal.timeout(), FLOOR * 10);
    drop(renewal);
    let deadline = Instant::now() + MS * 3010;
    let renewal = load
        .enter(Kind::Renewal { deadline }, FLOOR, FLOOR * 30)
        .await
        .unwrap();
    assert_eq!(
        renewal.timeout(),
        MS * 3010,
        "no longer than its lease can afford"
    );
    drop(renewal);
    let deadline = Instant::now() + FLOOR * 2;
    let hopeless = load
        .enter(Kind::Renewal { deadline }, FLOOR, FLOOR * 30)
        .await;
    assert!(
        matches!(hopeless, Err(TooLate(_))),
        "2 s left, 3 s to answer"
    );
}

#[tokio::test(start_paused = true)]
async fn acquisitions_are_refused_while_the_store_throttles() {
    let load = load();
    let p = load.enter(Kind::Other, FLOOR, FLOOR).await.unwrap();
    tokio::time::sleep(MS * 20).await;
    p.end(Ending::Throttled);
    let before = load.limit();
    match load.admit() {
        Err(why) => assert!(why.contains("slow down"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(
        load.enter(Kind::Other, FLOOR, FLOOR).await.is_ok(),
        "reads still go"
    );
    tokio::time::sleep(FLOOR * 2).await;
    assert!(load.admit().is_ok(), "later, again");
    assert!(before < limit::MAX as usize);
}

#[tokio::test(start_paused = true)]
async fn acquisitions_are_refused_once_held_leases_need_most_of_the_capacity() {
    let load = load();
    // A store kept busy answers 100 requests a second: 4 passes, 40 ms each.
    let t0 = Instant::now();
    while Instant::now() - t0 < FLOOR * 3 {
        let mut round = Vec::new();
        for _ in 0..load.limit() + 2 {
            let load = load.clone();
            round.push(tokio::spawn(async move {
                let p = load.enter(Kind::Other, FLOOR, FLOOR).await.unwrap();
                tokio::time::sleep(MS * 40).await;
                p.end(Ending::Answered);
            }));
        }
        for r in round {
            r.await.unwrap();
        }
    }
    let capacity = load
        .state()
        .capacity
        .estimate(Instant::now())
        .expect("measured");
    // 80 leases renewing every second need 80 renewals a second: 80 % or more of it.
    let needed = (capacity * HEADROOM).ceil() as usize;
    for _ in 0..needed {
        assert!(load.admit().is_ok());
        load.renewing(FLOOR, true);
    }
    match load.admit() {
        Err(why) => assert!(why.contains("renewals a second"), "{why}"),
        other => panic!("{other:?}"),
    }
    for _ in 0..needed / 2 {
        load.renewing(FLOOR, false);
    }
    assert!(load.admit().is_ok(), "room again");
}

#[tokio::test(start_paused = true)]
async fn a_held_locks_release_goes_before_renewals_that_can_wait() {
    let load = load();
    let now = Instant::now();
    let busy = renewals_with_every_pass(&load, now).await;
    let queued = queued_in_order(
        &load,
        vec![
            (
                "renewal that can wait",
                Kind::Renewal {
                    deadline: now + MS * 9000,
                },
            ),
            (
                "release",
                Kind::Release {
                    deadline: Some(now + FLOOR * 100),
                },
            ),
            (
                "renewal about to miss its deadline",
                Kind::Renewal {
                    deadline: now + MS * 500,
                },
            ),
        ],
    )
    .await;
    assert_eq!(
        order_of(busy, queued).await,
        [
            "renewal about to miss its deadline",
            "release",
            "renewal that can wait"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn an_acquisition_behind_renewals_gives_up_after_a_request_timeout() {
    let load = load();
    let busy = renewals_with_every_pass(&load, Instant::now()).await;
    let began = Instant::now();
    let refused = load.enter(Kind::Other, FLOOR, FLOOR).await.unwrap_err();
    assert_eq!(Instant::now() - began, FLOOR);
    assert!(
        refused.0.contains("no pass to send a request within 1.0s"),
        "{}",
        refused.0
    );
    assert_eq!(waiting(&load), 0, "it left the queue");
    drop(busy);
}
