"""``claim_memo``: launch a memoized invocation once, and pick up its result, whoever
launched it. The loop every orchestrator used to write by hand around a ``BlobLock``."""

from __future__ import annotations

import inspect as _pyinspect
import os
import time
from collections.abc import Awaitable, Callable, Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn, Union

from blob_lock._args import Seconds, lock_uri, seconds
from blob_lock._inspect import inspect_async
from blob_lock._lock import BlobLock
from blob_lock._options import LockOptions, signature
from blob_lock.exceptions import LockError, LockLost, LockTimeout

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["MemoClaim", "claim_memo", "claim_memo_async"]

Done = Callable[[], Union[bool, Awaitable[bool]]]


def _memo_uri(uri: object) -> str:
    memo = lock_uri(uri).rstrip("/")
    if not memo.strip():  # "   /lock" would be a folder named "   " here
        raise ValueError(f"memo_uri names no memo: {uri!r}")
    return memo


def _poll(poll: Seconds | None, expire: float) -> float:
    if poll is None:
        # As often as a waiter polls the lock at most: a tenth of the expiry, 50 ms to 3 s.
        return min(max(expire / 10, 0.05), 3.0)
    p = seconds("poll", poll)
    if not p > 0:
        raise ValueError(f"poll must be positive seconds, got {poll!r}")
    return p


class MemoClaim:
    """What ``claim_memo`` found. ``launch`` is True when this caller holds the memo's lock
    and the result did not exist after it acquired: it must launch the invocation (hand
    ``owner`` to the remote, whose ``keep_alive`` keeps the lock alive). False when the
    result exists; then nothing is held and ``owner`` and ``token`` are None."""

    __slots__ = ("_done", "_launch", "_lock", "_lock_uri", "_poll")

    def __init__(self, lock_uri: str, lock: BlobLock | None, done: Done, poll: float) -> None:
        self._lock_uri, self._launch = lock_uri, lock is not None
        self._lock, self._done, self._poll = lock, done, poll

    @property
    def launch(self) -> bool:
        """True when this caller holds the lock and the result did not exist: launch."""
        return self._launch

    @property
    def lock_uri(self) -> str:
        """The memo's lock URI, ``<memo_uri>/lock``."""
        return self._lock_uri

    @property
    def owner(self) -> str | None:
        """The owner id to hand to the remote; None when nothing is held."""
        return self._lock.owner if self._lock is not None else None

    @property
    def token(self) -> int | None:
        """The fencing token of the held lock; None when nothing is held."""
        return self._lock.token if self._lock is not None else None

    @property
    def lost(self) -> bool:
        """True once the held lock was lost (taken over, or not renewed in time)."""
        return self._lock is not None and self._lock.lost

    @property
    def lock(self) -> BlobLock | None:
        """The held lock, when ``launch`` is True."""
        return self._lock

    def hand_off(self, grace: Seconds) -> None:
        """Call right after launching the remote, with the longest it may take to start
        (queue, image pull): ``BlobLock.hand_off`` on the held lock. Until the remote's first
        ``keep_alive`` write, or ``grace`` from now, a claim that finds this orchestrator gone
        waits ``grace`` instead of ``expire`` before taking over: a restarted orchestrator
        waits for the remote instead of launching again. After it, leaving the block with an
        exception leaves the lock to the remote instead of releasing it. Raises
        ``LockError`` when the claim holds nothing (``launch`` is False)."""
        self._held("hand_off").hand_off(grace)

    async def hand_off_async(self, grace: Seconds) -> None:
        """``hand_off`` without blocking the event loop."""
        await self._held("hand_off").hand_off_async(grace)

    def _held(self, what: str) -> BlobLock:
        if self._lock is None:
            raise LockError(
                f"{what} needs a claim that launches, and this one holds nothing: "
                "(launch is False: the result exists)",
                self.lock_uri,
            )
        return self._lock

    def wait_done(self, poll: Seconds | None = None, timeout: Seconds | None = None) -> bool:
        """Polls ``done`` every ``poll`` seconds (default: the claim's) while the lock is
        renewed in the background: True once the result exists, False when ``timeout``
        passes first. Raises ``LockLost`` if the held lock is lost meanwhile: another
        orchestrator may launch the invocation again."""
        every = self._poll if poll is None else _poll(poll, 1.0)
        limit = seconds("timeout", timeout)
        began = time.monotonic()
        while True:
            if _sync_done(self._done):
                return True
            self._raise_if_lost()
            left = None if limit is None else limit - (time.monotonic() - began)
            if left is not None and left <= 0:
                return False
            time.sleep(every if left is None else min(every, left))

    async def wait_done_async(
        self, poll: Seconds | None = None, timeout: Seconds | None = None
    ) -> bool:
        """``wait_done`` without blocking the event loop (``done`` may be async)."""
        import asyncio  # loaded already: an event loop runs this

        every = self._poll if poll is None else _poll(poll, 1.0)
        limit = seconds("timeout", timeout)
        began = time.monotonic()
        while True:
            if await _async_done(self._done):
                return True
            self._raise_if_lost()
            left = None if limit is None else limit - (time.monotonic() - began)
            if left is not None and left <= 0:
                return False
            await asyncio.sleep(every if left is None else min(every, left))

    def _raise_if_lost(self) -> None:
        if self._lock is not None and self._lock.lost:
            raise LockLost(
                f"lock {self.lock_uri} was lost while waiting for the result: "
                f"{self._lock.lost_reason}",
                self.lock_uri,
            )

    def __repr__(self) -> str:
        held = f" owner={self.owner} token={self.token}" if self.launch else ""
        return f"<MemoClaim {self.lock_uri!r} launch={self.launch}{held}>"


