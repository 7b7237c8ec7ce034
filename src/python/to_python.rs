//! Work for Python from threads that must never wait for its GIL: the runtime's, which
//! renew every held lock. A thread that holds the GIL for seconds (a long `pickle.loads`,
//! a C extension that keeps it) must not delay a heartbeat, so a heartbeat thread only
//! leaves its log records and calls for Python here and goes on:
//!
//! - log records wait in a bounded queue that one thread of ours (the deliverer) hands to
//!   `logging`; when the queue is full a record is dropped and counted, and the deliverer
//!   says how many were dropped. The deliverer also reads Python's logging levels again
//!   every [`REFRESH`], so that a level set later is honoured. What it calls to do either
//!   is registered by the logging bridge ([`deliver_with`]), which this file does not know.
//! - calls wait in one queue per [`Lane`] (asyncio results handed to their event loops,
//!   credential fetches, loss callbacks), each run in order by at most [`MAX_CALLERS`]
//!   threads of its own: a user's callback that blocks holds up neither a result nor a
//!   fetch, every call runs, an outage that loses thousands of locks at once starts no
//!   thread per loss (callbacks past its threads wait in its queue), and none of them
//!   waits for the GIL on the runtime's blocking pool, where the file store renews.
//!
//! At interpreter exit ([`close`]) the users' loss callbacks get a bounded wait on their own
//! threads, and are left after it; what else is queued is handed over by the exiting thread
//! itself; from then on no thread of ours calls into Python. In a child made by fork, the
//! queues and threads are the child's own.

use crate::per_process::PerProcess;
use pyo3::prelude::*;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Records waiting beyond this many are dropped (and counted).
pub(super) const MAX_RECORDS: usize = 10_000;

/// At most this many threads run the calls of one lane at once (so at most this many loss
/// callbacks run at once).
pub(super) const MAX_CALLERS: usize = 4;

/// How often Python's logging levels are read again.
pub(super) const REFRESH: Duration = Duration::from_secs(1);

/// A caller thread with nothing to do ends after this long.
const IDLE: Duration = Duration::from_secs(10);

