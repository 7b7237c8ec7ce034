"""Prefect's lock manager on blob-lock: ``BlobLockManager(prefix, **options)`` is a
``prefect.locking.protocol.LockManager`` whose lock for a key is a ``BlobLock`` at
``{prefix}/{key}``, in the store that already holds the results (S3, Azure, GCS, local or
NFS files). Needs Prefect 3 (``pip install 'blob-lock[prefect]'``); only this module
imports it. docs/prefect.md shows the three lines that switch a flow over.

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
  holder that dies frees it within that bound too.
- ``acquire_timeout`` 0 tries once, None waits for ever (or the manager's ``timeout``
  option, the bound Prefect's transactions, which never pass one, then get). The same
  holder acquiring again gets True, in this process or through another copy.
- ``release_lock`` by another holder raises ValueError naming both; releasing a lock that
  nobody holds does nothing (prefect-redis's rule: a transaction retried after its rollback
  releases twice). A copy of the manager may release its holder's lock taken elsewhere:
  it breaks that acquisition (``break_lock`` with its owner and token).
- A lock lost while held (a store outage past the lease, a break) is logged at WARNING
  with the key, ``on_lost`` is called, and from then on ``is_lock_holder`` answers False
  and ``is_locked`` True in this process until the holder releases it: Prefect then
  refuses the task's write under it, as it refuses another holder's, even when nobody has
  taken the lock yet.
- ``wait_for_lock`` waits for a holder in this process without a request, then reads the
  store until the lock is free (``wait_free``); a timeout of 0 looks once.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
import threading
import time
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

try:
    from prefect.locking.protocol import LockManager  # type: ignore[import-not-found,unused-ignore]  # an extra
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("blob_lock.prefect needs Prefect 3: pip install 'blob-lock[prefect]'") from e

from blob_lock._args import lock_uri, seconds
from blob_lock._inspect import (
    Inspection,
    break_lock,
    inspect,
    inspect_async,
    wait_free,
    wait_free_async,
)
from blob_lock._lock import BlobLock
from blob_lock.exceptions import LockLost, LockTimeout

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from blob_lock._options import LockOptions

__all__ = ["HOLDER_LABEL", "BlobLockManager"]

HOLDER_LABEL = "prefect.holder"
"""The label that carries Prefect's holder in the lockfile."""

logger = logging.getLogger("blob_lock.prefect")

_LOOK = ("storage_options", "credential_provider")  # what a read of the store needs
_NOT_FOR_LOCKS = ("timeout", "on_lost")  # the manager's own: each call passes its own


def holder_label(holder: str) -> str:
    """What the lockfile's ``prefect.holder`` label says for ``holder``."""
    if not isinstance(holder, str):
        raise TypeError(f"a Prefect lock holder is a str, got {holder!r}")
    if holder and len(holder) <= 256 and not any(unicodedata.category(c) == "Cc" for c in holder):
        return holder
    return "sha256:" + hashlib.sha256(holder.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(eq=False)
class _Held:
    """A lock a holder of this process acquired through a manager."""

    key: str
    holder: str
    label: str
    lock: BlobLock
    timer: threading.Timer | None = None


# Per process, by lock URI: every copy of a manager here (cloudpickle's, a deep copy's) sees
# what the others hold. The condition wakes waiters of this process at each release.
_held: dict[str, _Held] = {}
_changed = threading.Condition()


def _forget_in_child() -> None:
    global _changed
    _held.clear()  # a child made by fork holds none of its parent's locks
    _changed = threading.Condition()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_forget_in_child)


def _current(uri: str) -> _Held | None:
    """The record of a lock held or lost here, if there is one."""
    held = _held.get(uri)
    return held if held is not None and (held.lock.held or held.lock.lost) else None


def _forget(uri: str, held: _Held) -> bool:
    """Drops ``held`` if it is still the record of ``uri``; True if it was."""
    with _changed:
        if _held.get(uri) is not held:
            return False
        del _held[uri]
        _changed.notify_all()
    if held.timer is not None:
        held.timer.cancel()
    return True


