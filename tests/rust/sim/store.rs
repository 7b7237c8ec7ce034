//! One process's faulty view of the simulated store (`NodeStore`), over the world's true
//! history: latencies, lost and duplicated requests, stale reads, pauses.

use super::*;
use async_trait::async_trait;
use blob_lock::store::{LockStore, Snapshot, Version, Write};
use blob_lock::{Error, StoreErrorKind};
use std::sync::atomic::Ordering;

/// One process's view of the store, with its own faults. Cloned, it is the same view: a
/// write travels on a task of its own, so that it lands even if the caller stops waiting
/// for it (as a request on the wire does).
#[derive(Clone)]
pub struct NodeStore {
    /// Exact latencies for the legs of the next requests (two legs a request: there and
    /// back), before the random ones resume: how scripted schedules are written.
    pub script: Arc<Mutex<std::collections::VecDeque<Duration>>>,
    /// The object it views: the world's lockfile, or another object's true history.
    pub history: History,
    /// That object's name in the trace ("" for the lockfile).
    pub object: String,
    pub world: Arc<World>,
    pub name: String,
    pub faults: Faults,
    pub rng: Shared,
    pub pauses: Arc<Pauses>,
}

impl std::fmt::Debug for NodeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NodeStore({})", self.name)
    }
}

pub enum Fate {
    Normal,
    Lost,
    Ghost,
    Echo,
}

pub fn transient(msg: &str) -> Error {
    Error::Store {
        uri: "sim".into(),
        message: msg.into(),
        kind: StoreErrorKind::Transient,
    }
}

impl NodeStore {
    fn healed(&self) -> bool {
        self.world.healed.load(Ordering::SeqCst)
    }

    /// One leg of a request's trip: latency, then waiting out any pause of this process.
    pub async fn travel(&self) {
        let scripted = self.script.lock().unwrap().pop_front();
        if let Some(d) = scripted {
            tokio::time::sleep(d).await;
        } else if !self.healed() {
            let (slow, r) = {
                let mut rng = self.rng.lock().unwrap();
                (
                    rng.chance(self.faults.slow_p, "a slow leg"),
                    rng.fraction("a leg's latency"),
                )
            };
            let bound = if slow {
                self.faults.slow_latency
            } else {
                self.faults.latency
            };
            tokio::time::sleep(bound.mul_f64(r)).await;
        }
        self.pauses.wait().await;
    }

    fn fate(&self) -> Fate {
        if self.healed() {
            return Fate::Normal;
        }
        let f = &self.faults;
        let weights = [f.lost_write_p, f.ghost_write_p, f.echo_conflict_p];
        match self.rng.lock().unwrap().pick(&weights, "a write's fate") {
            Some(0) => Fate::Lost,
            Some(1) => Fate::Ghost,
            Some(_) => Fate::Echo,
            None => Fate::Normal,
        }
    }

    fn describe(&self, bytes: &[u8]) -> String {
        let what = if bytes.is_empty() {
            "(deletion)".into()
        } else {
            match blob_lock::LockFile::decode(bytes) {
                Ok(lf) if lf.is_released() => {
                    format!("{} t{} released", lf.writer_id, lf.token)
                }
                Ok(lf) => format!("{} t{} #{}", lf.writer_id, lf.token, lf.write_count),
                Err(_) if !self.object.is_empty() => String::from_utf8_lossy(bytes).into(),
                Err(e) => format!("invalid: {e}"),
            }
        };
        if self.object.is_empty() {
            what
        } else {
            format!("{}: {what}", self.object)
        }
    }

    async fn write(
        &self,
        op: &str,
        body: Bytes,
        expected: Option<Option<u64>>,
    ) -> Result<Write, Error> {
        let fate = self.fate();
        if matches!(fate, Fate::Lost) {
            self.travel().await;
            self.travel().await;
            self.world.log(
                &self.name,
                format!("{op} {} -> lost before landing", self.describe(&body)),
            );
            return Err(transient("connection reset before the write landed"));
        }
        let wire = self.clone();
        let sent = body.clone();
        let there = tokio::spawn(async move { wire.land(sent, expected).await });
        let outcome = there.await.expect("a write's trip does not panic");
        let landed = match &outcome {
            Write::Done(v) => format!("landed v{}", v.e_tag.as_deref().unwrap_or("?")),
            Write::Conflict { .. } => "conflict".to_string(),
        };
        self.travel().await;
        let (said, result) = match fate {
            Fate::Ghost => (
                "reported as an error",
                Err(transient("timed out after sending")),
            ),
            Fate::Echo if matches!(outcome, Write::Done(_)) => (
                "reported as a conflict",
                Ok(Write::Conflict { resent: true }),
            ),
            _ => ("", Ok(outcome)),
        };
        self.world.log(
            &self.name,
            format!("{op} {} -> {landed} {said}", self.describe(&body)),
        );
        result
    }

