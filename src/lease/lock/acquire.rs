//! How a [`Lock`] is acquired: the wait (polls, the store's saturation, the acquisition's
//! timeout, the cleanup an interrupted one owes), single attempts, and the check of what an
//! attempt won before it is reported held.

use super::*;

impl Lock {
    /// Waits until the lock is ours, or `timeout` passes (`Error::Timeout`); `None` waits
    /// for ever. Transient store errors are retried within the timeout; permanent ones end
    /// the wait at once, and a wait in which the store never answered ends with its error.
    /// An attempt still running at the timeout is given one request timeout more, then
    /// abandoned (whatever it wrote is released in the background). The heartbeat runs on
    /// the current tokio runtime: at once, or, on the shared runtime
    /// ([`crate::runtime::on_shared_runtime`]), from its first renewal.
    pub async fn acquire(&self, timeout: Option<Duration>) -> Result<Lease> {
        let began = self.engine.clock.now();
        let mut acquisition = self.acquisition();
        let acquired = self.acquire_waiting(timeout, &mut acquisition).await;
        if acquired.is_err() {
            self.leave(acquisition);
        }
        let ended = match &acquired {
            Ok(_) => metrics::Acquired::Acquired,
            Err(Error::Timeout { .. }) => metrics::Acquired::TimedOut,
            Err(Error::Saturated { .. }) => metrics::Acquired::Saturated,
            Err(_) => metrics::Acquired::Failed,
        };
        metrics::acquisition(ended, self.engine.clock.now() - began);
        acquired
    }

    async fn acquire_waiting(
        &self,
        timeout: Option<Duration>,
        acquisition: &mut Acquisition,
    ) -> Result<Lease> {
        let clock = &self.engine.clock;
        // The deadline, its cutoff, the polls and the seniority: shared with a semaphore's
        // wait (`wait.rs`).
        let mut wait = Wait::new(clock, &self.engine.timing, timeout);
        let mut logged_holder = String::new();
        let lifecycle = Arc::new(Lifecycle::new(self.uri.clone(), self.owner.clone()));
        // Only while we wait: a held lock keeps no waker.
        let wake = self.engine.wake.as_ref().map(waker);
        // Where the store hears of other processes' writes, from the first time we wait.
        let mut watching: Option<Option<Box<dyn std::any::Any + Send + Sync>>> = None;
        let timed_out =
            |lifecycle: &Lifecycle, waited: Duration, holder: &str, saturated: Option<String>| {
                let timeout = Error::Timeout {
                    uri: self.uri.to_string(),
                    waited,
                    holder: holder.to_string(),
                    saturated,
                };
                lifecycle.enter(State::Failed, &timeout);
                timeout
            };
        // The cutoff bounds every wait below.
        if !self.drained_by(wait.cutoff()).await {
            return Err(timed_out(
                &lifecycle,
                wait.waited(),
                "ourselves (what an interrupted acquisition wrote is still being released)",
                None,
            ));
        }
        loop {
            // Listening before the attempt: a release between our read and our sleep wakes us.
            let armed = arm(wake.iter());
            lifecycle.enter(State::Acquiring, "attempt");
            let Some(outcome) = wait.within_cutoff(self.attempt(acquisition)).await else {
                self.release_in_background();
                return Err(timed_out(
                    &lifecycle,
                    wait.waited(),
                    "unknown (the last attempt did not finish in time)",
                    None,
                ));
            };
            let seen_holder = matches!(outcome, Ok((_, Attempt::Busy { .. })));
            let took_over = acquisition.took_over.take();
            let (who, expires_in, saturated) =
                match (self.after(outcome, took_over, &lifecycle, &mut wait, acquisition)).await {
                    Next::Held(lease) => return Ok(lease),
                    Next::Wait {
                        who,
                        expires_in,
                        saturated,
                    } => (who, expires_in, saturated),
                    Next::Fail(e) => return Err(e),
                };
            if who != logged_holder {
                log::debug!("{}: held by {who}, waiting", self.uri);
                logged_holder = who.clone();
            }
            if seen_holder && watching.is_none() {
                let watch = wake.as_ref().and_then(|w| self.engine.store.watch(w));
                let started = watch.is_some();
                watching = Some(watch);
                if started && !wait.past_deadline() {
                    continue; // a write between our read and the watch would go unheard
                }
            }
            if wait.past_deadline() {
                // A write of ours may be there, whatever the last attempt found (a read
                // that lags the store shows an earlier holder over it).
                self.release_if_written(acquisition);
                return Err(timed_out(&lifecycle, wait.waited(), &who, saturated));
            }
            let pause = wait.next_pause(expires_in);
            // Woken with others, perhaps: the senior waiters try first (seniority.rs).
            wait.sleep(clock.now() + pause, armed).await;
        }
    }

    /// Waits until no cleanup an interrupted acquisition owes is left, or `cutoff` passes
    /// first (false).
    async fn drained_by(&self, cutoff: Option<tokio::time::Instant>) -> bool {
        let drained = self.cleanups.drained();
        match cutoff {
            None => {
                drained.await;
                true
            }
            Some(cutoff) => tokio::select! {
                biased;
                () = drained => true,
                _ = self.engine.clock.sleep_until(cutoff) => false,
            },
        }
    }