/// How the deliverer hands records to Python and reads its levels again.
pub(super) struct Delivery {
    /// Hands the records to `logging`, in order, saying how many were dropped before them.
    pub(super) deliver: fn(Python<'_>, Vec<Record>, u64),
    /// Reads Python's logging levels again.
    pub(super) refresh: fn(Python<'_>),
}

static DELIVERY: std::sync::OnceLock<Delivery> = std::sync::OnceLock::new();

/// Registers how records reach Python, before the deliverer starts (the first registration
/// stays).
pub(super) fn deliver_with(delivery: Delivery) {
    let _ = DELIVERY.set(delivery);
}

/// A log record, owned, as it waits for the deliverer.
pub(super) struct Record {
    pub(super) level: log::Level,
    pub(super) target: String,
    pub(super) message: String,
    pub(super) file: Option<String>,
    pub(super) line: Option<u32>,
    /// When it was logged (seconds since the epoch), which the Python record keeps.
    pub(super) created: f64,
    /// The name of the thread that logged it.
    pub(super) thread: Option<String>,
}

/// Something to run with the GIL (a loss callback, an asyncio result, a credential fetch).
pub(super) type Call = Box<dyn FnOnce(Python<'_>) + Send>;

/// What a call is, each kind with a queue and threads of its own: a call never waits
/// behind one of another kind.
#[derive(Clone, Copy, Debug)]
pub(super) enum Lane {
    /// An asyncio result handed to its event loop: short, once it has the GIL.
    Results = 0,
    /// A credential fetch: a provider's code, which may take seconds (an SSO refresh, a
    /// CLI), and which renewals wait for once the credential in hand runs out.
    Credentials = 1,
    /// A loss callback (`on_lost`): a user's code, which may block for as long as it likes.
    Callbacks = 2,
    /// An adapter's own loss notice (its log line, its bookkeeping): the package's code,
    /// short, which a user's callback that blocks must not hold up.
    Notices = 3,
}

const LANES: [Lane; 4] = [
    Lane::Results,
    Lane::Credentials,
    Lane::Callbacks,
    Lane::Notices,
];

impl Lane {
    /// Its threads' name (at most 15 bytes: Linux keeps no more).
    fn thread_name(self) -> &'static str {
        match self {
            Lane::Results => "blob-lock-async",
            Lane::Credentials => "blob-lock-creds",
            Lane::Callbacks => "blob-lock-lost",
            Lane::Notices => "blob-lock-note",
        }
    }
}

/// The calls of one lane and the threads that run them.
#[derive(Default)]
struct Queue {
    calls: VecDeque<Call>,
    callers: usize,
    idle_callers: usize,
    /// Its callers inside Python now (running a call, or waiting for the GIL to).
    busy: usize,
}

#[derive(Default)]
struct Inbox {
    records: VecDeque<Record>,
    dropped: u64,
    deliverer: bool,
    lanes: [Queue; LANES.len()],
    /// Threads of ours inside Python now (or waiting for the GIL to be).
    in_python: usize,
    closed: bool,
}

#[derive(Default)]
struct Mailbox {
    inbox: Mutex<Inbox>,
    /// Records arrived, or the mailbox closed.
    arrived: Condvar,
    /// A lane's calls arrived, or the mailbox closed (one per lane).
    called: [Condvar; LANES.len()],
    /// A thread left Python.
    left: Condvar,
}

static MAILBOX: PerProcess<Mailbox> = PerProcess::new(Default::default);

fn inbox() -> (&'static Mailbox, MutexGuard<'static, Inbox>) {
    let mailbox = MAILBOX.get();
    (
        mailbox,
        mailbox.inbox.lock().unwrap_or_else(|e| e.into_inner()),
    )
}

/// Leaves `record` for the deliverer; never waits for Python. Dropped (and counted) when
/// [`MAX_RECORDS`] are waiting already.
pub(super) fn leave_record(record: Record) {
    let (mailbox, mut inbox) = inbox();
    if inbox.closed {
        return;
    }
    if inbox.records.len() >= MAX_RECORDS {
        inbox.dropped += 1;
        return;
    }
    inbox.records.push_back(record);
    start_deliverer(&mut inbox);
    mailbox.arrived.notify_all();
}

/// Leaves `call` for a thread of `lane`'s; never waits for Python. A thread more starts
/// while more calls wait than threads are idle, up to [`MAX_CALLERS`].
pub(super) fn leave_call(lane: Lane, call: Call) {
    let (mailbox, mut inbox) = inbox();
    if inbox.closed {
        return;
    }
    let queue = &mut inbox.lanes[lane as usize];
    queue.calls.push_back(call);
    if queue.calls.len() > queue.idle_callers && queue.callers < MAX_CALLERS {
        queue.callers += 1;
        let spawned = crate::thread_signals::spawn(lane.thread_name(), move || run_calls(lane));
        if spawned.is_err() {
            queue.callers -= 1; // the others (or the exit) run it
        }
    }
    mailbox.called[lane as usize].notify_one();
}

/// Starts the deliverer, if it is not running: at the first record, and at import (it also
/// reads the logging levels again every [`REFRESH`]).
pub(super) fn start() {
    let (_, mut inbox) = inbox();
    start_deliverer(&mut inbox);
}

fn start_deliverer(inbox: &mut Inbox) {
    if inbox.deliverer || inbox.closed {
        return;
    }
    inbox.deliverer = crate::thread_signals::spawn("blob-lock-logs", deliver_records).is_ok();
}

/// Counts a thread of ours into Python, unless the mailbox closed (false then): under the
/// mutex that [`close`] sets `closed` under, so that it waits for every thread counted.
fn entering(mut inbox: MutexGuard<'_, Inbox>) -> bool {
    if inbox.closed {
        return false;
    }
    inbox.in_python += 1;
    true
}

fn left(mailbox: &Mailbox) {
    let mut inbox = mailbox.inbox.lock().unwrap_or_else(|e| e.into_inner());
    inbox.in_python -= 1;
    mailbox.left.notify_all();
}

/// The deliverer: hands records to `logging` as they come, and reads the levels again
/// every [`REFRESH`].
fn deliver_records() {
    let mailbox = MAILBOX.get();
    let mut refreshed = Instant::now();
    loop {
        let mut inbox = mailbox.inbox.lock().unwrap_or_else(|e| e.into_inner());
        while inbox.records.is_empty() && inbox.dropped == 0 && !inbox.closed {
            let due = REFRESH.saturating_sub(refreshed.elapsed());
            if due.is_zero() {
                break;
            }
            inbox = match mailbox.arrived.wait_timeout(inbox, due) {
                Ok((inbox, _)) => inbox,
                Err(e) => e.into_inner().0,
            };
        }
        let records: Vec<Record> = inbox.records.drain(..).collect();
        let dropped = std::mem::take(&mut inbox.dropped);
        if !entering(inbox) {
            return;
        }
        let refresh = refreshed.elapsed() >= REFRESH;
        Python::attach(|py| {
            if let Some(d) = DELIVERY.get() {
                (d.deliver)(py, records, dropped);
                if refresh {
                    (d.refresh)(py);
                }
            }
        });
        if refresh {
            refreshed = Instant::now();
        }
        left(mailbox);
    }
}

/// A thread of `lane`'s: runs its calls in order, and ends after [`IDLE`] without one.
fn run_calls(lane: Lane) {
    let mailbox = MAILBOX.get();
    let at = lane as usize;
    loop {
        let mut inbox = mailbox.inbox.lock().unwrap_or_else(|e| e.into_inner());
        let idle_since = Instant::now();
        inbox.lanes[at].idle_callers += 1;
        let call = loop {
            if inbox.closed {
                inbox.lanes[at].idle_callers -= 1;
                inbox.lanes[at].callers -= 1;
                return;
            }
            if let Some(call) = inbox.lanes[at].calls.pop_front() {
                break call;
            }
            let waited = idle_since.elapsed();
            if waited >= IDLE {
                inbox.lanes[at].idle_callers -= 1;
                inbox.lanes[at].callers -= 1;
                return;
            }
            inbox = match mailbox.called[at].wait_timeout(inbox, IDLE - waited) {
                Ok((inbox, _)) => inbox,
                Err(e) => e.into_inner().0,
            };
        };
        inbox.lanes[at].idle_callers -= 1;
        inbox.lanes[at].busy += 1;
        if !entering(inbox) {
            drop(call); // closed meanwhile: the exit ran what was queued
            let mut inbox = mailbox.inbox.lock().unwrap_or_else(|e| e.into_inner());
            inbox.lanes[at].callers -= 1;
            inbox.lanes[at].busy -= 1;
            return;
        }
        Python::attach(call);
        {
            let mut inbox = mailbox.inbox.lock().unwrap_or_else(|e| e.into_inner());
            inbox.lanes[at].busy -= 1;
        }
        left(mailbox);
    }
}

/// At interpreter exit (the GIL held): gives the users' loss callbacks, running or queued,
/// up to `grace` on their own threads; closes the mailbox, so that no thread of ours calls
/// into Python any more; waits up to `grace` for the others inside Python to leave; then
/// hands over what was queued on this thread (records, results, fetches, the adapters'
/// notices). Callbacks still running or queued then are left, with one WARNING: a callback
/// that blocks never holds the exit up (its thread is the user's business; none of ours
/// waits for it).
pub(super) fn close(py: Python<'_>, grace: Duration) {
    let blocked = callbacks_ended_within(py, grace);
    let (mut records, dropped, calls) = {
        let (_, mut inbox) = inbox();
        inbox.closed = true;
        let left_queued = std::mem::take(&mut inbox.lanes[Lane::Callbacks as usize].calls).len();
        if blocked + left_queued > 0 {
            inbox
                .records
                .push_back(callbacks_left(blocked, left_queued, grace));
        }
        let records: Vec<Record> = inbox.records.drain(..).collect();
        let calls: Vec<Call> = LANES
            .iter()
            .flat_map(|&lane| std::mem::take(&mut inbox.lanes[lane as usize].calls))
            .collect();
        (records, std::mem::take(&mut inbox.dropped), calls)
    };
    mailbox_closed(py, grace);
    if let Some(d) = DELIVERY.get() {
        (d.deliver)(py, std::mem::take(&mut records), dropped);
    }
    for call in calls {
        call(py);
    }
}

/// Waits up to `grace`, without the GIL, until no loss callback is queued or running; how
/// many are still running then.
fn callbacks_ended_within(py: Python<'_>, grace: Duration) -> usize {
    let mailbox = MAILBOX.get();
    let at = Lane::Callbacks as usize;
    py.detach(|| {
        let until = Instant::now() + grace;
        let mut inbox = mailbox.inbox.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let lane = &inbox.lanes[at];
            if lane.calls.is_empty() && lane.busy == 0 {
                return 0;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return lane.busy;
            }
            // Woken as each call ends (`left`); a queued call is taken by an idle caller.
            let wait = left.min(Duration::from_millis(50));
            inbox = match mailbox.left.wait_timeout(inbox, wait) {
                Ok((inbox, _)) => inbox,
                Err(e) => e.into_inner().0,
            };
        }
    })
}

/// The WARNING of an exit that left loss callbacks behind.
fn callbacks_left(running: usize, queued: usize, grace: Duration) -> Record {
    Record {
        level: log::Level::Warn,
        target: "blob_lock".into(),
        message: format!(
            "at exit, {running} loss callback(s) (on_lost) still running and {queued} not yet started after {}s were left: the process exits without waiting for them (a callback that blocks?)",
            grace.as_secs()
        ),
        file: None,
        line: None,
        created: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
        thread: None,
    }
}

fn mailbox_closed(py: Python<'_>, grace: Duration) {
    let mailbox = MAILBOX.get();
    mailbox.arrived.notify_all();
    for called in &mailbox.called {
        called.notify_all();
    }
    // Without the GIL: a thread of ours waiting for it to leave Python needs it. The loss
    // callbacks still running were waited for already (`callbacks_ended_within`).
    py.detach(|| {
        let until = Instant::now() + grace;
        let mut inbox = mailbox.inbox.lock().unwrap_or_else(|e| e.into_inner());
        while inbox.in_python > inbox.lanes[Lane::Callbacks as usize].busy {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            inbox = match mailbox.left.wait_timeout(inbox, left) {
                Ok((inbox, _)) => inbox,
                Err(e) => e.into_inner().0,
            };
        }
    });
}
