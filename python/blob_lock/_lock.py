"""BlobLock and keep_alive: the Python face of the native lock core."""

from __future__ import annotations

import asyncio
import atexit
import enum
import functools
import inspect as _pyinspect
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, Union, cast, overload

from blob_lock import _blob_lock
from blob_lock.exceptions import LockError, LockLost

if TYPE_CHECKING:
    from blob_lock._inspect import Inspection

__all__ = ["BlobLock", "KeepAlive", "ReleaseStatus", "keep_alive", "keep_alive_async", "locked"]

F = TypeVar("F", bound=Callable[..., Any])

_log = logging.getLogger("blob_lock")

Seconds = Union[float, int, timedelta]


@overload
def _seconds(name: str, value: Seconds) -> float: ...
@overload
def _seconds(name: str, value: Seconds | None) -> float | None: ...
def _seconds(name: str, value: Seconds | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds (a number) or a timedelta, got {value!r}")
    return float(value)


def _options(storage_options: Mapping[str, str] | None) -> dict[str, str] | None:
    if storage_options is None:
        return None
    return {str(k): str(v) for k, v in storage_options.items()}


class ReleaseStatus(str, enum.Enum):
    """What ``release()`` found. A str, so ``status == "released"`` works too."""

    RELEASED = "released"
    """We held the lock and released it."""
    NO_LOCKFILE = "no_lockfile"
    """There is no lockfile at the URI."""
    HELD_BY_OTHER = "held_by_other"
    """Another owner holds the lock; nothing was written."""
    ALREADY_RELEASED = "already_released"
    """The lock was already released; nothing was written."""

    def __str__(self) -> str:
        return self.value


# Held locks and running keep-alives. Held strongly: a remote that calls keep_alive(uri,
# owner) and drops the handle must go on renewing, and a held lock stays held until it is
# released. At interpreter exit the locks are released and the keep-alives stopped, so that
# nothing renews into a dying interpreter.
_live: set[BlobLock | KeepAlive] = set()
_live_guard = threading.Lock()


@atexit.register
def _at_exit() -> None:
    # First, so that no awaitable completes into an interpreter that is shutting down.
    _blob_lock.close_async()
    with _live_guard:
        live = list(_live)
    try:
        for item in live:
            try:
                if isinstance(item, BlobLock):
                    item.release()
                else:
                    item.stop()
            except Exception:  # exit must go on; the lock then expires by itself
                pass
    finally:
        # Last: the releases above replaced lockfiles too.
        _blob_lock.sweep()


def _owners_here() -> set[str]:
    """Owner ids this process holds or keeps alive now."""
    with _live_guard:
        live = list(_live)
    return {item.owner for item in live if not item.lost}


# How many forks made this process; each BlobLock notes the value it was made or renewed
# under. Not a registry of every lock: thousands of held locks would each cost one.
_forks = 0
_fork_guard = threading.Lock()


def _after_fork_in_child() -> None:
    """A child made by fork neither holds nor renews its parent's locks, and its exit must
    not release them. Each BlobLock it inherited becomes, when the child first uses it, a
    fresh, unheld lock with an owner id of its own (sharing the parent's id would let both
    believe they hold the lock); each KeepAlive reports itself lost here. The parent's
    native state is leaked in the child, never dropped (see NativeLock's Drop). The
    parent's heartbeats go on."""
    global _live_guard, _fork_guard, _forks
    _live_guard = threading.Lock()  # another thread of the parent may have held it
    _fork_guard = threading.Lock()
    _forks += 1
    for item in list(_live):
        if isinstance(item, KeepAlive):
            item._native.leak_in_child()
            item._forked = True
    _live.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


_CONFIG_NAMES = (
    "expire", "heartbeat", "timeout", "protocol", "storage_options",
    "settle", "clock_skew", "on_lost", "raise_on_lost",
)  # fmt: skip


class BlobLock:
    """A lease lock kept in a blob store at ``<uri>/lock.json``.

    ``with BlobLock(uri) as held:`` waits until the lock is ours (or raises ``LockTimeout``
    after ``timeout`` seconds; ``None`` waits for ever), renews it in the background every
    ``heartbeat`` seconds (default ``expire / 3``), and releases it when the block ends.
    A lock that nobody renews expires ``expire`` seconds after its last write.

    Hand ``held.owner`` to the remote that you launch: its ``keep_alive(uri, owner)`` keeps
    the same lock alive while it runs, even if this process dies.

    ``protocol`` is ``"cas"`` (conditional writes: real mutual exclusion), ``"lww"`` (last
    writer wins after a settle wait: best effort, for stores without conditional writes) or
    ``"auto"`` (``cas``, which every supported store has). ``storage_options`` are
    object_store configuration keys (``aws_endpoint``, ``azure_storage_account_name``, ...),
    on top of what the environment sets. ``clock_skew`` bounds how far machines' wall clocks
    may disagree: a lock last written more than ``expire + clock_skew`` ago is taken at once
    instead of being watched for ``expire`` seconds; ``None`` switches that off.

    A held lock is lost when someone else takes it over, or when no renewal succeeds before
    its deadline (``expire`` less a safety margin, counted from the last renewal): from then
    on ``lost`` is True. ``on_lost`` is called once, on a thread of its own, with the
    ``LockLost`` error that says why; and leaving the ``with`` block raises that error
    (``raise_on_lost=False`` switches this off), so that the code in the block learns that
    its exclusion was broken. If the block raised already, its exception goes on with the
    loss added as a note.

    In a child made by fork (multiprocessing's fork start method) an inherited BlobLock
    holds nothing and has an owner id of its own; the parent keeps holding and renewing.
    """

    # Thousands of held locks in one process: no per-instance __dict__.
    __slots__ = ("__weakref__", "_config", "_forks", "_native_lock", "_raise_on_lost", "_timeout")

    def __init__(
        self,
        uri: str,
        *,
        expire: Seconds = 30.0,
        heartbeat: Seconds | None = None,
        timeout: Seconds | None = None,
        protocol: str = "auto",
        storage_options: Mapping[str, str] | None = None,
        settle: Seconds | None = None,
        clock_skew: Seconds | None = 60.0,
        on_lost: Callable[[LockLost], object] | None = None,
        raise_on_lost: bool = True,
    ) -> None:
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost must be callable, got {on_lost!r}")
        # What a decorated function's calls build their own locks from (a tuple: thousands
        # of held locks each keep one).
        self._config = (
            expire, heartbeat, timeout, protocol, storage_options,
            settle, clock_skew, on_lost, raise_on_lost,
        )  # fmt: skip
        self._raise_on_lost = raise_on_lost
        if not isinstance(uri, str):
            uri = str(uri)  # accept pathlib.Path
        self._timeout = _seconds("timeout", timeout)
        if self._timeout is not None and not self._timeout >= 0:
            raise ValueError(f"timeout must be None or seconds >= 0, got {timeout!r}")
        self._forks = _forks
        self._native_lock = _blob_lock.NativeLock(
            uri,
            expire=_seconds("expire", expire),
            heartbeat=_seconds("heartbeat", heartbeat),
            protocol=protocol,
            storage_options=_options(storage_options),
            settle=_seconds("settle", settle),
            clock_skew=_seconds("clock_skew", clock_skew),
            on_lost=on_lost,
        )

    @property
    def _native(self) -> _blob_lock.NativeLock:
        """The native lock; in a child made by fork, first renewed (see _after_fork_in_child)."""
        if self._forks != _forks:
            with _fork_guard:  # two threads of the child: one renewal
                if self._forks != _forks:
                    self._native_lock = self._native_lock.for_child()
                    self._forks = _forks
        return self._native_lock

    # -- acquisition -------------------------------------------------------------------

    def acquire(self, timeout: Seconds | None = None) -> bool:
        """Waits until the lock is ours; True then, False when ``timeout`` passes.

        ``timeout`` None uses the lock's own ``timeout`` (which None makes for ever).
        """
        t = self._timeout if timeout is None else _seconds("timeout", timeout)
        ok = self._native.acquire(t, False)
        if ok:
            self._track()
        return ok

    def try_acquire(self) -> bool:
        """One attempt that never waits: True if the lock is now ours."""
        ok = self._native.try_acquire()
        if ok:
            self._track()
        return ok

    def release(self) -> ReleaseStatus:
        """Stops the heartbeat and releases the lock; says what it found.

        Refuses (``HELD_BY_OTHER``, nothing written) when another owner holds the lock.
        """
        with _live_guard:
            _live.discard(self)
        return ReleaseStatus(self._native.release())

    async def acquire_async(self, timeout: Seconds | None = None) -> bool:
        """``acquire`` without blocking the event loop. Cancelling it (``asyncio.timeout``,
        ``task.cancel()``) stops the wait and releases whatever it may have written."""
        t = self._timeout if timeout is None else _seconds("timeout", timeout)
        return await self._acquiring(self._native.acquire_async(t, False))

    async def try_acquire_async(self) -> bool:
        """``try_acquire`` without blocking the event loop."""
        return await self._acquiring(self._native.try_acquire_async())

    async def release_async(self) -> ReleaseStatus:
        """``release`` without blocking the event loop."""
        with _live_guard:
            _live.discard(self)
        return ReleaseStatus(await self._native.release_async())

    async def _acquiring(self, attempt: Awaitable[bool]) -> bool:
        try:
            ok = bool(await attempt)
        except asyncio.CancelledError:
            # The native future may have acquired just before it was dropped: release what
            # it holds or wrote, on the native runtime (this event loop may be closing).
            self._native.abandon()
            raise
        if ok:
            self._track()
        return ok

    def _track(self) -> None:
        with _live_guard:
            _live.add(self)

    def __enter__(self) -> BlobLock:
        self._native.acquire(self._timeout, True)
        self._track()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._raise_lost(self._release_noting_loss(raise_lost=self._raise_on_lost), exc)

    async def __aenter__(self) -> BlobLock:
        await self._acquiring(self._native.acquire_async(self._timeout, True))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        lost, holding = self.lost_reason, self.token is not None  # before release forgets
        try:
            status = await self.release_async()
        except LockError as e:
            if lost is not None and self._raise_on_lost:
                raise self._lost_error(lost) from e
            raise
        self._raise_lost(_loss_at_release(lost, holding, status), exc)

    def __call__(self, func: F) -> F:
        """Use as a decorator: each call of ``func`` runs holding the lock (``async with``
        for a coroutine function). Each call takes the lock as a BlobLock of its own (same
        URI and options, its own owner id), so calls from several threads or tasks wait for
        one another, as separate processes do."""
        uri = self.uri
        config: dict[str, Any] = dict(zip(_CONFIG_NAMES, self._config))
        if _pyinspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                async with BlobLock(uri, **config):
                    return await func(*args, **kwargs)

            return cast(F, run_async)

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            with BlobLock(uri, **config):
                return func(*args, **kwargs)

        return cast(F, run)

    def _raise_lost(self, lost: str | None, exc: BaseException | None) -> None:
        if lost is None or not self._raise_on_lost:
            return
        error = self._lost_error(lost)
        if exc is None:
            raise error
        if sys.version_info >= (3, 11):
            exc.add_note(str(error))

    def _release_noting_loss(self, raise_lost: bool) -> str | None:
        """Releases, and says why the lock was lost while held (None if it was not): lost
        before, or found at release taken over between heartbeats, released or deleted by
        someone else. With ``raise_lost``, a release error after a known loss is raised as
        that loss."""
        lost, holding = self.lost_reason, self.token is not None  # before release forgets
        try:
            status = self.release()
        except LockError as e:
            if lost is not None and raise_lost:
                raise self._lost_error(lost) from e
            raise
        return _loss_at_release(lost, holding, status)

    def _lost_error(self, reason: str) -> LockLost:
        return LockLost(f"lock {self.uri} was lost while the block ran: {reason}", self.uri)

    # -- state -------------------------------------------------------------------------

    @property
    def uri(self) -> str:
        """The lock URI; the lockfile is ``<uri>/lock.json``."""
        return self._native.uri

    @property
    def owner(self) -> str:
        """The owner id this lock writes. Hand it to the remote for ``keep_alive``."""
        return self._native.owner

    @property
    def token(self) -> int | None:
        """The fencing token of the current acquisition (grows at each), or None."""
        return self._native.token

    @property
    def held(self) -> bool:
        """True while this lock holds the lease and has not lost it."""
        return self._native.held

    @property
    def lost(self) -> bool:
        """True once the held lease was lost: taken over, or not renewed before its deadline."""
        return self._native.lost

    @property
    def lost_reason(self) -> str | None:
        """Why the lease was lost, if it was."""
        return self._native.lost_reason

    @property
    def state(self) -> str:
        """Where this lock's claim is in its lifecycle: ``unheld`` when it has no lease
        (before acquiring, and after a release), else ``held``, ``renewing``,
        ``renew_retrying`` or ``lost`` (the lifecycle logged under ``blob_lock.claim``)."""
        return self._native.state

    def inspect(self) -> Inspection:
        """Reads this lock's lockfile once (``blob_lock.inspect``); never writes."""
        from blob_lock._inspect import _inspection

        return _inspection(self.uri, self._native.inspect(), self.owner)

    @property
    def protocol(self) -> str:
        """``"cas"`` or ``"lww"``."""
        return self._native.protocol

    @property
    def expire(self) -> float:
        """Seconds after its last write at which an unrenewed lock expires."""
        return self._native.expire

    @property
    def heartbeat(self) -> float:
        """Seconds between renewals."""
        return self._native.heartbeat

    def __repr__(self) -> str:
        state = "lost" if self.lost else ("held" if self.held else "not held")
        token = f" token={self.token}" if self.token is not None else ""
        return (
            f"<BlobLock {self.uri!r} {state} owner={self.owner}{token} "
            f"protocol={self.protocol} expire={self.expire:g}s>"
        )


def _loss_at_release(lost: str | None, holding: bool, status: ReleaseStatus) -> str | None:
    """Why a held lock was lost: ``lost`` if it was known before the release; else, if the
    lock was held up to the release (not released by hand meanwhile) and the release found
    it taken over, released or deleted by someone else, that."""
    if lost is None and holding and status is not ReleaseStatus.RELEASED:
        return f"at release the lock was {status.value}"
    return lost


class KeepAlive:
    """A remote's renewal of its orchestrator's lock; see ``keep_alive``. Never releases."""

    def __init__(self, native: _blob_lock.NativeKeepAlive) -> None:
        self._native = native
        self._forked = False  # True in a child made by fork: the renewal runs in the parent
        with _live_guard:
            _live.add(self)

    def stop(self) -> None:
        """Stops renewing. The lock then expires unless the orchestrator releases it."""
        with _live_guard:
            _live.discard(self)
        if not self._forked:
            self._native.stop()

    @property
    def lost(self) -> bool:
        """True once the lock stopped being this owner's, or was not renewed in time.

        Always True in a child made by fork: the renewal runs in the parent, not here.
        """
        return self._forked or self._native.lost

    @property
    def lost_reason(self) -> str | None:
        """Why it was lost, if it was."""
        if self._forked:
            return "this process is a child made by fork: the renewal runs in the parent"
        return self._native.lost_reason

    @property
    def owner(self) -> str:
        """The owner id being kept alive."""
        return self._native.owner

    @property
    def token(self) -> int:
        """The fencing token of the acquisition being kept alive."""
        return self._native.token

    @property
    def uri(self) -> str:
        """The lock URI."""
        return self._native.uri

    def __enter__(self) -> KeepAlive:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def stop_async(self) -> None:
        """``stop`` without blocking the event loop."""
        with _live_guard:
            _live.discard(self)
        if not self._forked:
            await self._native.stop_async()

    async def __aenter__(self) -> KeepAlive:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop_async()

    def __repr__(self) -> str:
        state = "lost" if self.lost else "alive"
        return f"<KeepAlive {self.uri!r} {state} owner={self.owner} token={self.token}>"


def keep_alive(
    uri: str,
    owner: str,
    *,
    storage_options: Mapping[str, str] | None = None,
    protocol: str = "auto",
    on_lost: Callable[[LockLost], object] | None = None,
) -> KeepAlive:
    """What a remote calls before it runs user code: renews ``owner``'s lock at ``uri``.

    Raises ``LockNotFound`` when there is no lockfile and ``LockStolen`` when it names
    another owner or is released. Otherwise renews it as a co-owner, on the schedule of the
    lockfile's ``expire_s``, until ``stop()`` (or the end of the ``with`` block). Never
    releases: only the orchestrator does. ``on_lost`` is called once, on a thread of its
    own, with the ``LockLost`` error if the lock stops being this owner's.
    """
    if on_lost is not None and not callable(on_lost):
        raise TypeError(f"on_lost must be callable, got {on_lost!r}")
    return KeepAlive(
        _blob_lock.keep_alive(
            str(uri),
            owner,
            storage_options=_options(storage_options),
            protocol=protocol,
            on_lost=on_lost,
        )
    )


async def keep_alive_async(
    uri: str,
    owner: str,
    *,
    storage_options: Mapping[str, str] | None = None,
    protocol: str = "auto",
    on_lost: Callable[[LockLost], object] | None = None,
) -> KeepAlive:
    """``keep_alive`` without blocking the event loop: ``async with await
    keep_alive_async(uri, owner):``."""
    if on_lost is not None and not callable(on_lost):
        raise TypeError(f"on_lost must be callable, got {on_lost!r}")
    native = await _blob_lock.keep_alive_async(
        str(uri),
        owner,
        storage_options=_options(storage_options),
        protocol=protocol,
        on_lost=on_lost,
    )
    return KeepAlive(native)


def locked(
    uri: str,
    *,
    expire: Seconds = 30.0,
    heartbeat: Seconds | None = None,
    timeout: Seconds | None = None,
    protocol: str = "auto",
    storage_options: Mapping[str, str] | None = None,
    settle: Seconds | None = None,
    clock_skew: Seconds | None = 60.0,
    on_lost: Callable[[LockLost], object] | None = None,
    raise_on_lost: bool = True,
) -> BlobLock:
    """A one-line context manager (sync or async): ``with locked(uri, timeout=60) as held:``.
    Takes the keyword arguments of ``BlobLock``."""
    return BlobLock(
        uri,
        expire=expire,
        heartbeat=heartbeat,
        timeout=timeout,
        protocol=protocol,
        storage_options=storage_options,
        settle=settle,
        clock_skew=clock_skew,
        on_lost=on_lost,
        raise_on_lost=raise_on_lost,
    )
