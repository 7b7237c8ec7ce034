"""HeldSlot: one slot of a ``BlobSemaphore``, held as a lock is held. Released, it is taken
again through its semaphore (the stored number, the cooldown, any free slot), never as a
plain lock on the slot it had: that lock would run beside the semaphore's holders, above a
lowered number and ahead of waiters elsewhere."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from blob_lock import _blob_lock, _process, _turn
from blob_lock._decorate import decorate
from blob_lock._lock import BlobLock
from blob_lock._option_types import LockOptions
from blob_lock._turn import current
from blob_lock.exceptions import LockTimeout

if TYPE_CHECKING:
    from collections.abc import Awaitable

__all__ = ["HeldSlot", "Taker"]

F = TypeVar("F", bound=Callable[..., Any])

#: A slot taken by the semaphore: its index and the native lock holding it.
Taken = tuple[int, _blob_lock.NativeLock]


class Taker(Protocol):
    """What a released slot is taken again through: its ``BlobSemaphore`` (which is also
    what ``with``, ``async with`` and a decorated call enter)."""

    @property
    def prefix(self) -> str: ...

    def _take(self, timeout: float | None) -> Taken: ...

    def _try_take(self) -> Taken | None: ...

    def _take_async(self, timeout: float | None) -> Awaitable[Taken]: ...

    def _try_take_async(self) -> Awaitable[Taken | None]: ...


def _left(t: float | None, began: float) -> float | None:
    return None if t is None else max(0.0, t - (time.monotonic() - began))


class HeldSlot(BlobLock):
    """One slot of a ``BlobSemaphore``, held: a ``BlobLock`` on the slot's lock URI
    (``PREFIX/slot-<i>``) with everything a held lock has (``owner``, ``token``, ``lost``,
    ``hand_off``, ``release``). Hand ``uri`` and ``owner`` to the remote you launch: its
    ``keep_alive(uri, owner)`` keeps the slot while it runs.

    Released, it is taken again through its semaphore (``with slot:``, ``acquire``,
    ``try_acquire`` and their asyncio forms): as ``semaphore.acquire()`` would, it waits
    for any free slot below the stored number, after this process's cooldown, with an owner
    id of its own, so ``slot``, ``uri``, ``owner`` and ``token`` then name the slot taken."""

    __slots__ = ("_index", "_semaphore")
    _index: int
    _semaphore: Taker

    @classmethod
    def _taken(cls, taken: Taken, options: LockOptions | None, semaphore: Taker) -> HeldSlot:
        """The slot ``taken`` by an acquisition of ``semaphore``, held."""
        held = cls._holding(taken[1], options)
        held._index, held._semaphore = taken[0], semaphore
        return held

    @property
    def slot(self) -> int:
        """The slot's index, from 0."""
        return self._index

    # -- taken again, through the semaphore ---------------------------------------------

    def _turn_of_current(self, me: object, t: float | None, began: float) -> Any:
        """``me``'s turn on the native lock this slot has now, or None past ``t``. Another
        thread's acquisition may replace the native lock while this one waits for its turn:
        the new one's turn is waited for then."""
        while True:
            native = self._native  # in a child made by fork, first renewed
            if not _turn.take(native, me, _left(t, began)):
                return None
            if self._native_lock is native:
                return native
            _turn.give(native)

    def _hold(self, taken: Taken, me: object, before: _blob_lock.NativeLock) -> None:
        """Becomes the slot ``taken`` (``me``'s turn on it), then gives ``before``'s turn
        back: a thread waiting for that one finds the new one and waits for its turn."""
        index, native = taken
        _turn.take(native, me, 0.0)  # a fresh native lock: its turn is free
        self._wrap(native, self._options)
        self._index = index
        _process.track(self)
        _turn.give(before)

    def _busy(self, t: float | None, what: str) -> LockTimeout:
        return LockTimeout(
            f"timed out after {t:.3f}s waiting for slot {self.uri}: another {what} takes or "
            "holds it through this HeldSlot",
            self.uri,
        )

    def _acquire(self, t: float | None, raise_timeout: bool) -> bool:
        me, began = threading.current_thread(), time.monotonic()
        if t is not None:
            _blob_lock.check_timeout(t)
        before = self._turn_of_current(me, t, began)
        if before is None:
            if raise_timeout:
                raise self._busy(t, "thread")
            return False
        try:
            taken = self._semaphore._take(_left(t, began))
        except LockTimeout:
            _turn.give(before)
            if raise_timeout:
                raise
            return False
        except BaseException:
            _turn.give(before)
            raise
        self._hold(taken, me, before)
        return True

    def try_acquire(self) -> bool:
        """One attempt at every slot of the semaphore, never waiting: True if one is now
        held. False as well while another thread takes or holds this slot object."""
        me = threading.current_thread()
        before = self._turn_of_current(me, 0.0, time.monotonic())
        if before is None:
            return False
        try:
            taken = self._semaphore._try_take()
        except BaseException:
            _turn.give(before)
            raise
        return self._held_if(taken, me, before)

    async def _turn_of_current_async(self, me: object, t: float | None, began: float) -> Any:
        while True:
            native = self._native
            if not await _turn.take_async(native, me, _left(t, began)):
                return None
            if self._native_lock is native:
                return native
            _turn.give(native)

    async def _acquire_async(self, t: float | None, raise_timeout: bool) -> bool:
        me, began = current(), time.monotonic()
        if t is not None:
            _blob_lock.check_timeout(t)
        before = await self._turn_of_current_async(me, t, began)
        if before is None:
            if raise_timeout:
                raise self._busy(t, "task")
            return False
        try:
            return await self._taking(self._semaphore._take_async(_left(t, began)), me, before)
        except LockTimeout:
            if raise_timeout:
                raise
            return False

    async def try_acquire_async(self) -> bool:
        """``try_acquire`` without blocking the event loop."""
        me = current()
        before = await self._turn_of_current_async(me, 0.0, time.monotonic())
        if before is None:
            return False
        return await self._taking(self._semaphore._try_take_async(), me, before)

    async def _taking(
        self, taking: Awaitable[Taken | None], me: object, before: _blob_lock.NativeLock
    ) -> bool:
        """Awaits a take of the semaphore's in ``me``'s turn on ``before`` (cancelled, the
        semaphore's acquisition releases whatever it may have written)."""
        try:
            taken = await taking
        except BaseException:
            _turn.give(before)
            raise
        return self._held_if(taken, me, before)

    def _held_if(self, taken: Taken | None, me: object, before: _blob_lock.NativeLock) -> bool:
        """Holds what was ``taken`` in ``me``'s turn on ``before``; nothing taken, the turn is
        given back."""
        if taken is None:
            _turn.give(before)
            return False
        self._hold(taken, me, before)
        return True

    def __enter__(self) -> HeldSlot:
        # `with semaphore.acquire() as slot:` holds already: the block releases it at its end.
        if not self.held:
            self._acquire(self._timeout, raise_timeout=True)
        return self

    async def __aenter__(self) -> HeldSlot:
        if not self.held:
            await self._acquire_async(self._timeout, raise_timeout=True)
        return self

    def __call__(self, func: F) -> F:
        """Use as a decorator: each call of ``func`` runs holding a slot of the semaphore,
        taken as ``with semaphore:`` takes one."""
        semaphore = self._semaphore
        return decorate(func, lambda: semaphore)

    def __reduce__(self) -> tuple[Any, ...]:
        """Refused: unpickled elsewhere, a slot would be a plain lock on ``PREFIX/slot-<i>``,
        outside its semaphore."""
        raise TypeError(
            f"cannot pickle {self!r}: a slot is taken through its semaphore. Pass the "
            f"semaphore's prefix ({self._semaphore.prefix!r}) and number of slots and make a "
            "BlobSemaphore there; to keep a held slot alive from another process, pass "
            "slot.uri and slot.owner there and call keep_alive(uri, owner)"
        )
