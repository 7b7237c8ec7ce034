"""Prefect's lock manager on blob-lock: ``BlobLockManager(prefix, **options)`` is a
``prefect.locking.protocol.LockManager`` whose lock for a key is a ``BlobLock`` at
``{prefix}/{key}``, in the store that already holds the results (S3, Azure, GCS, local or
NFS files). Needs Prefect 3 (``pip install 'blob-lock[prefect]'``); only this module and
its ``_logs`` import it. docs/prefect.md shows the three lines that switch a flow over.

What Prefect's semantics become here, and why:

- The holder (Prefect passes one uuid per transaction) is written into the lockfile as the
  label ``prefect.holder`` (its SHA-256 when it is longer than 256 characters or holds a
  control character), so ``is_lock_holder`` and ``is_locked`` answer from the store, for
  any copy of the manager in any process: Prefect ships the result store to its workers
  with cloudpickle. A ``BlobLock`` writes an owner id of its own; a caller-chosen owner
  would need the bindings to take one, as the semaphore's do, and the label says the same.
- A lock held in this process answers without a request: its lease is the truth (nobody
  else can hold it before it is lost). Held locks are kept per process, not per manager,
  so a copy of the manager unpickled here sees them as the original does.
- ``hold_timeout`` None: held, renewed by the heartbeat, until ``release_lock``; a holder
  that dies frees it ``expire`` after its last renewal (Prefect's file-system and Redis
  managers hold it for ever then). A ``hold_timeout``: released by a timer after it, as
  Prefect's own managers let it expire, with a WARNING when its holder had not released
  it; the lock's ``expire`` is shortened to the ``hold_timeout`` (0.5 s at least), so a
  holder that dies frees it within that bound too. The same holder acquiring again
  restarts it with the ``hold_timeout`` it passes (None: held until released), as
  Prefect's file-system manager does.
- The prefix is checked as a lock URI is (``s3:/bucket`` is refused, not taken for a local
  folder of that name), and every timeout as ``BlobLock``'s ``timeout`` is, each error
  naming its argument.
- ``acquire_timeout`` 0 tries once, None waits for ever. Prefect's transactions pass None
  and ignore a False (they would run the task without the lock), so the manager's
  ``timeout`` option, when given, bounds those waits by raising ``LockTimeout``: the task
  fails rather than run unlocked. The same holder acquiring again gets True, in this
  process or through another copy.
- ``release_lock`` by another holder raises ValueError naming both; releasing a lock that
  nobody holds does nothing (prefect-redis's rule: a transaction retried after its rollback
  releases twice). A copy of the manager may release its holder's lock taken elsewhere:
  it breaks that acquisition (``break_lock`` with its owner and token).
- A lock lost while held (a store outage past the lease, a break) is logged at WARNING
  with the key and the cause, ``on_lost`` is called, and from then on ``is_lock_holder``
  answers False and ``is_locked`` True in this process until the holder releases it:
  Prefect then refuses the task's write under it, as it refuses another holder's, even
  when nobody has taken the lock yet. That release returns even while the store is out of
  reach (Prefect's rollback calls it: the task should fail for the loss, not the release).
- A wait is logged once, at INFO, naming who holds the key; a takeover from a holder whose
  lease expired, at WARNING. These and the loss go to the logger of the Prefect run that
  acquired (``get_run_logger()``: Prefect's API and UI), or with no run active to
  ``blob_lock.prefect``; never to both (``_logs.py``).
- ``wait_for_lock`` waits for a holder in this process without a request, then reads the
  store until the lock is free (``wait_free``); a timeout of 0 looks once.
"""

from __future__ import annotations

import asyncio
import functools
import inspect as _pyinspect
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

try:
    from prefect.locking.protocol import LockManager  # type: ignore[import-not-found,unused-ignore]  # an extra
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("blob_lock.prefect needs Prefect 3: pip install 'blob-lock[prefect]'") from e

import blob_lock.prefect._held as here
import blob_lock.prefect._logs as logs
from blob_lock._inspect import (
    Inspection,
    break_lock,
    inspect,
    inspect_async,
    wait_free,
    wait_free_async,
)
from blob_lock._lock import BlobLock
from blob_lock._loss_notice import LossNotice
from blob_lock._options import signature
from blob_lock.exceptions import LockLost, LockTimeout, StoreSaturated
from blob_lock.prefect._held import HOLDER_LABEL, holder_label

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from blob_lock._option_types import LockOptions

__all__ = ["HOLDER_LABEL", "BlobLockManager", "holder_label"]

