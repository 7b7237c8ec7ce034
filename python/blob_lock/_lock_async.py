"""The asynchronous half of ``BlobLock`` (``acquire_async``, ``async with``, ...) and what
both halves share: the loss raised at a block's end, the hand-off's grace, letting go for a
remote. ``_lock.py``'s ``BlobLock`` extends it with the blocking half."""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING

from blob_lock import _blob_lock, _process, _turn
from blob_lock._args import Seconds, seconds
from blob_lock._lock_facts import LockFacts
from blob_lock._release_status import ReleaseStatus, release_status
from blob_lock._turn import current
from blob_lock.exceptions import LockLost, LockTimeout

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["AsyncLock"]


def _grace(grace: Seconds | None) -> float:
    if grace is None:
        raise TypeError("grace must be seconds (a number) or a timedelta, got None")
    return seconds("grace", grace)


class AsyncLock(LockFacts):
    """A lock's asynchronous methods over its native lock; the fields are ``BlobLock``'s."""

    __slots__ = ("_last_timeout",)  # the one field this half writes

    if TYPE_CHECKING:  # BlobLock's
        _native_lock: _blob_lock.NativeLock
        _timeout: float | None
        _raise_on_lost: bool

    # What _process asks of a tracked lock, which BlobLock defines.
    def _end_at_exit(self) -> _blob_lock.NativeLock | None:
        raise NotImplementedError

    def _in_fork_child(self) -> None:
        raise NotImplementedError

    async def _release_at_end_async(self) -> str | None:
        """``_release_at_end`` without blocking the event loop."""
        _process.untrack(self)
        try:
            status, _ = await self._native.release_at_end_async(None, True)
        finally:
            _turn.give(self._native_lock)
        return status

    async def acquire_async(self, timeout: Seconds | None = None) -> bool:
        """``acquire`` without blocking the event loop. Cancelling it (``asyncio.timeout``,
        ``task.cancel()``) stops the wait and releases whatever it may have written. Another
        task acquiring through this same object waits for its turn."""
        t = self._timeout if timeout is None else seconds("timeout", timeout)
        try:
            return await self._acquire_async(t, raise_timeout=True)
        except LockTimeout as e:
            self._last_timeout = e
            return False

    async def try_acquire_async(self) -> bool:
        """``try_acquire`` without blocking the event loop."""
        native = self._native  # first: in a child made by fork, it renews the turn
        if not _turn.take(native, current(), 0.0):
            return False
        return await self._acquiring(native.try_acquire_async)

    async def release_async(self) -> ReleaseStatus:
        """``release`` without blocking the event loop."""
        _process.untrack(self)
        try:
            return release_status(await self._native.release_async())
        finally:
            _turn.give(self._native_lock)

    async def _acquire_async(self, t: float | None, raise_timeout: bool) -> bool:
        native = self._native
        if t is not None:
            _blob_lock.check_timeout(t)
        began = time.monotonic()
        if not await _turn.take_async(native, current(), t):
            if raise_timeout:
                raise LockTimeout(
                    f"timed out after {t:.3f}s waiting for lock {self.uri}: another "
                    "task holds it through this BlobLock",
                    self.uri,
                )
            return False
        left = None if t is None else max(0.0, t - (time.monotonic() - began))
        return await self._acquiring(lambda: native.acquire_async(left, raise_timeout))

    async def _acquiring(self, attempt: Callable[[], Awaitable[bool]]) -> bool:
        """Runs ``attempt`` in this task's turn; gives the turn back unless it acquired."""
        import asyncio  # loaded already: an event loop runs this

        try:
            ok = bool(await attempt())
        except asyncio.CancelledError:
            # The native future may have acquired just before it was dropped: release what
            # it holds or wrote, on the native runtime (this event loop may be closing).
            self._native.abandon()
            _turn.give(self._native_lock)
            raise
        except BaseException:
            _turn.give(self._native_lock)
            raise
        return self._after_attempt(ok)

    def _after_attempt(self, ok: bool) -> bool:
        """An attempt's end, sync or async: a lock acquired is tracked for exit and keeps
        its turn; one not acquired gives the turn to the next thread or task."""
        if ok:
            _process.track(self)
        else:
            _turn.give(self._native_lock)
        return ok

    async def __aenter__(self) -> Self:
        await self._acquire_async(self._timeout, raise_timeout=True)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None and self._native.handed_off:
            self._leave_to_remote()
            self._raise_lost(self.lost_reason, exc)
            return
        await self._release_at_end_async()
        self._raise_lost(self.lost_reason, exc)

    def _raise_lost(self, lost: str | None, exc: BaseException | None) -> None:
        if lost is None or not self._raise_on_lost:
            return
        error = self._lost_error(lost)
        if exc is None:
            raise error
        if sys.version_info >= (3, 11):
            exc.add_note(str(error))

    def _lost_error(self, reason: str) -> LockLost:
        return LockLost(f"lock {self.uri} was lost while the block ran: {reason}", self.uri)

    async def hand_off_async(self, grace: Seconds) -> None:
        """``hand_off`` without blocking the event loop."""
        await self._native.hand_off_async(_grace(grace))

    def _leave_to_remote(self) -> None:
        """Stops renewing without releasing (after a hand-off): the remote keeps the lock."""
        _process.untrack(self)
        self._native.let_go()
        _turn.give(self._native_lock)
