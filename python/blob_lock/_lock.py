"""BlobLock: the Python face of the native lock core (its blocking half, over the
asynchronous one in ``_lock_async.py``), and ``locked``."""

from __future__ import annotations

import inspect as _pyinspect
import os
import threading
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from blob_lock import _blob_lock, _process, _turn
from blob_lock._args import Seconds, lock_uri, seconds
from blob_lock._decorate import decorate
from blob_lock._lock_async import AsyncLock, _grace
from blob_lock._option_types import LockOptions
from blob_lock._options import signature
from blob_lock._release_status import ReleaseStatus, release_status
from blob_lock._templates import native_lock
from blob_lock._turn import current
from blob_lock.exceptions import LockTimeout

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

__all__ = ["BlobLock", "locked"]

F = TypeVar("F", bound=Callable[..., Any])


class BlobLock(AsyncLock):
    """A lease lock kept in a blob store at ``<uri>/lock.json``.

    ``with BlobLock(uri) as held:`` waits until the lock is ours (or raises ``LockTimeout``
    after ``timeout`` seconds; ``None`` waits for ever), renews it in the background every
    ``heartbeat`` seconds (default ``expire / 3``), and releases it when the block ends:
    best effort, since the work is done (a store that does not answer within two request
    timeouts fails nothing; one WARNING says when the lock frees itself). A lock that
    nobody renews expires ``expire`` seconds after its last write.

    Hand ``held.owner`` to the remote that you launch: its ``keep_alive(uri, owner)`` keeps
    the same lock alive while it runs, even if this process dies.

    ``protocol`` is ``"cas"`` (conditional writes: real mutual exclusion), ``"lww"`` (last
    writer wins after a settle wait: best effort, for stores without conditional writes) or
    ``"auto"``: ``cas`` where the store honours conditional writes, ``lww`` (with one
    warning per store) where it does not. Each process checks a store once, before its
    first ``cas`` write to it; ``cas`` on a store that fails the check raises
    ``UnsafeStore``. ``storage_options`` are object_store configuration keys
    (``aws_endpoint``, ``azure_storage_account_name``, ...), on top of what the
    environment sets, and ``blob_lock_conditional_writes="trust"``, which skips the check.
    Credentials come from ``credential_provider`` when given (a callable returning them, a
    boto3 session, an azure-identity credential, google-auth credentials), else from
    ``set_credentials``, else from the cloud's own chain: AWS profiles and SSO (with
    ``blob-lock[aws]``; ``storage_options={"aws_profile": ...}`` names one), ``az login``,
    gcloud (docs/credentials.md).
    ``clock_skew`` bounds how far machines' wall clocks may disagree: a lock last written
    more than ``expire + clock_skew`` ago is taken at once instead of being watched for
    ``expire`` seconds; ``None`` switches that off.

    A held lock is lost when someone else takes it over, or when no renewal succeeds before
    its deadline (``expire`` less a safety margin, counted from the last renewal): from then
    on ``lost`` is True. ``on_lost`` is called once, on one of blob-lock's callback threads
    (at most four, in order), with the ``LockLost`` error that says why; and leaving the
    ``with`` block raises that error (``raise_on_lost=False`` switches this off), so that the
    code in the block learns that its exclusion was broken. If the block raised already, its
    exception goes on with the loss added as a note.

    ``labels`` (a mapping of strings) say who holds the lock and why (``{"run": run_id,
    "url": ...}``): every acquisition writes them into the lockfile, renewals and the
    release keep them, and ``inspect``, ``blob-lock status``, ``ls`` and the waiting line
    show them. At most 32, keys of 1 to 63 ASCII letters, digits, ``_-.`` (starting with a
    letter or digit), values of at most 1,024 characters without control characters, 4 KiB
    in all.

    One BlobLock may be shared by threads as a ``threading.Lock`` is: while one thread
    holds it, another's ``acquire`` waits (within its timeout) for the release; the thread
    that holds it may not acquire it again.

    In a child made by fork (multiprocessing's fork start method) an inherited BlobLock
    holds nothing and has an owner id of its own; the parent keeps holding and renewing.
    """

    # Thousands of held locks in one process: no per-instance __dict__.
    __slots__ = (
        "__weakref__", "_forks", "_native_lock", "_options", "_raise_on_lost", "_timeout",
    )  # fmt: skip

    def __init__(self, uri: str | os.PathLike[str], **options: Unpack[LockOptions]) -> None:
        if type(uri) is not str:
            uri = lock_uri(uri)
        self._wrap(*native_lock(uri, options))  # checks every option

    def _wrap(self, native: _blob_lock.NativeLock, options: Mapping[str, Any] | None) -> None:
        """Every field, around ``native``. ``options`` as given: what a decorated function's
        calls, and an unpickled copy, are made from (None for none, shared when plain:
        thousands of locks are held)."""
        self._forks = _process.forks
        self._native_lock = native
        self._options = options
        self._timeout = native.timeout
        self._raise_on_lost = native.raise_on_lost

    @classmethod
    def _holding(cls, native: _blob_lock.NativeLock, options: Mapping[str, Any] | None) -> Self:
        """A lock around ``native``, which holds already (a semaphore's slot): held as an
        acquisition leaves it, its turn the current thread's or task's until released."""
        lock = cls.__new__(cls)
        lock._wrap(native, options)
        _turn.take(native, current(), 0.0)  # a fresh native lock: its turn is free
        _process.track(lock)
        return lock

    @property
    def _native(self) -> _blob_lock.NativeLock:
        """The native lock; in a child made by fork, first renewed (see _after_fork_in_child)."""
        if self._forks != _process.forks:
            with _process.fork_guard:  # two threads of the child: one renewal
                if self._forks != _process.forks:
                    # With a turn of its own, free: a parent thread may have held the old.
                    self._native_lock = self._native_lock.for_child()
                    self._forks = _process.forks
        return self._native_lock

    # -- acquisition -------------------------------------------------------------------

    def acquire(self, timeout: Seconds | None = None) -> bool:
        """Waits until the lock is ours; True then, False when ``timeout`` passes.

        ``timeout`` None uses the lock's own ``timeout`` (which None makes for ever). While
        another thread holds the lock through this same object, waits for it to release
        first; the thread that holds it gets an error (locks are not reentrant).
        """
        t = self._timeout if timeout is None else seconds("timeout", timeout)
        try:
            return self._acquire(t, raise_timeout=True)
        except LockTimeout as e:
            self._last_timeout = e
            return False

    @property
    def last_timeout(self) -> LockTimeout | None:
        """Why the last ``acquire`` (or ``acquire_async``) that returned False did: the
        ``LockTimeout`` it would have raised, which names the holder, or says that the store
        was saturated (``last_timeout.saturated``). None until one returns False."""
        return getattr(self, "_last_timeout", None)

    def _acquire(self, t: float | None, raise_timeout: bool) -> bool:
        native, began = self._native, 0.0
        if t is not None:
            _blob_lock.check_timeout(t)
            began = time.monotonic()
        if not _turn.take(native, threading.current_thread(), t):
            if raise_timeout:
                raise LockTimeout(
                    f"timed out after {t:.3f}s waiting for lock {self.uri}: another thread "
                    "holds it through this BlobLock",
                    self.uri,
                )
            return False
        left = None if t is None else max(0.0, t - (time.monotonic() - began))
        return self._attempting(lambda: native.acquire(left, raise_timeout))

    def try_acquire(self) -> bool:
        """One attempt that never waits: True if the lock is now ours. False as well while
        another thread holds it through this same object."""
        native = self._native  # first: in a child made by fork, it renews the turn
        if not _turn.take(native, threading.current_thread(), 0.0):
            return False
        return self._attempting(native.try_acquire)

    def _attempting(self, attempt: Callable[[], bool]) -> bool:
        """Runs ``attempt`` in this thread's turn; gives the turn back unless it acquired."""
        try:
            ok = attempt()
        except BaseException:
            _turn.give(self._native_lock)
            raise
        return self._after_attempt(ok)

    def release(self) -> ReleaseStatus:
        """Stops the heartbeat and releases the lock; says what it found.

        Refuses (``HELD_BY_OTHER``, nothing written) when a later acquisition holds the lock
        or held it after ours (the lock was taken: ``lost`` turns True);
        ``ALREADY_RELEASED`` when our acquisition was released by someone else (a break).
        A store that fails is retried for the rest of the lease (at least a heartbeat);
        then ``StoreError``, saying when the lock frees itself (it expires, unrenewed).
        Leaving a ``with`` block releases best effort instead: it never raises the store's
        error and waits a few seconds at most (docs/usage.md, "When the block ends").
        """
        return release_status(self._release())

    def _release(self) -> str:
        """``release()``'s work, returning the native word."""
        _process.untrack(self)
        try:
            return self._native.release()
        finally:
            _turn.give(self._native_lock)

    def _release_at_end(
        self, patience: float | None = None, warn: bool = True
    ) -> tuple[str | None, str | None]:
        """The release at the end of a block whose work is done (``__exit__``, the
        adapters): best effort. Waits at most ``patience`` seconds (None: two request
        timeouts, 10 s at the default ``expire``; 0: not at all); a release not answered by
        then goes on in the background, and the lock frees itself at its expiry meanwhile.
        The native word, or None and what happened (logged at WARNING when ``warn``).
        Never raises a store error: the work is done, and the lock's loss, if any, is in
        ``lost_reason``."""
        _process.untrack(self)
        try:
            return self._native.release_at_end(patience, warn)
        finally:
            _turn.give(self._native_lock)

    def _abandon(self) -> None:
        """Releases what this lock holds in the background, on blob-lock's own runtime,
        without waiting (for a task being cancelled, whose event loop may be closing)."""
        _process.untrack(self)
        self._native.abandon()
        _turn.give(self._native_lock)

    def _end_at_exit(self) -> _blob_lock.NativeLock | None:
        if self._native.handed_off:
            self._leave_to_remote()  # the remote may still be starting: not released
            return None
        _process.untrack(self)
        return self._native  # released by the exit, with the other locks held

    def _in_fork_child(self) -> None:
        pass  # renewed, unheld, on the child's first use (see _native)

    def __enter__(self) -> BlobLock:
        native = self._native_lock
        # The common case in this one frame (a fresh BlobLock per `with` pays each call):
        # not a lock inherited by a fork child, and its turn free (taking it raises if this
        # thread holds it). Else `_acquire`, which waits for the turn.
        if self._forks == _process.forks and native.take_turn(threading.current_thread()):
            try:
                native.acquire(self._timeout, True)
            except BaseException:
                _turn.give(native)
                raise
            _process.track(self)
            return self
        self._acquire(self._timeout, raise_timeout=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        native = self._native_lock
        # The common case in this one frame: the block ended without an exception, in the
        # process that acquired, and the lock was not lost while it ran.
        if exc is None and self._forks == _process.forks and native.lost_reason is None:
            _process.untrack(self)
            try:
                native.release_at_end(None, True)
            finally:
                _turn.give(native)
            lost = native.lost_reason  # found at release taken over, released or deleted
            if lost is not None:
                self._raise_lost(lost, None)
            return
        native = self._native
        if exc is not None and native.handed_off:
            self._leave_to_remote()
            self._raise_lost(native.lost_reason, exc)
            return
        # Best effort: a store that does not answer the release replaces no exception of
        # the block's and fails no finished work (one WARNING says when the lock frees).
        self._release_at_end()
        # Lost while held, or found at release taken over, released or deleted by another.
        lost = native.lost_reason
        if lost is not None:
            self._raise_lost(lost, exc)

    def __call__(self, func: F) -> F:
        """Use as a decorator: each call of ``func`` runs holding the lock (``async with``
        for a coroutine function). Each call takes the lock as a BlobLock of its own (same
        URI and options, its own owner id), so calls from several threads or tasks wait for
        one another, as separate processes do."""
        uri, options = self.uri, self._options or {}
        return decorate(func, lambda: BlobLock(uri, **options))

    # -- hand-off to a remote ----------------------------------------------------------

    def hand_off(self, grace: Seconds) -> None:
        """Hands the held lock to the remote just launched, which may take up to ``grace``
        seconds to start (a queue, an image pull): renews the lock now with a launch grace.
        Should this process die before the remote's first ``keep_alive`` write, waiters wait
        ``grace`` instead of ``expire`` before taking over, so a restarted orchestrator waits
        for the remote instead of launching a duplicate. The remote's first write ends the
        grace; the heartbeat goes on as before. After a hand-off, leaving the ``with`` block
        with an exception (or exiting the interpreter) stops renewing without releasing: the
        lock is left to the remote.

        Raises ``LockError`` when nothing is held, ``LockLost`` when the lock was lost, and
        ValueError for a ``grace`` that is not positive or is longer than 7 days (the
        longest lifetime every reader accepts). mops processes that read the lockfile judge
        expiry by their own setting and ignore the grace.
        """
        self._native.hand_off(_grace(grace))

    def __reduce__(self) -> tuple[Any, ...]:
        """An unheld lock pickles as its URI and options: a process made by spawn or
        forkserver gets a lock of its own, with an owner id of its own. A held one refuses:
        its lease belongs to this process."""
        if self._native.state != "unheld":
            raise TypeError(
                f"cannot pickle {self!r}: it is held, and its lease belongs to this process. "
                "To keep a held lock alive from another process, pass lock.uri and lock.owner "
                "there and call keep_alive(uri, owner)"
            )
        return (_unpickled, (self.uri, self._options or {}))


def _unpickled(uri: str, options: dict[str, Any]) -> BlobLock:
    return BlobLock(uri, **options)


def locked(uri: str | os.PathLike[str], **options: Unpack[LockOptions]) -> BlobLock:
    """A one-line context manager (sync or async): ``with locked(uri, timeout=60) as held:``.
    Takes the keyword arguments of ``BlobLock``."""
    return BlobLock(uri, **options)


_POSITIONAL = _pyinspect.Parameter.POSITIONAL_OR_KEYWORD
_URI = _pyinspect.Parameter("uri", _POSITIONAL, annotation="str | os.PathLike[str]")
_SELF = _pyinspect.Parameter("self", _POSITIONAL)
BlobLock.__init__.__signature__ = signature([_SELF, _URI])  # type: ignore[attr-defined]
locked.__signature__ = signature([_URI])  # type: ignore[attr-defined]