def _sync_done(done: Done) -> bool:
    result = done()
    if _pyinspect.isawaitable(result):
        if _pyinspect.iscoroutine(result):
            result.close()  # never awaited: no "coroutine was never awaited" warning
        raise TypeError("done returned an awaitable: use claim_memo_async for an async done")
    return bool(result)


async def _async_done(done: Done) -> bool:
    result = done()
    if _pyinspect.isawaitable(result):
        result = await result
    return bool(result)


class _Claiming:
    """The arguments of one claim, checked; shared by the sync and async context managers."""

    def __init__(
        self,
        memo_uri: str | os.PathLike[str],
        done: Done,
        poll: Seconds | None,
        options: LockOptions,
    ) -> None:
        if not callable(done):
            raise TypeError(
                f"done must be a callable returning whether the result exists, got {done!r}"
            )
        self.lock_uri = f"{_memo_uri(memo_uri)}/lock"
        self.done = done
        # Built now, so that bad lock options fail before anything is read.
        self.lock = BlobLock(self.lock_uri, **options)
        self.timeout = self.lock._timeout
        self.poll = _poll(poll, self.lock.expire)
        self.options = options
        self.claim: MemoClaim | None = None

    def deadline(self) -> float | None:
        return None if self.timeout is None else time.monotonic() + self.timeout

    def slice(self, deadline: float | None) -> float:
        return (
            self.poll if deadline is None else max(0.0, min(self.poll, deadline - time.monotonic()))
        )

    def timed_out(self, seen: str) -> LockTimeout:
        return LockTimeout(
            f"timed out after {self.timeout:.3f}s waiting for the memo's lock, and the result "
            f"does not exist yet: {seen}",
            self.lock_uri,
        )

    def holder(self) -> str:
        try:
            return self.lock.inspect().describe()
        except Exception as e:  # the timeout is the news; a failed look only adds to it
            return f"{self.lock_uri} (cannot read who holds it: {e})"

    async def holder_async(self) -> str:
        try:
            return (
                await inspect_async(
                    self.lock_uri,
                    storage_options=self.options.get("storage_options"),
                    credential_provider=self.options.get("credential_provider"),
                )
            ).describe()
        except Exception as e:
            return f"{self.lock_uri} (cannot read who holds it: {e})"

    def won(self) -> MemoClaim:
        self.claim = MemoClaim(self.lock_uri, self.lock, self.done, self.poll)
        return self.claim

    def nothing(self) -> MemoClaim:
        self.claim = MemoClaim(self.lock_uri, None, self.done, self.poll)
        return self.claim