    /// What the wait does after an attempt: hold what it won (if its lease has not already
    /// run out; `took_over` the holder whose expired lease it wrote over), wait on for the
    /// holder it saw or for a store that failed transiently or is saturated, or fail.
    async fn after(
        &self,
        outcome: Result<(Arc<Engine>, Attempt)>,
        took_over: Option<String>,
        lifecycle: &Arc<Lifecycle>,
        wait: &mut Wait,
        acquisition: &mut Acquisition,
    ) -> Next {
        match outcome {
            // Checked within the cutoff too: a renewal of a write acquired too late to hold
            // is the attempt's last request (abandoned, it is released as the attempt's
            // writes are, when the wait ends).
            Ok((engine, Attempt::Acquired(ours))) => match (wait
                .within_cutoff(self.fresh(&engine, ours, acquisition))
                .await)
                .flatten()
            {
                Some(ours) => Next::Held(self.start(engine, ours, lifecycle.clone(), took_over)),
                None => {
                    lifecycle.enter(State::Waiting, "acquired too late to hold it");
                    Next::Wait {
                        who: "ourselves, too late to hold it".to_string(),
                        expires_in: None,
                        saturated: None,
                    }
                }
            },
            Ok((_, Attempt::Busy { holder, expires_in })) => {
                if let Some(holder) = &holder {
                    wait.saw(holder);
                }
                let who = self.holder(holder.as_ref());
                lifecycle.enter(State::Waiting, format_args!("held by {who}"));
                Next::Wait {
                    who,
                    expires_in,
                    saturated: None,
                }
            }
            Err(Error::Saturated { message, .. }) => {
                // Waits for the store to catch up, as for a holder to leave.
                lifecycle.enter(State::Retrying, &message);
                Next::Wait {
                    who: "not known: no new lock is tried while the store is saturated".into(),
                    expires_in: None,
                    saturated: Some(message),
                }
            }
            Err(e) if e.is_transient() => {
                ATTEMPT_FAILED
                    .warn(|| format!("{}: acquisition attempt failed, retrying: {e}", self.uri));
                lifecycle.enter(State::Retrying, &e);
                Next::Wait {
                    who: format!("unknown ({e})"),
                    expires_in: None,
                    saturated: None,
                }
            }
            Err(e) => {
                lifecycle.enter(State::Failed, &e);
                Next::Fail(e)
            }
        }
    }

    /// One acquisition attempt on the protocol the store allows; refused before any request
    /// while the store is saturated (held locks' renewals come first).
    async fn attempt(&self, acquisition: &mut Acquisition) -> Result<(Arc<Engine>, Attempt)> {
        acquisition.took_over = None; // what an earlier attempt found is no takeover of this one
        if let Err(message) = self.engine.store.admit() {
            return Err(Error::Saturated {
                uri: self.uri.to_string(),
                message,
            });
        }
        let engine = self.resolved().await?;
        let outcome = engine.attempt(&self.owner, acquisition).await?;
        Ok((engine, outcome))
    }

    /// One attempt; never waits. `None` when someone else holds the lock (or this lock's
    /// own interrupted acquisition is still being released).
    pub async fn try_acquire(&self) -> Result<Option<Lease>> {
        let began = self.engine.clock.now();
        let acquired = self.try_acquire_once().await;
        let ended = match &acquired {
            Ok(Some(_)) => metrics::Acquired::Acquired,
            Ok(None) => metrics::Acquired::Busy,
            Err(Error::Saturated { .. }) => metrics::Acquired::Saturated,
            Err(_) => metrics::Acquired::Failed,
        };
        metrics::acquisition(ended, self.engine.clock.now() - began);
        acquired
    }

    async fn try_acquire_once(&self) -> Result<Option<Lease>> {
        Ok(match self.try_once().await? {
            Tried::Held(lease) => Some(lease),
            Tried::Busy { .. } => None,
        })
    }

    /// One attempt, counted in no metric: the lease won, or how long the holder's last
    /// write has left (a semaphore's wait chooses the slot to read next by it).
    pub(crate) async fn try_once(&self) -> Result<Tried> {
        let lifecycle = Arc::new(Lifecycle::new(self.uri.clone(), self.owner.clone()));
        lifecycle.enter(State::Acquiring, "one attempt");
        if self.cleanups.pending() {
            lifecycle.enter(
                State::Failed,
                "an interrupted acquisition is being released",
            );
            return Ok(Tried::Busy {
                holder: None,
                expires_in: None,
            });
        }
        let mut acquisition = self.acquisition();
        let tried = self.try_with(&mut acquisition, lifecycle).await;
        if !matches!(tried, Ok(Tried::Held(_))) {
            self.leave(acquisition);
        }
        tried
    }

