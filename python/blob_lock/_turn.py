"""One acquisition at a time through one ``BlobLock`` object, as with ``threading.Lock``:
another thread (or asyncio task) waits for its turn; the one that holds the turn may not
take it again (locks are not reentrant). A turn is held from acquisition to release.

Whether the turn is taken is an atomic flag of the native lock: a free turn (nearly every
one) is taken and given back without a lock of Python's, whose two uses cost a fresh
``with`` several microseconds. Who holds it lives in the lock's ``_holder`` slot (no object
of its own per lock: thousands are held). Waiting for a turn is rare (two threads sharing
one ``BlobLock`` object): the waiters share one condition for the whole process."""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Protocol

from blob_lock._blob_lock import NativeLock
from blob_lock.exceptions import LockError

__all__ = ["current", "give", "take", "take_async"]


class Turned(Protocol):
    _holder: object
    _native_lock: NativeLock

    @property
    def uri(self) -> str: ...


# Held only by a waiter and by a giver that found one waiting.
_guard = threading.Lock()
_turns = threading.Condition(_guard)
_waiting = 0


def current() -> object:
    """Who takes a turn in asyncio: the task (tasks share a thread), else the thread."""
    # No event loop runs where asyncio was never imported: a process that never uses it
    # does not pay for its import (a fifth of a command's start).
    asyncio = sys.modules.get("asyncio")
    task = None
    if asyncio is not None:
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no running event loop
            pass
    return task or threading.current_thread()


def take(lock: Turned, me: object, timeout: float | None) -> bool:
    """``me``'s turn on ``lock``; False if another holder keeps it past ``timeout`` (None:
    for ever, 0: do not wait). ``LockError`` if ``me`` holds it already."""
    global _waiting
    native = lock._native_lock
    if native.take_turn():
        lock._holder = me
        return True
    if lock._holder is me:
        raise LockError(
            f"this BlobLock already holds {lock.uri} (or is acquiring it) in this "
            "thread; release it first (locks are not reentrant)",
            lock.uri,
        )
    if timeout is not None and timeout <= 0:
        return False
    with _guard:
        # Counted before the turn is looked at again: a giver reads the count after it
        # frees the turn, so either this look sees it free or the giver wakes us.
        _waiting += 1
        try:
            if not _turns.wait_for(native.take_turn, timeout):
                return False
        finally:
            _waiting -= 1
    lock._holder = me
    return True


async def take_async(lock: Turned, me: object, timeout: float | None) -> bool:
    """``take`` without blocking the event loop: polls, with a growing pause (the condition
    cannot be awaited)."""
    import asyncio  # loaded already: an event loop runs this

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
    lock._holder = None
    lock._native_lock.give_turn()
    if _waiting:
        with _guard:
            _turns.notify_all()


def _after_fork_in_child() -> None:
    global _guard, _turns, _waiting
    _guard = threading.Lock()  # a parent thread may have held it
    _turns = threading.Condition(_guard)
    _waiting = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
