//! `blob-lock doctor --race`: independent clients race the two conditional writes on scratch
//! keys beside a lock, round after round. A store that checks a condition and then writes
//! in a second step (moto's server) refuses each write alone, so the probes of `doctor` and
//! of every process ([`crate::store::probe`]) pass it; racing shows it: two writes over one
//! condition both land. More than one winner in any round means `cas` is not safe there.

use crate::errors::Result;
use crate::lease::{new_owner_id, LockOptions};
use crate::store::{LockStore, Private, Write};
use bytes::Bytes;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::Barrier;

/// What the race found.
#[derive(Debug, Clone)]
pub struct RaceReport {
    /// The lock URI raced beside.
    pub uri: String,
    /// The scratch folder the races wrote (deleted afterwards).
    pub scratch: String,
    /// Independent clients racing.
    pub racers: usize,
    /// Rounds run (each a create race and an update race); the race stops at the first
    /// round with more than one winner.
    pub rounds: usize,
    /// Rounds in which more than one create-if-absent of a new key landed.
    pub create_doubles: usize,
    /// Rounds in which more than one update-if-match over one version landed.
    pub update_doubles: usize,
    /// Writes that failed (their outcome unknown); rounds with them still count winners.
    pub errors: usize,
    /// Rounds in which no write of a race landed (all failed or were refused): they show
    /// nothing, and make the race inconclusive.
    pub inconclusive: usize,
    /// The first round with more than one winner, in words.
    pub first_double: Option<String>,
    /// Seconds the race took.
    pub seconds: f64,
}

impl RaceReport {
    /// Every round had exactly one winner in each race.
    pub fn cas_safe(&self) -> bool {
        self.create_doubles == 0
            && self.update_doubles == 0
            && self.inconclusive == 0
            && self.rounds > 0
    }
}

/// Races `racers` clients for `rounds` rounds beside `uri`.
pub async fn race(
    uri: &str,
    options: &LockOptions,
    racers: usize,
    rounds: usize,
) -> Result<RaceReport> {
    if !(2..=64).contains(&racers) || rounds == 0 {
        return Err(crate::Error::InvalidArgument(format!(
            "a race needs 2 to 64 racers and at least one round, got {racers} racers and {rounds} rounds"
        )));
    }
    crate::store::Location::parse(uri)?;
    let scratch = format!(".blob-lock-race-{}", &new_owner_id()[..12]);
    let clients = (0..racers)
        .map(|_| Private::new(uri, &options.store, &options.timing))
        .collect::<Result<Vec<_>>>()?;
    let began = Instant::now();
    let mut report = RaceReport {
        uri: uri.to_string(),
        scratch: format!("{}/{scratch}", uri.trim_end_matches('/')),
        racers,
        rounds: 0,
        create_doubles: 0,
        update_doubles: 0,
        errors: 0,
        inconclusive: 0,
        first_double: None,
        seconds: 0.0,
    };
    let update: Vec<_> = clients
        .iter()
        .map(|c| c.open(&format!("{scratch}/update")))
        .collect::<Result<_>>()?;
    let outcome = run(&clients, &update, &scratch, rounds, &mut report).await;
    // Clean up whatever happened; a failed delete leaves only scratch keys.
    let _ = update[0].delete().await;
    report.seconds = began.elapsed().as_secs_f64();
    outcome.map(|()| report)
}

async fn run(
    clients: &[Private],
    update: &[Arc<dyn LockStore>],
    scratch: &str,
    rounds: usize,
    report: &mut RaceReport,
) -> Result<()> {
    let body = |round: usize, racer: usize| {
        // Unique bytes for every write: some stores' ETag is a digest of the body.
        Bytes::from(format!(
            "{{\"blob_lock_race\": {round}, \"racer\": {racer}, \"nonce\": \"{}\"}}",
            new_owner_id()
        ))
    };
    update[0].overwrite(body(0, 0)).await?;
    for round in 1..=rounds {
        let key = format!("{scratch}/create-{round}");
        let creates: Vec<_> = clients
            .iter()
            .map(|c| c.open(&key))
            .collect::<Result<_>>()?;
        let (created, errors) = contest(&creates, |i, store| {
            let b = body(round, i);
            async move { store.create(b).await }
        })
        .await;
        let _ = creates[0].delete().await;
        report.errors += errors;
        let Some(version) = update[0].read().await?.map(|s| s.version) else {
            return Err(crate::Error::Store {
                uri: update[0].uri().to_string(),
                message: "the scratch key of the update race vanished".into(),
                kind: crate::errors::StoreErrorKind::Transient,
            });
        };
        let (updated, errors) = contest(update, |i, store| {
            let (b, v) = (body(round, i), version.clone());
            async move { store.update(b, &v).await }
        })
        .await;
        report.errors += errors;
        report.rounds = round;
        if created == 0 || updated == 0 {
            report.inconclusive += 1;
        }
        if created > 1 {
            report.create_doubles += 1;
        }
        if updated > 1 {
            report.update_doubles += 1;
        }
        if created > 1 || updated > 1 {
            report.first_double = Some(format!(
                "round {round}: {created} of {} creates of one new key landed, {updated} of {} updates over one version landed",
                clients.len(),
                update.len()
            ));
            return Ok(());
        }
    }
    Ok(())
}

/// Every racer makes its write at once (a barrier before each): `(landed, failed)`.
async fn contest<F, Fut>(stores: &[Arc<dyn LockStore>], write: F) -> (usize, usize)
where
    F: Fn(usize, Arc<dyn LockStore>) -> Fut,
    Fut: std::future::Future<Output = Result<Write>> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(stores.len()));
    let tasks: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(i, store)| {
            let (barrier, attempt) = (barrier.clone(), write(i, store.clone()));
            tokio::spawn(async move {
                barrier.wait().await;
                attempt.await
            })
        })
        .collect();
    let (mut landed, mut failed) = (0, 0);
    for t in tasks {
        match t.await {
            Ok(Ok(Write::Done(_))) => landed += 1,
            Ok(Ok(Write::Conflict { .. })) => {}
            _ => failed += 1,
        }
    }
    (landed, failed)
}
