"""BlobSemaphore: at most N holders at once, for launch quotas across orchestrators."""

from __future__ import annotations

import difflib
import inspect
import os
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from blob_lock import _process
from blob_lock._args import Seconds, lock_uri, seconds
from blob_lock._blob_lock import NativeSemaphore, NativeSemaphoreConfig
from blob_lock._held_slot import HeldSlot, Taken
from blob_lock._option_types import LockOptions
from blob_lock._options import LOCK_OPTIONS, signature
from blob_lock._turn import current

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["BlobSemaphore", "SemaphoreConfig"]


@dataclass(frozen=True)
class SemaphoreConfig:
    """A semaphore's configuration as stored beside its slots (``PREFIX/semaphore.json``)."""

    slots: int
    """How many slots may be held at once."""
    set_by: str
    """Who wrote it: ``user@host (pid N)``."""
    set_at: str
    """When, by the writer's clock (RFC 3339)."""

    @classmethod
    def _of(cls, native: NativeSemaphoreConfig) -> SemaphoreConfig:
        return cls(slots=native.slots, set_by=native.set_by, set_at=native.set_at)


def _whole(slots: object) -> None:
    if isinstance(slots, bool) or not isinstance(slots, int):
        raise TypeError(f"slots must be a whole number, got {slots!r}")
    if slots < 0:  # would not convert; 0 and the upper bound are the native side's to refuse
        raise ValueError(f"slots must be at least 1, got {slots}")


#: The keywords ``BlobSemaphore`` takes: its own, then a lock's options.
_KEYWORDS = ("prefix", "slots", *(o.name for o in LOCK_OPTIONS))


def _check_keywords(given: dict[str, Any]) -> None:
    """An unknown keyword named, with the nearest known one, as ``BlobLock`` names its own:
    before Python's "missing 'slots'", which ``slot=3`` would otherwise get."""
    for name in given:
        if name in _KEYWORDS:
            continue
        near = difflib.get_close_matches(name, _KEYWORDS, n=1, cutoff=0.6)
        meant = f' did you mean "{near[0]}"?' if near else ""
        raise TypeError(
            f'BlobSemaphore() got an unknown option "{name}":{meant} it takes prefix and '
            f"slots, and the options {', '.join(_KEYWORDS[2:])}"
        )


