"""One acquisition at a time through one ``BlobLock`` object, as with ``threading.Lock``:
another thread (or asyncio task) waits for its turn; the one that holds the turn may not
take it again (locks are not reentrant). A turn is held from acquisition to release."""

from __future__ import annotations

import asyncio
import threading
import time

from blob_lock.exceptions import LockError

__all__ = ["Turn", "current"]


def current() -> object:
    """Who takes a turn in asyncio: the task (tasks share a thread), else the thread."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop
        task = None
    return task or threading.current_thread()


class Turn:
    """The turn of one BlobLock object."""

    __slots__ = ("_holder", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: object = None

    def take(self, me: object, timeout: float | None, uri: str) -> bool:
        """``me``'s turn; False if another holder keeps it past ``timeout`` (None: for ever,
        0: do not wait). ``LockError`` if ``me`` holds it already."""
        if self._holder == me:
            raise LockError(
                f"this BlobLock already holds {uri} (or is acquiring it) in this "
                "thread; release it first (locks are not reentrant)",
                uri,
            )
        if timeout is None:
            got = self._lock.acquire()
        elif timeout <= 0:
            got = self._lock.acquire(blocking=False)
        else:
            got = self._lock.acquire(timeout=timeout)
        if got:
            self._holder = me
        return got

    async def take_async(self, me: object, timeout: float | None, uri: str) -> bool:
        """``take`` without blocking the event loop: polls, with a growing pause (a
        ``threading.Lock`` cannot be awaited)."""
        began, pause = time.monotonic(), 0.001
        while not self.take(me, 0.0, uri):
            waited = time.monotonic() - began
            if timeout is not None and waited >= timeout:
                return False
            await asyncio.sleep(pause if timeout is None else min(pause, timeout - waited))
            pause = min(pause * 2, 0.05)
        return True

    def give(self) -> None:
        """Gives the turn back, if it is taken."""
        if self._lock.locked():
            self._holder = None
            try:
                self._lock.release()
            except RuntimeError:  # released meanwhile by another thread's release()
                pass