    /// The write's trip there, and its landing (or refusal).
    async fn land(&self, body: Bytes, expected: Option<Option<u64>>) -> Write {
        self.travel().await;
        {
            let mut history = self.history.lock().unwrap();
            // A deletion is an empty entry: no object, for creates and conditions alike.
            let current = history
                .last()
                .filter(|s| !s.bytes.is_empty())
                .map(|s| s.version);
            let allowed = match expected {
                None => true, // overwrite
                Some(Some(_)) if self.faults.refuse_updates => false,
                Some(want) => want == current, // None: create; Some(v): update
            };
            if allowed {
                if body.is_empty() {
                    self.world
                        .event(super::Event::Deleted { at: self.world.t() });
                }
                let version = history.len() as u64 + 1;
                history.push(Stored {
                    bytes: body.clone(),
                    version,
                    at: Instant::now(),
                });
                Write::Done(Version {
                    e_tag: Some(version.to_string()),
                    version: None,
                })
            } else {
                Write::Conflict { resent: false }
            }
        }
    }
}

pub fn version_number(v: &Version) -> u64 {
    v.e_tag.as_deref().and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[async_trait]
impl LockStore for NodeStore {
    /// Its creates and updates check their condition where they land, as a store that
    /// honours conditions does (lww runs on it too, writing unconditionally).
    async fn conditional_writes(&self, _required: bool) -> blob_lock::Result<bool> {
        Ok(true)
    }

    fn known_conditional_writes(&self) -> Option<bool> {
        Some(true)
    }

    async fn read(&self) -> blob_lock::Result<Option<Snapshot>> {
        let fail = !self.healed()
            && (self.rng.lock().unwrap()).chance(self.faults.read_error_p, "a read fails");
        let lag = if self.healed() {
            Duration::ZERO
        } else {
            self.faults.stale_for.mul_f64(if self.faults.exact_lag {
                1.0
            } else if self.faults.stale_for.is_zero() {
                // No draw where nothing is stale: keeps the random stream (a draw times
                // zero) and spares the explorer a point.
                let mut rng = self.rng.lock().unwrap();
                rng.spare();
                0.0
            } else {
                self.rng.lock().unwrap().extent("how stale a read is")
            })
        };
        self.travel().await;
        let seen = {
            let history = self.history.lock().unwrap();
            let now = Instant::now();
            history
                .iter()
                .rev()
                .find(|s| s.at + lag <= now)
                .filter(|s| !s.bytes.is_empty())
                .map(|s| Snapshot {
                    bytes: s.bytes.clone(),
                    version: Version {
                        e_tag: Some(s.version.to_string()),
                        version: None,
                    },
                    last_modified: self.world.wall_at(s.at),
                })
        };
        self.travel().await;
        if fail {
            let object = if self.object.is_empty() {
                String::new()
            } else {
                format!("{}: ", self.object)
            };
            self.world.log(&self.name, format!("{object}read -> 503"));
            return Err(transient("503 Slow Down"));
        }
        let absent = if self.object.is_empty() {
            "absent".to_string()
        } else {
            format!("{}: absent", self.object)
        };
        let what = seen.as_ref().map_or(absent, |s| {
            format!(
                "v{} {}",
                version_number(&s.version),
                self.describe(&s.bytes)
            )
        });
        self.world.log(&self.name, format!("read -> {what}"));
        Ok(seen)
    }

    async fn create(&self, body: Bytes) -> blob_lock::Result<Write> {
        self.write("create", body, Some(None)).await
    }

    async fn update(&self, body: Bytes, expected: &Version) -> blob_lock::Result<Write> {
        let op = format!("update@v{}", version_number(expected));
        self.write(&op, body, Some(Some(version_number(expected))))
            .await
    }

    async fn overwrite(&self, body: Bytes) -> blob_lock::Result<Version> {
        match self.write("overwrite", body, None).await? {
            Write::Done(v) => Ok(v),
            Write::Conflict { .. } => Err(transient("conflict on an overwrite")),
        }
    }

    fn uri(&self) -> &str {
        if self.object.is_empty() {
            "sim"
        } else {
            &self.object // a semaphore's object, by name
        }
    }

    /// A delete lands as an empty entry of the history, with every fault a write has.
    async fn delete(&self) -> blob_lock::Result<()> {
        self.write("delete", Bytes::new(), None).await.map(|_| ())
    }

    async fn delete_if(&self, expected: &Version) -> blob_lock::Result<bool> {
        let op = format!("delete@v{}", version_number(expected));
        let done = self
            .write(&op, Bytes::new(), Some(Some(version_number(expected))))
            .await?;
        Ok(matches!(done, Write::Done(_)))
    }

    async fn conditional_deletes(&self) -> Result<(), String> {
        Ok(())
    }
}