    /// [`Lock::try_once`]'s attempt, in `acquisition`.
    async fn try_with(
        &self,
        acquisition: &mut Acquisition,
        lifecycle: Arc<Lifecycle>,
    ) -> Result<Tried> {
        match self.attempt(acquisition).await {
            Ok((engine, Attempt::Acquired(ours))) => {
                match self.fresh(&engine, ours, acquisition).await {
                    Some(ours) => {
                        let took_over = acquisition.took_over.take();
                        Ok(Tried::Held(self.start(engine, ours, lifecycle, took_over)))
                    }
                    None => {
                        lifecycle.enter(State::Failed, "acquired too late to hold it");
                        self.release_in_background();
                        Ok(Tried::Busy {
                            holder: None,
                            expires_in: None,
                        })
                    }
                }
            }
            Ok((_, Attempt::Busy { holder, expires_in })) => {
                let who = self.holder(holder.as_ref());
                lifecycle.enter(State::Failed, format_args!("held by {who}"));
                Ok(Tried::Busy {
                    holder: holder.map(Box::new),
                    expires_in,
                })
            }
            Err(e) => {
                lifecycle.enter(State::Failed, &e);
                if e.is_transient() {
                    self.release_if_written(acquisition);
                }
                Err(e)
            }
        }
    }

    /// Who holds the lock, as an attempt found it (`holder`: its lockfile, when it read one).
    /// Our own owner id there is never a write of this acquisition (those are resolved by
    /// reading: `Acquisition::resolves`) but a co-owner's, the remote's after a hand-off,
    /// waited for as any holder is; said so, and logged under [`WAIT_ON_OWN_OWNER`].
    fn holder(&self, holder: Option<&LockFile>) -> String {
        let Some(lf) = holder else {
            return String::new();
        };
        if *lf.writer_id != *self.owner || lf.is_released() {
            return lf.describe();
        }
        log::debug!(
            target: WAIT_ON_OWN_OWNER,
            "{}: the lockfile is a write of our own owner id {} (token {}), not of this acquisition: a co-owner's, waited for as any holder's",
            self.uri,
            lf.writer_id,
            lf.token
        );
        format!("a co-owner, with our own owner id ({})", lf.describe())
    }

    /// An acquisition whose write took so long that its lease has already run out (a
    /// request delayed past `expire - margin`) must not be reported held: a waiter may have
    /// taken the lock over meanwhile. Renew it first, with a token raised to the wall
    /// clock's floor (the write may have landed after a delete of a lockfile with larger
    /// tokens, [`crate::lockfile::token`]); report it held only if that succeeds.
    /// (The raised token is noted in `acquisition`, as a confirmation's is.)
    async fn fresh(
        &self,
        engine: &Engine,
        mut ours: OurWrite,
        acquisition: &mut Acquisition,
    ) -> Option<OurWrite> {
        let t = &engine.timing;
        if engine.clock.now() < ours.lease_start + t.held_for() {
            return Some(ours);
        }
        log::debug!("{}: acquired too late to hold; renewing first", self.uri);
        engine.raise_to_confirm(&mut ours, acquisition);
        match engine.renew(&mut ours, None).await {
            Ok(()) if engine.clock.now() < ours.lease_start + t.held_for() => Some(ours),
            _ => None,
        }
    }

    fn start(
        &self,
        engine: Arc<Engine>,
        ours: OurWrite,
        lifecycle: Arc<Lifecycle>,
        took_over: Option<String>,
    ) -> Lease {
        lifecycle.enter(State::Held, format_args!("token {}", ours.token()));
        if let Some(who) = &took_over {
            log::debug!(
                "{}: took over from {who}, whose lease had expired",
                self.uri
            );
        }
        Lease::start(engine, ours, false, self.on_lost.clone(), lifecycle).took_over(took_over)
    }
}

/// The log target of an acquisition that waits on a lockfile bearing its own owner id
/// (`Lock::holder`): the simulation's model check counts these records, since a write of
/// the acquisition itself must never be waited for.
pub const WAIT_ON_OWN_OWNER: &str = "blob_lock::wait_on_own_owner";

/// What one attempt ([`Lock::try_once`]) found.
pub(crate) enum Tried {
    /// The lock is ours.
    Held(Lease),
    /// Someone holds it (as the lockfile read says, when one was read); `expires_in`, when
    /// known, is when their last write expires.
    Busy {
        holder: Option<Box<LockFile>>,
        expires_in: Option<Duration>,
    },
}

/// What the wait does after an attempt ([`Lock::after`]).
enum Next {
    /// The lock is ours.
    Held(Lease),
    /// Wait, for the holder described (`who`) or the store; `expires_in`, when known, is
    /// when the holder's last write expires; `saturated`, why no attempt was made.
    Wait {
        who: String,
        expires_in: Option<Duration>,
        saturated: Option<String>,
    },
    /// The wait ends with this error.
    Fail(Error),
}

/// Acquisitions failing together (an outage) warn once in a while, not once each.
static ATTEMPT_FAILED: crate::lease::warnings::Warning = crate::lease::warnings::Warning::new();