class BlobSemaphore:
    """At most ``slots`` holders at once among every process on ``prefix``.

    ``with BlobSemaphore("s3://bucket/quotas/gpu", slots=64) as slot:`` waits until one of
    the slots ``PREFIX/slot-0`` .. ``PREFIX/slot-<N-1>`` is ours (or raises ``LockTimeout``
    after ``timeout`` seconds), keeps it as a lock is kept, and releases it when the block
    ends. Each slot is a lock with everything a lock has: expiry, heartbeat, a fencing
    token per slot, ``keep_alive`` by a remote, ``hand_off``. A process that dies frees its
    slot when its lease expires.

    The number of slots is stored beside them (``PREFIX/semaphore.json``), so that every
    orchestrator agrees on it: the first caller writes the number it asks for; a caller
    asking for another number uses the stored one and logs a warning naming both.
    ``set_slots`` changes it: raised, new acquisitions take the new slots at once; lowered,
    no holder is evicted, and the slots past the number drain as their holders release.

    The options are a ``BlobLock``'s (``expire``, ``heartbeat``, ``timeout``,
    ``storage_options``, ``credential_provider``, ``labels``, ``on_lost``, ...), applied to
    every slot. One ``BlobSemaphore`` may be shared by threads and tasks: each acquisition
    takes a slot of its own, with an owner id of its own.
    """

    __slots__ = ("__weakref__", "_entered", "_forks", "_native_semaphore", "_options", "_slots")
    #: What help() and inspect.signature show (set below the class).
    __signature__: ClassVar[inspect.Signature]

    def __new__(cls, *args: Any, **kwargs: Any) -> BlobSemaphore:
        # Keywords are checked here, before Python binds them to ``__init__``'s parameters.
        _check_keywords(kwargs)
        return super().__new__(cls)

    def __init__(
        self, prefix: str | os.PathLike[str], slots: int, **options: Unpack[LockOptions]
    ) -> None:
        if type(prefix) is not str:
            prefix = lock_uri(prefix)
        _whole(slots)
        self._native_semaphore = NativeSemaphore(prefix, slots, options or None)
        self._options: LockOptions | None = options or None
        self._slots = slots
        self._forks = _process.forks
        # The slots entered by `with`, per thread or task, released by its `__exit__`.
        self._entered: dict[object, list[HeldSlot]] = {}

    @property
    def _native(self) -> NativeSemaphore:
        """The native semaphore; in a child made by fork, made again (its store clients are
        the parent's)."""
        if self._forks != _process.forks:
            native = self._native_semaphore
            self._native_semaphore = NativeSemaphore(native.prefix, self._slots, self._options)
            self._entered = {}
            self._forks = _process.forks
        return self._native_semaphore

    @property
    def prefix(self) -> str:
        """The prefix the slots are under."""
        return self._native_semaphore.prefix

    def acquire(self, timeout: Seconds | None = None) -> HeldSlot:
        """Waits until a slot is ours and returns it held; ``LockTimeout`` when ``timeout``
        passes (None: the semaphore's own ``timeout``, which None makes for ever)."""
        return self._acquire_as(None, timeout)

    def _acquire_as(self, owner: str | None, timeout: Seconds | None) -> HeldSlot:
        """``acquire``, writing ``owner`` (None: an owner id of its own): claim_memo's quota
        slot is held with the memo lock's owner id, so one ``keep_alive`` owner keeps both."""
        native = self._native
        t = native.timeout if timeout is None else seconds("timeout", timeout)
        return HeldSlot._taken(native.acquire(t, owner), self._options, self)

    def try_acquire(self) -> HeldSlot | None:
        """One attempt at every slot, never waiting: a slot held, or None when all are."""
        taken = self._try_take()
        return None if taken is None else HeldSlot._taken(taken, self._options, self)

    # What a released HeldSlot of this semaphore is taken again through (``_held_slot.py``):
    # the slot taken, as the native semaphore gives it, with a new owner id.

    def _take(self, timeout: float | None) -> Taken:
        return self._native.acquire(timeout)

    def _try_take(self) -> Taken | None:
        return self._native.try_acquire()

    async def _take_async(self, timeout: float | None) -> Taken:
        return await self._native.acquire_async(timeout)

    async def _try_take_async(self) -> Taken | None:
        return await self._native.try_acquire_async()

    async def acquire_async(self, timeout: Seconds | None = None) -> HeldSlot:
        """``acquire`` without blocking the event loop. Cancelling it releases whatever it
        may have written."""
        return await self._acquire_as_async(None, timeout)

    async def _acquire_as_async(self, owner: str | None, timeout: Seconds | None) -> HeldSlot:
        native = self._native
        t = native.timeout if timeout is None else seconds("timeout", timeout)
        return HeldSlot._taken(await native.acquire_async(t, owner), self._options, self)

    def configuration(self) -> SemaphoreConfig:
        """The number of slots as stored (written with the number asked for if there is
        none yet), with who stored it and when. One read."""
        return SemaphoreConfig._of(self._native.configuration())

    def stored(self) -> SemaphoreConfig | None:
        """The configuration as stored, or None where no semaphore was used yet. One read;
        writes nothing."""
        stored = self._native.stored()
        return None if stored is None else SemaphoreConfig._of(stored)

    def set_slots(self, slots: int) -> SemaphoreConfig:
        """Stores ``slots`` as the number of slots, for every process on the prefix."""
        _whole(slots)
        return SemaphoreConfig._of(self._native.set_slots(slots))

    def __enter__(self) -> HeldSlot:
        held = self.acquire()
        self._entered.setdefault(current(), []).append(held)
        return held

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leave().__exit__(exc_type, exc, tb)

    async def __aenter__(self) -> HeldSlot:
        held = await self.acquire_async()
        self._entered.setdefault(current(), []).append(held)
        return held

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._leave().__aexit__(exc_type, exc, tb)

    def _leave(self) -> HeldSlot:
        me = current()
        held = self._entered[me]
        slot = held.pop()
        if not held:
            del self._entered[me]
        return slot

    def __repr__(self) -> str:
        return f"BlobSemaphore({self.prefix!r}, slots={self._slots})"


# What help() and inspect.signature show (``__new__`` takes anything, to check keywords
# first): the prefix, the number and every option with its default.
BlobSemaphore.__signature__ = signature(
    [
        inspect.Parameter(
            "prefix", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str | os.PathLike[str]"
        ),
        inspect.Parameter("slots", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="int"),
    ]
)
