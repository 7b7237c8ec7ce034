"""``claim_memo``: launch a memoized invocation once, and pick up its result, whoever
launched it. The loop every orchestrator used to write by hand around a ``BlobLock``."""

from __future__ import annotations

import inspect as _pyinspect
import os
import time
from collections.abc import Callable, Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn

from blob_lock._args import Seconds, lock_uri
from blob_lock._held_slot import HeldSlot
from blob_lock._inspect import inspect_async
from blob_lock._lock import BlobLock
from blob_lock._memo_claim import Done, MemoClaim, _async_done, _poll, _sync_done
from blob_lock._option_types import LockOptions
from blob_lock._options import signature
from blob_lock._semaphore import BlobSemaphore
from blob_lock.exceptions import LockLost, LockTimeout

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["claim_memo", "claim_memo_async"]


def _memo_uri(uri: object) -> str:
    memo = lock_uri(uri).rstrip("/")
    if not memo.strip():  # "   /lock" would be a folder named "   " here
        raise ValueError(f"memo_uri names no memo: {uri!r}")
    return memo


class _Claiming:
    """The arguments of one claim, checked; shared by the sync and async context managers."""

    def __init__(
        self,
        memo_uri: str | os.PathLike[str],
        done: Done,
        poll: Seconds | None,
        quota: BlobSemaphore | None,
        options: LockOptions,
    ) -> None:
        if not callable(done):
            raise TypeError(
                f"done must be a callable returning whether the result exists, got {done!r}"
            )
        if quota is not None and not isinstance(quota, BlobSemaphore):
            raise TypeError(f"quota must be a BlobSemaphore, got {quota!r}")
        self.quota = quota
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

    def won(self, slot: HeldSlot | None = None) -> MemoClaim:
        self.claim = MemoClaim(self.lock_uri, self.lock, self.done, self.poll, slot)
        return self.claim

    def no_slot(self, quota: BlobSemaphore) -> LockTimeout:
        return LockTimeout(
            f"timed out after {self.timeout:.3f}s: the memo's lock was ours, but every slot "
            f"of the quota {quota.prefix} stayed held, and the result does not exist yet",
            self.lock_uri,
        )

    def lost_meanwhile(self) -> LockLost:
        return LockLost(
            f"lock {self.lock_uri} was lost while waiting for a slot of the quota: "
            f"{self.lock.lost_reason}",
            self.lock_uri,
        )

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
    with ``claim.handover`` (its ``keep_alive(handover)`` keeps alive all the claim holds),
    call ``claim.hand_off(grace)`` with the longest the remote may take to start, then
    ``claim.wait_done()`` (the lock is renewed meanwhile).
    Leaving the block releases what the claim holds, and raises ``LockLost`` if the lock
    was lost while held (``raise_on_lost=False`` switches that off), as a ``BlobLock`` does.
    ``timeout`` bounds the wait (``LockTimeout``, naming the holder); other keyword
    arguments are ``BlobLock``'s.

    ``quota``, a ``BlobSemaphore``, bounds how many invocations run at once across
    orchestrators: once the memo's lock is ours and the result does not exist, the claim
    also takes one of its slots, with the lock's owner id (``claim.slot``), waiting for one
    within ``timeout`` while it checks ``done``; the lock is released if none comes. The
    remote keeps both alive with ``keep_alive(claim.handover)``, ``hand_off`` hands off
    both, and leaving the block releases both.
    """

    def __init__(
        self,
        memo_uri: str | os.PathLike[str],
        *,
        done: Callable[[], bool],
        poll: Seconds | None = None,
        quota: BlobSemaphore | None = None,
        **options: Unpack[LockOptions],
    ) -> None:
        self._c = _Claiming(memo_uri, done, poll, quota, options)

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
                    c.lock._release_at_end()  # nobody would release it: the block never runs
                    raise
                if finished:
                    c.lock._release_at_end()
                    return c.nothing()
                return c.won() if c.quota is None else self._with_slot(c.quota, deadline)
            if _sync_done(c.done):
                return c.nothing()
            if deadline is not None and time.monotonic() >= deadline:
                raise c.timed_out(c.holder())

    def _with_slot(self, quota: BlobSemaphore, deadline: float | None) -> MemoClaim:
        """A slot of ``quota`` taken while the memo's lock is held (so no other orchestrator
        launches meanwhile), in slices that check ``done``; the lock released if none."""
        c = self._c
        try:
            while True:
                try:
                    return c.won(quota._acquire_as(c.lock.owner, c.slice(deadline)))
                except LockTimeout:
                    pass
                if _sync_done(c.done):
                    break
                if c.lock.lost:
                    raise c.lost_meanwhile()
                if deadline is not None and time.monotonic() >= deadline:
                    raise c.no_slot(quota)
        except BaseException:
            c.lock._release_at_end()  # nobody would release it: the block never runs
            raise
        c.lock._release_at_end()
        return c.nothing()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        claim = self._c.claim
        if claim is not None and claim.launch:
            try:
                if claim.slot is not None:
                    claim.slot.__exit__(exc_type, exc, tb)
            finally:
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
        quota: BlobSemaphore | None = None,
        **options: Unpack[LockOptions],
    ) -> None:
        self._c = _Claiming(memo_uri, done, poll, quota, options)

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
                    await c.lock._release_at_end_async()
                    return c.nothing()
                if c.quota is None:
                    return c.won()
                return await self._with_slot(c.quota, deadline)
            if await _async_done(c.done):
                return c.nothing()
            if deadline is not None and time.monotonic() >= deadline:
                raise c.timed_out(await c.holder_async())

    async def _with_slot(self, quota: BlobSemaphore, deadline: float | None) -> MemoClaim:
        """``claim_memo._with_slot`` without blocking the event loop."""
        c = self._c
        try:
            while True:
                try:
                    slot = await quota._acquire_as_async(c.lock.owner, c.slice(deadline))
                    return c.won(slot)
                except LockTimeout:
                    pass
                if await _async_done(c.done):
                    break
                if c.lock.lost:
                    raise c.lost_meanwhile()
                if deadline is not None and time.monotonic() >= deadline:
                    raise c.no_slot(quota)
        except BaseException:
            c.lock._abandon()  # not awaited (this task may be cancelled): released anyway
            raise
        await c.lock._release_at_end_async()
        return c.nothing()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        claim = self._c.claim
        if claim is not None and claim.launch:
            try:
                if claim.slot is not None:
                    await claim.slot.__aexit__(exc_type, exc, tb)
            finally:
                await self._c.lock.__aexit__(exc_type, exc, tb)


_MEMO = [
    _pyinspect.Parameter("self", _pyinspect.Parameter.POSITIONAL_OR_KEYWORD),
    _pyinspect.Parameter("memo_uri", _pyinspect.Parameter.POSITIONAL_OR_KEYWORD),
    _pyinspect.Parameter("done", _pyinspect.Parameter.KEYWORD_ONLY),
    _pyinspect.Parameter("poll", _pyinspect.Parameter.KEYWORD_ONLY, default=None),
    _pyinspect.Parameter("quota", _pyinspect.Parameter.KEYWORD_ONLY, default=None),
]
claim_memo.__init__.__signature__ = signature(_MEMO)  # type: ignore[attr-defined]
claim_memo_async.__init__.__signature__ = signature(_MEMO)  # type: ignore[attr-defined]