class BlobLockManager(LockManager):  # type: ignore[misc,unused-ignore]  # Any without prefect's types
    """Prefect's ``LockManager`` on blob-lock: the lock of each key at ``{prefix}/{key}``.

    ``prefix`` is a lock URI prefix (``s3://bucket/prefect-locks``, ``az://...``, a local or
    NFS path); ``options`` are ``BlobLock``'s (``expire``, ``storage_options``,
    ``credential_provider``, ``labels``, ...), checked now. ``timeout`` bounds the waits
    Prefect leaves unbounded (``acquire_timeout=None``); ``on_lost`` is called with the
    ``LockLost`` error when a held lock is lost, after the WARNING this module logs.
    Pickles as its prefix and options: a copy in another process answers from the store.
    """

    def __init__(self, prefix: str | os.PathLike[str], **options: Unpack[LockOptions]) -> None:
        self.prefix = _prefix(prefix)
        self.options: dict[str, Any] = dict(options)
        if HOLDER_LABEL in (options.get("labels") or {}):
            raise ValueError(
                f"the label {HOLDER_LABEL!r} is the manager's own: it names the holder"
            )
        timeout = seconds("timeout", options.get("timeout"))
        self._wait_default = timeout
        # Every option checked here, as BlobLock checks its own (no request is made).
        BlobLock(self._uri("options-check"), **self._lock_options("options-check", "check", None))

    # -- pickling: the prefix and options; held locks stay with the process --------------

    def __getstate__(self) -> dict[str, Any]:
        return {"prefix": self.prefix, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.prefix, self.options = state["prefix"], dict(state["options"])
        self._wait_default = seconds("timeout", self.options.get("timeout"))

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
        """Waits up to ``acquire_timeout`` seconds (0: one attempt; None: for ever, or the
        manager's ``timeout``) for the lock of ``key``; True once ``holder`` holds it,
        False when the time ran out. Held until ``release_lock``, or ``hold_timeout``."""
        uri, label, wait = self._uri(key), holder_label(holder), self._wait(acquire_timeout)
        if self._holds_here(uri, label):
            return True
        lock = BlobLock(uri, **self._lock_options(key, holder, hold_timeout))
        began = time.monotonic()
        if lock.try_acquire():
            return self._took(key, holder, label, lock, hold_timeout)
        if self._maybe_elsewhere(uri, label) and self._holds(inspect(uri, **self._look()), label):
            return True  # the same holder, through another copy of the manager
        if wait == 0:
            return False
        left = None if wait is None else max(0.0, wait - (time.monotonic() - began))
        if not lock.acquire(timeout=left):
            return False
        return self._took(key, holder, label, lock, hold_timeout)

    async def aacquire_lock(
        self,
        key: str,
        holder: str,
        acquire_timeout: float | None = None,
        hold_timeout: float | None = None,
    ) -> bool:
        """``acquire_lock`` without blocking the event loop."""
        uri, label, wait = self._uri(key), holder_label(holder), self._wait(acquire_timeout)
        if self._holds_here(uri, label):
            return True
        lock = BlobLock(uri, **self._lock_options(key, holder, hold_timeout))
        began = time.monotonic()
        if await lock.try_acquire_async():
            return self._took(key, holder, label, lock, hold_timeout)
        if self._maybe_elsewhere(uri, label) and self._holds(
            await inspect_async(uri, **self._look()), label
        ):
            return True
        if wait == 0:
            return False
        left = None if wait is None else max(0.0, wait - (time.monotonic() - began))
        if not await lock.acquire_async(timeout=left):
            return False
        return self._took(key, holder, label, lock, hold_timeout)

    def _took(
        self, key: str, holder: str, label: str, lock: BlobLock, hold_timeout: float | None
    ) -> bool:
        held = _Held(key, holder, label, lock)
        uri = lock.uri
        if hold_timeout is not None:
            held.timer = threading.Timer(hold_timeout, self._hold_ended, (uri, held))
            held.timer.daemon = True
        with _changed:
            before, _held[uri] = _held.get(uri), held
        if before is not None and before.timer is not None:
            before.timer.cancel()  # a lost record of another holder, replaced
        if held.timer is not None:
            held.timer.start()
        return True

    def _hold_ended(self, uri: str, held: _Held) -> None:
        """``hold_timeout`` passed: the lock is let go, as Prefect's own managers let it."""
        if not _forget(uri, held):
            return
        if held.lock.held:
            logger.warning(
                "Prefect lock %r: holder %s still held it at its hold_timeout; released, and "
                "the next holder may take it (Prefect's hold_timeout semantics)",
                held.key,
                held.holder,
            )
        held.lock.release()

    # -- release --------------------------------------------------------------------------

    def release_lock(self, key: str, holder: str) -> None:
        """Releases ``holder``'s lock of ``key``. ValueError when another holder holds it;
        nothing when nobody does (released already, expired, never taken)."""
        uri, label = self._uri(key), holder_label(holder)
        held = _current(uri)
        if held is not None and held.label == label:
            if _forget(uri, held):
                held.lock.release()  # a lost lock's release writes nothing not its own
            return
        if held is not None and held.lock.held:
            raise self._not_held(key, holder, held.holder)
        seen = inspect(uri, **self._look())
        if seen.free:
            return
        if seen.labels.get(HOLDER_LABEL) == label:
            # The holder's acquisition through another copy of the manager (another process).
            look = self._look()
            break_lock(uri, owner=seen.owner, token=seen.token, **look)
            return
        raise self._not_held(key, holder, seen.labels.get(HOLDER_LABEL) or f"owner {seen.owner}")

    @staticmethod
    def _not_held(key: str, holder: str, by: str) -> ValueError:
        return ValueError(f"No lock held by {holder} for transaction with key {key}: {by} holds it")

    # -- looking --------------------------------------------------------------------------

    def is_locked(self, key: str) -> bool:
        """True while someone holds the lock of ``key`` (read from the store unless held
        here), and in this process after its holder here lost it, until that holder
        releases it."""
        uri = self._uri(key)
        if _current(uri) is not None:
            return True
        return not inspect(uri, **self._look()).free

    def is_lock_holder(self, key: str, holder: str) -> bool:
        """True while ``holder`` holds the lock of ``key``, in this process or another."""
        uri, label = self._uri(key), holder_label(holder)
        held = _current(uri)
        if held is not None and held.lock.held:
            return held.label == label
        if held is not None and held.label == label:
            return False  # lost: Prefect must not write under it
        return self._holds(inspect(uri, **self._look()), label)

    def wait_for_lock(self, key: str, timeout: float | None = None) -> bool:
        """Waits until the lock of ``key`` is free; False if ``timeout`` passed first."""
        uri, deadline = self._uri(key), _deadline(timeout)
        with _changed:
            while (held := _current(uri)) is not None and held.lock.held:
                left = _left(deadline)
                if left == 0:
                    return False
                # Woken by each release here; a slice, for a loss, which notifies nobody.
                _changed.wait(1.0 if left is None else min(left, 1.0))
        try:
            wait_free(uri, timeout=_left(deadline), **self._look())
        except LockTimeout:
            return False
        return True

    async def await_for_lock(self, key: str, timeout: float | None = None) -> bool:
        """``wait_for_lock`` without blocking the event loop."""
        uri, deadline = self._uri(key), _deadline(timeout)
        pause = 0.005
        while (held := _current(uri)) is not None and held.lock.held:
            left = _left(deadline)
            if left == 0:
                return False
            await asyncio.sleep(pause if left is None else min(pause, left))
            pause = min(pause * 2, 0.1)
        try:
            await wait_free_async(uri, timeout=_left(deadline), **self._look())
        except LockTimeout:
            return False
        return True

    # -- the parts ------------------------------------------------------------------------

    def _uri(self, key: str) -> str:
        _check_key(key)
        return f"{self.prefix}/{key}"

    def _look(self) -> dict[str, Any]:
        return {name: self.options[name] for name in _LOOK if name in self.options}

    def _wait(self, acquire_timeout: float | None) -> float | None:
        if acquire_timeout is None:
            return self._wait_default
        wait = seconds("acquire_timeout", acquire_timeout)
        if wait < 0:
            raise ValueError(f"acquire_timeout must not be negative, got {acquire_timeout!r}")
        return wait

    @staticmethod
    def _holds_here(uri: str, label: str) -> bool:
        held = _current(uri)
        return held is not None and held.lock.held and held.label == label

    @staticmethod
    def _maybe_elsewhere(uri: str, label: str) -> bool:
        """Whether ``label`` may hold ``uri`` through another copy: not when another holder
        of this process holds it (no read needed to know)."""
        held = _current(uri)
        return held is None or not held.lock.held

    @staticmethod
    def _holds(seen: Inspection, label: str) -> bool:
        return not seen.free and seen.labels.get(HOLDER_LABEL) == label

    def _lock_options(self, key: str, holder: str, hold_timeout: float | None) -> dict[str, Any]:
        options = {k: v for k, v in self.options.items() if k not in _NOT_FOR_LOCKS}
        options["labels"] = {
            **(self.options.get("labels") or {}),
            HOLDER_LABEL: holder_label(holder),
        }
        options["on_lost"] = functools.partial(_lost, key, holder, self.options.get("on_lost"))
        if hold_timeout is not None:
            hold = seconds("hold_timeout", hold_timeout)
            if hold < 0:
                raise ValueError(f"hold_timeout must not be negative, got {hold_timeout!r}")
            expire = seconds("expire", self.options.get("expire", 30.0))
            if hold < expire:
                _shorten(options, max(hold, 0.5))
        return options


def _shorten(options: dict[str, Any], expire: float) -> None:
    """``expire`` for a lock held at most that long; a heartbeat or settle given for the
    longer expire is dropped when it no longer fits (each then follows from ``expire``)."""
    options["expire"] = expire
    for name in ("heartbeat", "settle"):
        given = seconds(name, options.get(name))
        if given is not None and given >= expire / 2:
            del options[name]


def _lost(key: str, holder: str, on_lost: Any, error: LockLost) -> None:
    """A held lock lost (on one of blob-lock's callback threads)."""
    logger.warning(
        "Prefect lock %r of holder %s was lost while held: %s; Prefect will refuse this "
        "holder's write of the key's result",
        key,
        holder,
        error.message,
    )
    with _changed:
        _changed.notify_all()
    if on_lost is not None:
        on_lost(error)


def _prefix(prefix: object) -> str:
    uri = lock_uri(prefix).rstrip("/")
    if not uri:
        raise ValueError("the prefix names no place: give s3://bucket/path, a path, ...")
    if "://" not in uri:
        # Absolute, so that a copy unpickled in a process elsewhere locks the same place.
        uri = os.path.abspath(os.path.expanduser(uri))
    return uri


def _check_key(key: object) -> None:
    if not isinstance(key, str):
        raise TypeError(f"a Prefect lock key is a str, got {key!r}")
    parts = key.split("/")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(
            f"Prefect lock key {key!r}: a key is one or more path segments under the prefix, "
            "none empty, '.' or '..'"
        )


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + max(0.0, timeout)


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