class claim_memo:  # lower case: used as a function, as contextlib's managers are
    """``with claim_memo(memo_uri, done=result_exists) as claim:`` launches a memoized
    invocation exactly once, whatever crashes.

    The lock is ``<memo_uri>/lock`` (mops's layout). ``done`` is a callable that says whether
    the result exists. When it does, ``claim.launch`` is False and nothing is written. While
    someone else holds the lock (an orchestrator, or a remote keeping it alive for an
    orchestrator that died), the claim waits, checking ``done`` every ``poll`` seconds, and
    never launches; a lock nobody renews is taken over after ``expire``. Once this caller
    holds the lock and ``done`` is still false, ``claim.launch`` is True: launch the remote
    with ``claim.owner``, call ``claim.hand_off(grace)`` with the longest the remote may take
    to start, then ``claim.wait_done()`` (the lock is renewed meanwhile).
    Leaving the block releases what the claim holds, and raises ``LockLost`` if the lock
    was lost while held (``raise_on_lost=False`` switches that off), as a ``BlobLock`` does.
    ``timeout`` bounds the wait (``LockTimeout``, naming the holder); other keyword
    arguments are ``BlobLock``'s.
    """

    def __init__(
        self,
        memo_uri: str | os.PathLike[str],
        *,
        done: Callable[[], bool],
        poll: Seconds | None = None,
        **options: Unpack[LockOptions],
    ) -> None:
        self._c = _Claiming(memo_uri, done, poll, options)

    def __enter__(self) -> MemoClaim:
        c = self._c
        if _sync_done(c.done):
            return c.nothing()  # no lock write at all
        deadline = c.deadline()
        while True:
            # In slices, to check for the result between them; the process remembers since
            # when it has seen the lockfile unchanged, so the slices wait as one wait does.
            if c.lock.acquire(timeout=c.slice(deadline)):
                try:
                    finished = _sync_done(c.done)  # finished while we waited?
                except BaseException:
                    c.lock.release()  # nobody would release it: the block never runs
                    raise
                if finished:
                    c.lock.release()
                    return c.nothing()
                return c.won()
            if _sync_done(c.done):
                return c.nothing()
            if deadline is not None and time.monotonic() >= deadline:
                raise c.timed_out(c.holder())

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        claim = self._c.claim
        if claim is not None and claim.launch:
            self._c.lock.__exit__(exc_type, exc, tb)


class claim_memo_async:
    """``async with claim_memo_async(memo_uri, done=...) as claim:``: ``claim_memo``
    without blocking the event loop. ``done`` may be a coroutine function."""

    def __init__(
        self,
        memo_uri: str | os.PathLike[str],
        *,
        done: Done,
        poll: Seconds | None = None,
        **options: Unpack[LockOptions],
    ) -> None:
        self._c = _Claiming(memo_uri, done, poll, options)

    def __await__(self) -> Generator[Any, None, NoReturn]:
        raise TypeError(
            "claim_memo_async(...) is an async context manager, not an awaitable: write "
            "`async with claim_memo_async(memo_uri, done=...) as claim:`"
        )

    async def __aenter__(self) -> MemoClaim:
        c = self._c
        if await _async_done(c.done):
            return c.nothing()
        deadline = c.deadline()
        while True:
            if await c.lock.acquire_async(timeout=c.slice(deadline)):
                try:
                    finished = await _async_done(c.done)
                except BaseException:
                    # Not awaited (this task may be cancelled): released on blob-lock's own
                    # runtime, in the background.
                    c.lock._abandon()
                    raise
                if finished:
                    await c.lock.release_async()
                    return c.nothing()
                return c.won()
            if await _async_done(c.done):
                return c.nothing()
            if deadline is not None and time.monotonic() >= deadline:
                raise c.timed_out(await c.holder_async())

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        claim = self._c.claim
        if claim is not None and claim.launch:
            await self._c.lock.__aexit__(exc_type, exc, tb)


_MEMO = [
    _pyinspect.Parameter("self", _pyinspect.Parameter.POSITIONAL_OR_KEYWORD),
    _pyinspect.Parameter("memo_uri", _pyinspect.Parameter.POSITIONAL_OR_KEYWORD),
    _pyinspect.Parameter("done", _pyinspect.Parameter.KEYWORD_ONLY),
    _pyinspect.Parameter("poll", _pyinspect.Parameter.KEYWORD_ONLY, default=None),
]
claim_memo.__init__.__signature__ = signature(_MEMO)  # type: ignore[attr-defined]
claim_memo_async.__init__.__signature__ = signature(_MEMO)  # type: ignore[attr-defined]
