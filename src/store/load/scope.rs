//! The kind of the current task's requests, and the pass it reserved for its next one:
//! the task that makes a request says what it is (`as_kind`), so that the protocol's steps,
//! which do not know why they are called, need not be told.

use super::kind::Kind;
use super::pass::Pass;
use super::Load;
use std::future::Future;
use std::sync::{Arc, Mutex};

/// What a task's requests are, and the pass it reserved for its next request.
struct Scope {
    kind: Kind,
    reserved: Mutex<Option<Pass>>,
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Runs `fut` with its store requests counted as `kind`.
pub async fn as_kind<F: Future>(kind: Kind, fut: F) -> F::Output {
    let scope = Scope {
        kind,
        reserved: Mutex::new(None),
    };
    SCOPE.scope(scope, fut).await
}

/// Runs `fut` as the requests of the current task (`Kind::Other` outside one), with a
/// place for a reserved pass ([`Load::reserve`]): what a protocol step that stamps a
/// write with the time it leaves runs in.
pub async fn reserving<F: Future>(fut: F) -> F::Output {
    as_kind(current_kind(), fut).await
}

/// The kind of the requests the current task makes.
pub fn current_kind() -> Kind {
    SCOPE.try_with(|s| s.kind).unwrap_or(Kind::Other)
}

/// Keeps `pass` for the task's next request to this load; gives it back when the task has
/// no place for one (outside [`reserving`] or [`as_kind`]).
pub(super) fn keep(pass: Pass) -> Option<Pass> {
    let mut pass = Some(pass);
    let _ = SCOPE.try_with(|s| {
        let mut kept = s.reserved.lock().unwrap_or_else(|e| e.into_inner());
        if kept.is_none() {
            *kept = pass.take();
        }
    });
    pass
}

/// True when the task already keeps a pass of `load`.
pub(super) fn keeps(load: &Arc<Load>) -> bool {
    SCOPE
        .try_with(|s| {
            let kept = s.reserved.lock().unwrap_or_else(|e| e.into_inner());
            kept.as_ref().is_some_and(|p| Arc::ptr_eq(&p.load, load))
        })
        .unwrap_or(false)
}

/// The pass of `load` the task reserved, if it did.
pub(super) fn take(load: &Arc<Load>) -> Option<Pass> {
    SCOPE
        .try_with(|s| {
            let mut kept = s.reserved.lock().unwrap_or_else(|e| e.into_inner());
            match kept.as_ref() {
                Some(p) if Arc::ptr_eq(&p.load, load) => kept.take(),
                _ => None,
            }
        })
        .ok()
        .flatten()
}
