"""One acquisition at a time through one ``BlobLock`` object, as with ``threading.Lock``:
another thread (or asyncio task) waits for its turn; the one that holds the turn may not
take it again (locks are not reentrant). A turn is held from acquisition to release.

Whose turn it is lives in the lock's ``_holder`` slot, guarded by one condition for the
whole process: no object of its own per lock (a ``threading.Lock`` and its holder were 140
bytes of every held lock, and thousands are held). Waiting for a turn is rare (two threads
sharing one ``BlobLock`` object), so one condition for all of them costs nothing."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Protocol

from blob_lock.exceptions import LockError

__all__ = ["current", "give", "take", "take_async"]


class Turned(Protocol):
    _holder: object

    @property
    def uri(self) -> str: ...


# The guard is a plain lock (``with`` on it costs a fifth of ``with`` on the condition);
# the condition shares it, for the rare holder that waits.
_guard = threading.Lock()
_turns = threading.Condition(_guard)
_waiting = 0


def current() -> object:
    """Who takes a turn in asyncio: the task (tasks share a thread), else the thread."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop
        task = None
    return task or threading.current_thread()


def take(lock: Turned, me: object, timeout: float | None) -> bool:
    """``me``'s turn on ``lock``; False if another holder keeps it past ``timeout`` (None:
    for ever, 0: do not wait). ``LockError`` if ``me`` holds it already."""
    global _waiting
    with _guard:
        if lock._holder is me:
            raise LockError(
                f"this BlobLock already holds {lock.uri} (or is acquiring it) in this "
                "thread; release it first (locks are not reentrant)",
                lock.uri,
            )
        if lock._holder is not None:
            if timeout is not None and timeout <= 0:
                return False
            _waiting += 1
            try:
                if not _turns.wait_for(lambda: lock._holder is None, timeout):
                    return False
            finally:
                _waiting -= 1
        lock._holder = me
        return True


async def take_async(lock: Turned, me: object, timeout: float | None) -> bool:
    """``take`` without blocking the event loop: polls, with a growing pause (the condition
    cannot be awaited)."""
    began, pause = time.monotonic(), 0.001
    while not take(lock, me, 0.0):
        waited = time.monotonic() - began
        if timeout is not None and waited >= timeout:
            return False
        await asyncio.sleep(pause if timeout is None else min(pause, timeout - waited))
        pause = min(pause * 2, 0.05)
    return True


def give(lock: Turned) -> None:
    """Gives ``lock``'s turn back, if it is taken (by any thread: ``release()`` may be
    called from another one)."""
    with _guard:
        if lock._holder is not None:
            lock._holder = None
            if _waiting:
                _turns.notify_all()


def _after_fork_in_child() -> None:
    global _guard, _turns, _waiting
    _guard = threading.Lock()  # a parent thread may have held it
    _turns = threading.Condition(_guard)
    _waiting = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
