"""``MemoClaim``: what ``claim_memo`` found, and what its caller does with it (launch, hand
off, wait for the result)."""

from __future__ import annotations

import inspect as _pyinspect
import time
from collections.abc import Awaitable, Callable
from typing import Union

from blob_lock import _handover
from blob_lock._args import Seconds, seconds
from blob_lock._held_slot import HeldSlot
from blob_lock._lock import BlobLock
from blob_lock.exceptions import LockError, LockLost

__all__ = ["Done", "MemoClaim"]

Done = Callable[[], Union[bool, Awaitable[bool]]]


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
    ``handover`` to the remote, whose ``keep_alive(handover)`` keeps alive everything the
    claim holds). False when the result exists; then nothing is held and ``owner``,
    ``token`` and ``handover`` are None."""

    __slots__ = ("_done", "_launch", "_lock", "_lock_uri", "_poll", "_slot")

    def __init__(
        self,
        lock_uri: str,
        lock: BlobLock | None,
        done: Done,
        poll: float,
        slot: HeldSlot | None = None,
    ) -> None:
        self._lock_uri, self._launch = lock_uri, lock is not None
        self._lock, self._done, self._poll, self._slot = lock, done, poll, slot

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
    def handover(self) -> str | None:
        """What to launch the remote with: one string naming the owner id and every lock
        the claim holds (the memo's lock, then the quota's slot if it took one), for the
        remote's ``keep_alive(handover)``, which keeps them all alive. None when nothing
        is held.

        One word of letters, digits, ``-``, ``_`` and ``:``, passed through a command line,
        an environment variable or a Kubernetes job's args as it is; the URIs inside are
        JSON, so none is misread whatever it holds. No credentials: the remote passes its
        own options to ``keep_alive``."""
        if self._lock is None:
            return None
        uris = [self._lock_uri] if self._slot is None else [self._lock_uri, self._slot.uri]
        return _handover.encode(self._lock.owner, uris)

    @property
    def lost(self) -> bool:
        """True once the held lock, or the quota's slot, was lost (taken over, or not
        renewed in time)."""
        return (self._lock is not None and self._lock.lost) or (
            self._slot is not None and self._slot.lost
        )

    @property
    def slot(self) -> HeldSlot | None:
        """The ``quota``'s slot, held with the memo's lock under the same owner id, when a
        quota was given and ``launch`` is True: the remote keeps both alive with
        ``keep_alive(claim.handover)``, and leaving the block releases both."""
        return self._slot

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
        exception leaves the lock to the remote instead of releasing it. The quota's slot,
        if any, is handed off alike. Raises ``LockError`` when the claim holds nothing
        (``launch`` is False)."""
        self._held("hand_off").hand_off(grace)
        if self._slot is not None:
            self._slot.hand_off(grace)

    async def hand_off_async(self, grace: Seconds) -> None:
        """``hand_off`` without blocking the event loop."""
        await self._held("hand_off").hand_off_async(grace)
        if self._slot is not None:
            await self._slot.hand_off_async(grace)

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
        if self._slot is not None and self._slot.lost:
            raise LockLost(
                f"the quota's slot {self._slot.uri} was lost while waiting for the result: "
                f"{self._slot.lost_reason}",
                self._slot.uri,
            )

    def __repr__(self) -> str:
        held = f" owner={self.owner} token={self.token}" if self.launch else ""
        if self._slot is not None:
            held += f" slot={self._slot.uri!r}"
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