_LOOK = ("storage_options", "credential_provider")  # what a read of the store needs
_NOT_FOR_LOCKS = ("timeout", "on_lost")  # the manager's own: each call passes its own


class BlobLockManager(LockManager):  # type: ignore[misc,unused-ignore]  # Any without Prefect
    """Prefect's ``LockManager`` on blob-lock: the lock of each key at ``{prefix}/{key}``.

    ``prefix`` is a lock URI prefix (``s3://bucket/prefect-locks``, ``az://...``, a local or
    NFS path); ``options`` are ``BlobLock``'s (``expire``, ``storage_options``,
    ``credential_provider``, ``labels``, ...), checked now. ``timeout`` bounds the waits
    that Prefect leaves unbounded (``acquire_timeout=None``) by raising ``LockTimeout``;
    ``wait_for_lock`` is not bounded by it. ``on_lost`` is called with the
    ``LockLost`` error when a held lock is lost, after the WARNING this module logs.
    Pickles as its prefix and options: a copy in another process answers from the store.
    """

    def __init__(self, prefix: str | os.PathLike[str], **options: Unpack[LockOptions]) -> None:
        self.prefix = here.prefix(prefix)
        self.options: dict[str, Any] = dict(options)
        if HOLDER_LABEL in (options.get("labels") or {}):
            raise ValueError(f"the label {HOLDER_LABEL!r} is the manager's: it names the holder")
        self._default_wait = here.timeout("timeout", options.get("timeout"))
        # Every option checked now, as BlobLock checks its own; no request is made.
        BlobLock(self._uri("check"), **self._lock_options("check", "check", None, logs.MODULE))

    # Pickled as its prefix and options: the locks held stay with the process that holds
    # them, and a copy elsewhere answers from the store.
    def __getstate__(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.prefix, self.options = state["prefix"], dict(state["options"])
        self._default_wait = here.timeout("timeout", self.options.get("timeout"))

    def __repr__(self) -> str:
        return f"BlobLockManager({self.prefix!r})"

    # -- acquisition ----------------------------------------------------------------------

    def acquire_lock(
        self,
        key: str,
        holder: str,
        acquire_timeout: float | None = None,
        hold_timeout: float | None = None,
    ) -> bool:
        """Waits up to ``acquire_timeout`` seconds (0: one attempt; None: for ever) for the
        lock of ``key``; True once ``holder`` holds it (at once if it does already), False
        when the time ran out. With ``acquire_timeout`` None and the manager's ``timeout``
        option, raises ``LockTimeout`` after that long instead: Prefect's transactions
        ignore a False and would run the task without the lock. Held until
        ``release_lock``, or for ``hold_timeout`` seconds at most (counted again from each
        acquisition by the same holder). A wait is logged once, at INFO, with who holds the
        key; a takeover from a holder whose lease expired, at WARNING (to the run's logger
        while a Prefect run is active)."""
        uri, label, wait = self._uri(key), holder_label(holder), self._wait(acquire_timeout)
        hold, log = here.timeout("hold_timeout", hold_timeout), logs.run_logger()
        if _again(key, holder, uri, label, hold, log):
            return True
        lock = BlobLock(uri, **self._lock_options(key, holder, hold, log))
        began = time.monotonic()
        if _attempt(lock.try_acquire):
            return _took(key, holder, label, lock, hold, log)
        seen = inspect(uri, **self._look()) if _maybe_elsewhere(uri) else None
        if seen is not None and _holds(seen, label):
            return True  # the same holder, through another copy of the manager
        if wait == 0:
            return False
        logs.waits(log, key, holder, seen if seen is not None else _holder_here(uri))
        if lock.acquire(timeout=_rest(wait, began)):
            return _took(key, holder, label, lock, hold, log)
        return self._timed_out(key, holder, uri, acquire_timeout, wait)

    async def aacquire_lock(
        self,
        key: str,
        holder: str,
        acquire_timeout: float | None = None,
        hold_timeout: float | None = None,
    ) -> bool:
        """``acquire_lock`` without blocking the event loop."""
        uri, label, wait = self._uri(key), holder_label(holder), self._wait(acquire_timeout)
        hold, log = here.timeout("hold_timeout", hold_timeout), logs.run_logger()
        if _again(key, holder, uri, label, hold, log):
            return True
        lock = BlobLock(uri, **self._lock_options(key, holder, hold, log))
        began = time.monotonic()
        try:
            got = await lock.try_acquire_async()
        except StoreSaturated:
            got = False
        if got:
            return _took(key, holder, label, lock, hold, log)
        seen = await inspect_async(uri, **self._look()) if _maybe_elsewhere(uri) else None
        if seen is not None and _holds(seen, label):
            return True
        if wait == 0:
            return False
        logs.waits(log, key, holder, seen if seen is not None else _holder_here(uri))
        if await lock.acquire_async(timeout=_rest(wait, began)):
            return _took(key, holder, label, lock, hold, log)
        return self._timed_out(key, holder, uri, acquire_timeout, wait)

    def _timed_out(
        self, key: str, holder: str, uri: str, asked: float | None, wait: float | None
    ) -> bool:
        if asked is not None:
            return False
        raise LockTimeout(
            f"Prefect lock {key!r}: holder {holder} waited {wait:g}s (the manager's timeout) "
            "and another holder still holds it",
            uri,
        )

    # -- release --------------------------------------------------------------------------

    def release_lock(self, key: str, holder: str) -> None:
        """Releases ``holder``'s lock of ``key``. ValueError when another holder holds it;
        nothing when nobody does (released already, expired, never taken). After a loss
        (logged when it happened, with its cause) it returns even when the store is out of
        reach: Prefect's rollback calls it, and the task's error should be the loss."""
        uri, label = self._uri(key), holder_label(holder)
        held = here.current(uri)
        if held is not None and held.label == label:
            if here.forget(held):
                _release(held)
            return
        if held is not None and held.lock.held:
            raise _not_held(key, holder, held.holder)
        seen = inspect(uri, **self._look())
        if seen.free:
            return
        found = seen.labels.get(HOLDER_LABEL)
        if found != label:
            raise _not_held(key, holder, found or f"owner {seen.owner}")
        # The holder's acquisition through another copy of the manager (another process).
        break_lock(uri, owner=seen.owner, token=seen.token, **self._look())

    # -- looking --------------------------------------------------------------------------

    def is_locked(self, key: str) -> bool:
        """True while someone holds the lock of ``key`` (read from the store unless it is
        held here); also in this process after its holder here lost it, until that holder
        releases it."""
        uri = self._uri(key)
        return here.current(uri) is not None or not inspect(uri, **self._look()).free

    def is_lock_holder(self, key: str, holder: str) -> bool:
        """True while ``holder`` holds the lock of ``key``, in this process or another."""
        uri, label = self._uri(key), holder_label(holder)
        held = here.current(uri)
        if held is not None and held.lock.held:
            return held.label == label  # a lease held here: nobody else holds it
        if held is not None and held.label == label:
            return False  # lost: Prefect must not write under it
        return _holds(inspect(uri, **self._look()), label)

    def wait_for_lock(self, key: str, timeout: float | None = None) -> bool:
        """Waits until the lock of ``key`` is free; False if ``timeout`` passed first."""
        uri, until = self._uri(key), here.deadline(here.timeout("timeout", timeout))
        if not here.wait_released(uri, until):
            return False
        try:
            wait_free(uri, timeout=here.left(until), **self._look())
        except LockTimeout:
            return False
        return True

    async def await_for_lock(self, key: str, timeout: float | None = None) -> bool:
        """``wait_for_lock`` without blocking the event loop."""
        uri, until = self._uri(key), here.deadline(here.timeout("timeout", timeout))
        pause = 0.005  # a holder here: polled, as the condition cannot be awaited
        while (held := here.current(uri)) is not None and held.lock.held:
            remaining = here.left(until)
            if remaining == 0:
                return False
            await asyncio.sleep(pause if remaining is None else min(pause, remaining))
            pause = min(pause * 2, 0.1)
        try:
            await wait_free_async(uri, timeout=here.left(until), **self._look())
        except LockTimeout:
            return False
        return True

    # -- the parts ------------------------------------------------------------------------

    def _uri(self, key: str) -> str:
        here.check_key(key)
        return f"{self.prefix}/{key}"

    def _look(self) -> dict[str, Any]:
        return {name: self.options[name] for name in _LOOK if name in self.options}

    def _wait(self, acquire_timeout: float | None) -> float | None:
        if acquire_timeout is None:
            return self._default_wait
        return here.timeout("acquire_timeout", acquire_timeout)

    def _lock_options(
        self, key: str, holder: str, hold: float | None, log: logs.Logger
    ) -> dict[str, Any]:
        options = {k: v for k, v in self.options.items() if k not in _NOT_FOR_LOCKS}
        labels = dict(self.options.get("labels") or {})
        options["labels"] = {**labels, HOLDER_LABEL: holder_label(holder)}
        # Logged on blob-lock's notice threads: a user's on_lost that blocks never holds
        # the WARNING up.
        notice = functools.partial(_lost, key, holder, log)
        options["on_lost"] = LossNotice(notice, self.options.get("on_lost"))
        here.shorten(options, hold)
        return options


def _attempt(try_acquire: Callable[[], bool]) -> bool:
    """One attempt; a store that is saturated (the held locks' renewals first) is a lock
    not taken this time: the wait that follows retries."""
    try:
        return try_acquire()
    except StoreSaturated:
        return False


def _again(
    key: str, holder: str, uri: str, label: str, hold: float | None, log: logs.Logger
) -> bool:
    """True if ``holder`` holds ``uri`` in this process already: its ``hold_timeout``
    then starts again from now (Prefect's file-system manager's rule), or ends (None)."""
    held = here.current(uri)
    if held is None or not held.lock.held or held.label != label:
        return False
    again = here.Held(key, holder, label, held.lock, log)
    again.timer = _timer(again, hold)
    return here.replace(held, again)


def _holder_here(uri: str) -> str:
    """Who holds ``uri`` through a manager in this process (asked when one did a moment
    ago)."""
    held = here.current(uri)
    who = held.holder if held is not None else "(released just now)"
    return f"holder {who} in this process"


def _maybe_elsewhere(uri: str) -> bool:
    """Whether a holder may hold ``uri`` through another copy: not while a holder of this
    process holds it (known without a read)."""
    held = here.current(uri)
    return held is None or not held.lock.held


def _holds(seen: Inspection, label: str) -> bool:
    return not seen.free and seen.labels.get(HOLDER_LABEL) == label


def _rest(wait: float | None, began: float) -> float | None:
    return None if wait is None else max(0.0, wait - (time.monotonic() - began))


def _not_held(key: str, holder: str, by: str) -> ValueError:
    # Prefect's own managers' words, then who holds it.
    return ValueError(f"No lock held by {holder} for transaction with key {key}: {by} holds it")


def _took(
    key: str, holder: str, label: str, lock: BlobLock, hold: float | None, log: logs.Logger
) -> bool:
    previous = lock._native.took_over  # a takeover: the holder whose lease had expired
    if previous is not None:
        logs.took_over(log, key, holder, previous)
    held = here.Held(key, holder, label, lock, log)
    held.timer = _timer(held, hold)
    here.record(held)
    return True


def _timer(held: here.Held, hold: float | None) -> threading.Timer | None:
    """The timer that ends ``held`` at its ``hold_timeout`` (not started yet)."""
    if hold is None:
        return None
    timer = threading.Timer(hold, _hold_ended, (held,))
    timer.daemon = True
    return timer


def _hold_ended(held: here.Held) -> None:
    """``hold_timeout`` passed: the lock is released, as Prefect's own managers release it."""
    if not here.forget(held):
        return
    if held.lock.held:
        logs.hold_ended(held.log, held.key, held.holder)
    _release(held)


def _release(held: here.Held) -> None:
    """Releases what ``held`` holds, best effort: the task's work is done, and a store that
    does not answer must not fail it (Prefect's rollback calls this too, and the task's own
    error must come out). Waits two request timeouts at most, then leaves the release to
    go on in the background with one WARNING; on an event loop (an async transaction calls
    this synchronously) one second at most, so that a store that answers is released
    before this returns (as Prefect's own managers are) and one that does not holds the
    loop no longer than that. A loss is logged when it happens."""
    patience = ON_LOOP_PATIENCE if _on_event_loop() else None
    _, unanswered = held.lock._release_at_end(patience, warn=False)
    if unanswered is not None:
        logs.release_unanswered(held.log, held.key, held.holder, unanswered, held.lock.lost)


# How long a release on an event loop waits for the store's answer, at most.
ON_LOOP_PATIENCE = 1.0


def _on_event_loop() -> bool:
    """Whether this thread is running an event loop."""
    return asyncio._get_running_loop() is not None


def _lost(key: str, holder: str, log: logs.Logger, error: LockLost) -> None:
    """A held lock lost (on one of blob-lock's notice threads; the user's ``on_lost``
    follows on its callback threads)."""
    logs.lost(log, key, holder, error.message)
    here.notify()


# help() and inspect.signature show every lock option, as for BlobLock.
_POSITIONAL = _pyinspect.Parameter.POSITIONAL_OR_KEYWORD
_HEAD = [
    _pyinspect.Parameter("self", _POSITIONAL),
    _pyinspect.Parameter("prefix", _POSITIONAL, annotation="str | os.PathLike[str]"),
]
BlobLockManager.__init__.__signature__ = signature(_HEAD)  # type: ignore[attr-defined]
