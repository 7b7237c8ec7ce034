"""One holder at a time through one ``BlobLock`` object, as with ``threading.Lock``: the
thread (or asyncio task) whose turn it is holds the object from the start of its
acquisition to its release; another waits for its turn; the one that holds it may not take
it again (locks are not reentrant).

The turn itself, who holds it or none, is one value of the native lock
(``NativeLock.take_turn``): a free turn (nearly every one) is taken and given back without a
lock of Python's, whose two uses cost a fresh ``with`` several microseconds. This module is
the waiting: rare (two threads sharing one ``BlobLock`` object), so the waiters share one
condition for the whole process. (The native lock's own guard against two acquisitions
running at once, ``Shared::running``, is not the turn: see src/python/holding.rs.)"""

from __future__ import annotations

import os
import sys
import threading
import time

from blob_lock._blob_lock import NativeLock

__all__ = ["current", "give", "take", "take_async"]


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


def take(native: NativeLock, me: object, timeout: float | None) -> bool:
    """``me``'s turn on ``native``; False if another holder keeps it past ``timeout``
    (None: for ever, 0: do not wait). ``LockError`` if ``me`` holds it already."""
    global _waiting
    if native.take_turn(me):
        return True
    if timeout is not None and timeout <= 0:
        return False
    with _guard:
        # Counted before the turn is looked at again: a giver reads the count after it
        # frees the turn, so either this look sees it free or the giver wakes us.
        _waiting += 1
        try:
            return _turns.wait_for(lambda: native.take_turn(me), timeout)
        finally:
            _waiting -= 1


async def take_async(native: NativeLock, me: object, timeout: float | None) -> bool:
    """``take`` without blocking the event loop: polls, with a growing pause (the condition
    cannot be awaited)."""
    import asyncio  # loaded already: an event loop runs this

    began, pause = time.monotonic(), 0.001
    while not take(native, me, 0.0):
        waited = time.monotonic() - began
        if timeout is not None and waited >= timeout:
            return False
        await asyncio.sleep(pause if timeout is None else min(pause, timeout - waited))
        pause = min(pause * 2, 0.05)
    return True


def give(native: NativeLock) -> None:
    """Gives ``native``'s turn back, if it is taken (by any thread: ``release()`` may be
    called from another one)."""
    native.give_turn()
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
