"""What ``blob_lock.prefect`` keeps per process: the locks Prefect's holders hold here, by lock
URI, shared by every copy of a manager in the process (cloudpickle's, a deep copy's), and
the checks of what Prefect passes (the prefix, keys, holders, timeouts), each refused as
``BlobLock`` refuses its own and naming its argument. Imports no Prefect."""

from __future__ import annotations

import hashlib
import os
import threading
import time
import unicodedata
from dataclasses import dataclass
from typing import Any

from blob_lock import _blob_lock
from blob_lock._args import Seconds, lock_uri, seconds
from blob_lock._lock import BlobLock
from blob_lock._options import LOCK_OPTIONS

__all__ = [
    "HOLDER_LABEL",
    "Held",
    "check_key",
    "current",
    "deadline",
    "forget",
    "holder_label",
    "left",
    "notify",
    "prefix",
    "record",
    "replace",
    "shorten",
    "timeout",
    "wait_released",
]

HOLDER_LABEL = "prefect.holder"
"""The label that carries Prefect's holder in the lockfile."""

_DEFAULT_EXPIRE: float = next(o.default for o in LOCK_OPTIONS if o.name == "expire")


def holder_label(holder: str) -> str:
    """What the lockfile's ``prefect.holder`` label says for ``holder``: the holder, or its
    SHA-256 when it is longer than 256 characters (labels stay small) or holds a control
    character (a label is one line)."""
    if not isinstance(holder, str):
        raise TypeError(f"a Prefect lock holder is a str, got {holder!r}")
    if holder and len(holder) <= 256 and not any(unicodedata.category(c) == "Cc" for c in holder):
        return holder
    return "sha256:" + hashlib.sha256(holder.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(eq=False)
class Held:
    """A lock that a holder of this process acquired through a manager."""

    key: str
    holder: str
    label: str
    lock: BlobLock
    log: Any  # the logger of the run that acquired (blob_lock.prefect._logs.run_logger)
    timer: threading.Timer | None = None  # ends it at its hold_timeout


# By lock URI. The condition wakes this process's waiters at each release and loss.
_held: dict[str, Held] = {}
_changed = threading.Condition()


def _forget_in_child() -> None:
    global _changed
    _held.clear()  # a child made by fork holds none of its parent's locks
    _changed = threading.Condition()  # another thread may have held it at the fork


os.register_at_fork(after_in_child=_forget_in_child)


def current(uri: str) -> Held | None:
    """The record of the lock at ``uri`` if it is held here or was lost here (and its
    holder has not released it since)."""
    held = _held.get(uri)
    return held if held is not None and (held.lock.held or held.lock.lost) else None


def record(held: Held) -> None:
    """Notes ``held``, in place of what was noted for its URI (a lost lock of another
    holder, whose timer stops); starts its timer."""
    with _changed:
        before, _held[held.lock.uri] = _held.get(held.lock.uri), held
    if before is not None and before.timer is not None:
        before.timer.cancel()
    if held.timer is not None:
        held.timer.start()


def replace(old: Held, new: Held) -> bool:
    """Notes ``new`` in place of ``old`` (the same lock, acquired again by its holder), its
    timer started afresh and ``old``'s stopped; False, and nothing changed, if ``old`` is
    no longer noted or held (its ``hold_timeout`` ended meanwhile)."""
    with _changed:
        if _held.get(old.lock.uri) is not old or not old.lock.held:
            return False
        _held[old.lock.uri] = new
    if old.timer is not None:
        old.timer.cancel()
    if new.timer is not None:
        new.timer.start()
    return True


def forget(held: Held) -> bool:
    """Drops ``held`` if it is still what is noted for its URI, waking the waiters here;
    True if it was."""
    with _changed:
        if _held.get(held.lock.uri) is not held:
            return False
        del _held[held.lock.uri]
        _changed.notify_all()
    if held.timer is not None:
        held.timer.cancel()
    return True


def notify() -> None:
    """Wakes this process's waiters (a lock was lost: it is held no more)."""
    with _changed:
        _changed.notify_all()


def wait_released(uri: str, until: float | None) -> bool:
    """Waits while a holder of this process holds ``uri``; False if ``until`` (a monotonic
    time; None: for ever) came first."""
    with _changed:
        while (held := current(uri)) is not None and held.lock.held:
            remaining = left(until)
            if remaining == 0:
                return False
            # Woken by each release and loss here; in slices all the same, as a guard.
            _changed.wait(1.0 if remaining is None else min(remaining, 1.0))
    return True


def prefix(given: object) -> str:
    """A manager's prefix, checked as a listing's prefix is (``s3:/bucket`` is refused, not
    taken for a local folder of that name); a local one made absolute, so that a copy
    unpickled in a process with another working folder locks the same place."""
    uri = lock_uri(given).rstrip("/")
    if not uri:
        raise ValueError("the prefix names no place: give s3://bucket/path, a path, ...")
    _blob_lock.check_uri(uri, True)
    if "://" not in uri:
        uri = os.path.abspath(os.path.expanduser(uri))
    return uri


def check_key(key: object) -> None:
    """A key is one or more path segments under the prefix."""
    if not isinstance(key, str):
        raise TypeError(f"a Prefect lock key is a str, got {key!r}")
    if not key or key.startswith("/") or any(p in ("", ".", "..") for p in key.split("/")):
        raise ValueError(
            f"Prefect lock key {key!r}: a key is one or more path segments under the prefix, "
            "none empty, '.' or '..'"
        )


def shorten(options: dict[str, Any], hold_timeout: float | None) -> None:
    """A lock held at most ``hold_timeout`` expires no later, so that a holder that dies
    frees it within that bound too (0.5 s at least, the shortest expire). A heartbeat or
    settle given for the longer expire is dropped when it no longer fits (each then
    follows from the expire)."""
    hold = timeout("hold_timeout", hold_timeout)
    if hold is None:
        return
    expire = max(hold, 0.5)
    given: Seconds | None = options.get("expire")
    if expire >= (_DEFAULT_EXPIRE if given is None else seconds("expire", given)):
        return
    options["expire"] = expire
    for name in ("heartbeat", "settle"):
        other = seconds(name, options.get(name))
        if other is not None and other >= expire / 2:
            del options[name]


def timeout(name: str, value: Seconds | None) -> float | None:
    """Seconds (None: none) checked as ``BlobLock`` checks its ``timeout``: zero or more,
    finite, at most a year; the error names ``name``."""
    checked = seconds(name, value)
    if checked is not None:
        _blob_lock.check_timeout(checked, name)
    return checked


def deadline(timeout: float | None) -> float | None:
    """The monotonic time ``timeout`` seconds from now (None: none)."""
    return None if timeout is None else time.monotonic() + max(0.0, timeout)


def left(until: float | None) -> float | None:
    """Seconds left until ``until`` (0 once passed; None: no deadline)."""
    return None if until is None else max(0.0, until - time.monotonic())
