"""What ``blob_lock.joblib`` keeps beside a joblib cache: where the lock of each call lives,
the claim a missed call takes on it, the free locks pruned when the cache is cleared, and
what a call whose lock was lost while it computed may still store. What it logs (logger
``blob_lock.joblib``): a wait for another holder of a call, once, at INFO, naming it; a
takeover from a holder whose lease expired and a loss, at WARNING. Imports no joblib."""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from blob_lock import _blob_lock
from blob_lock._args import lock_uri
from blob_lock._claiming import claim_memo, claim_memo_async
from blob_lock._inspect import Inspection, inspect, inspect_async
from blob_lock._inventory import prune_locks
from blob_lock._keep_alive import KeepAlive, keep_alive, keep_alive_async
from blob_lock._lock import BlobLock
from blob_lock._loss_notice import LossNotice
from blob_lock._memo_claim import MemoClaim
from blob_lock._options import LOCK_OPTIONS
from blob_lock._stores import StoreKind, store_kind
from blob_lock.exceptions import LockError, LockLost

__all__ = ["LOCK_OPTION_NAMES", "Calls", "Computing", "lock_root", "never", "took_over"]

_logger = logging.getLogger("blob_lock.joblib")

LOCK_OPTION_NAMES = frozenset(o.name for o in LOCK_OPTIONS)
_LOOK = ("storage_options", "credential_provider")  # what a read of the store needs
_KEEP = ("protocol", "storage_options", "credential_provider")  # and keep_alive
# A URI would read these as an escape, a fragment or a query (BlobLock refuses them in an
# object store's URI); a module path may hold them. Only the lock's name changes: two calls
# whose names then meet share a lock, and each still looks for its own result.
_UNSAFE = re.compile(r"[%#?]")


def never() -> bool:
    """The ``done`` of a forced call's claim: it computes whatever is stored."""
    return False


def lock_root(cache_folder: str | None, lock_prefix: object) -> str | None:
    """Where a cache's locks live: ``lock_prefix`` when given, else ``<cache folder>-locks``
    beside joblib's own folder (``<location>/joblib-locks`` for ``Memory("<location>")``),
    outside what joblib's ``clear`` and ``reduce_size`` delete. None without either."""
    if lock_prefix is not None:
        root = lock_uri(lock_prefix).rstrip("/")
        if not root.strip():
            raise ValueError(f"lock_prefix names no folder or bucket: {lock_prefix!r}")
        try:
            _blob_lock.check_uri(root, True)  # named as written, not as a lock's path below it
        except ValueError as e:
            raise ValueError(f"lock_prefix: {e}") from None
        return root
    if cache_folder is None:
        return None
    return os.path.abspath(cache_folder).rstrip(os.sep) + "-locks"


class Calls:
    """The locks of one cache's calls: ``<root>/<function>/<argument hash>/lock``, and the
    lock options each claim takes (checked when made, as ``BlobLock`` checks them)."""

    def __init__(self, root: str, options: Mapping[str, Any], poll: Any) -> None:
        self.root = root
        self.poll = poll
        self.options = dict(options)
        self.raise_on_lost = bool(self.options.get("raise_on_lost", True))
        # Every option checked now, by the claim and the BlobLock it makes; no request. Its
        # error alone: not the failed lookup of a dict option met on the way.
        try:
            claim_memo(f"{root}/check", done=never, poll=poll, **self.options)
        except (TypeError, ValueError) as e:
            raise e from None

    # Equal when made with the same root and options: a Memory pickled to another process
    # (joblib.Parallel's workers) is the Memory it was.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Calls):
            return NotImplemented
        return (self.root, self.poll, self.options) == (other.root, other.poll, other.options)

    def __hash__(self) -> int:
        return hash((self.root, self.poll))

    def uri(self, func_id: str, args_id: str) -> str:
        """The memo URI of a call: its claim's lock is ``<this>/lock``."""
        parts = [_UNSAFE.sub("_", p) for p in re.split(r"[\\/]", func_id) if p]
        return "/".join([self.root, *parts, args_id])

    def _claim_options(self, call: str) -> dict[str, Any]:
        options = dict(self.options)
        # A loss is this module's to report: logged, then raised or not by the call itself.
        options["raise_on_lost"] = False
        # Logged on blob-lock's notice threads: a user's on_lost that blocks never holds
        # the WARNING up.
        options["on_lost"] = LossNotice(functools.partial(_lost, call), self.options.get("on_lost"))
        return options

    def claim(self, call_id: tuple[str, str], done: Callable[[], bool]) -> claim_memo:
        """The claim of a call (joblib's ``(function id, argument hash)``) on its lock."""
        call = "/".join(call_id)
        looks = _Looks(call, done, self._look())
        made = claim_memo(
            self.uri(*call_id), done=looks, poll=self.poll, **self._claim_options(call)
        )
        looks.lock = made._c.lock
        return made

    def claim_async(self, call_id: tuple[str, str], done: Callable[[], bool]) -> claim_memo_async:
        call = "/".join(call_id)
        looks = _LooksAsync(call, done, self._look())
        made = claim_memo_async(
            self.uri(*call_id), done=looks, poll=self.poll, **self._claim_options(call)
        )
        looks.lock = made._c.lock
        return made

    def _look(self) -> dict[str, Any]:
        """The options of a read of the store (``inspect``, a listing)."""
        return {k: self.options[k] for k in _LOOK if k in self.options}

    def prune(self) -> None:
        """Deletes the free (released or expired) lockfiles of the cache; a held one is never
        deleted (``prune_locks`` takes each through the protocol first), nor one taken
        within ``clock_skew + expire`` (its fencing tokens, docs/protocol.md)."""
        prefix = self.root
        look = self._look()
        if "clock_skew" in self.options:  # the allowance the calls' locks are told of
            look["clock_skew"] = self.options["clock_skew"]
        try:
            pruned = prune_locks(prefix, older_than=0, **look)
        except ValueError:
            # The prefix was checked when the Memory was made: on local files this is a
            # folder not made yet, as no call has been locked there.
            if store_kind(prefix) is StoreKind.FILE:
                return
            raise
        for _ in pruned:
            pass

    def keep(self, lock: BlobLock) -> KeepAlive | LockError:
        """Renews a lost lock's own acquisition if nobody has taken the call since (the
        lockfile still names this owner and acquisition: the write is conditional on it),
        or the error that says why not."""
        options = {k: self.options[k] for k in _KEEP if k in self.options}
        try:
            return keep_alive(lock.uri, lock.owner, **options)
        except LockError as e:
            return e

    async def keep_async(self, lock: BlobLock) -> KeepAlive | LockError:
        """``keep`` without blocking the event loop."""
        options = {k: self.options[k] for k in _KEEP if k in self.options}
        try:
            return await keep_alive_async(lock.uri, lock.owner, **options)
        except LockError as e:
            return e


class _Looks:
    """The ``done`` of a call's claim: joblib's look for the result. The first look that
    comes while another holder has the call's lock (the claim waited a ``poll`` for it)
    also says so, once, at INFO, naming that holder, as read from its lockfile."""

    def __init__(self, call: str, done: Callable[[], bool], look: dict[str, Any]) -> None:
        self.call, self.done, self.look = call, done, look
        self.lock: BlobLock | None = None  # the claim's, set once the claim is made
        self.looks = 0
        self.said = False

    def waiting(self) -> bool:
        """Whether this look comes while another holds the lock, and nothing was said yet:
        the first look comes before any attempt, and a look once the lock is ours is not a
        wait."""
        self.looks += 1
        return not self.said and self.looks > 1 and self.lock is not None and not self.lock.held

    def say(self, seen: Inspection | Exception) -> None:
        if isinstance(seen, Inspection):
            if seen.free:
                return  # released meanwhile: the next attempt takes it (or says who has it)
            _logger.info(
                "joblib call %s: waits while another holder of its lock computes it; held by %s",
                self.call,
                seen.describe(),
            )
        else:
            _logger.info(
                "joblib call %s: waits for its lock %s, and cannot read who holds it: %s (it "
                "waits for the store for as long as timeout allows; for ever without one)",
                self.call,
                self.lock.uri if self.lock is not None else "",
                seen,
            )
        self.said = True

    def __call__(self) -> bool:
        if self.waiting() and self.lock is not None:
            try:
                seen: Inspection | Exception = inspect(self.lock.uri, **self.look)
            except Exception as e:  # the store out of reach: the wait says so
                seen = e
            self.say(seen)
        return self.done()


class _LooksAsync(_Looks):
    """``_Looks`` for an async claim: the lockfile read without blocking the event loop."""

    async def __call__(self) -> bool:  # type: ignore[override]
        if self.waiting() and self.lock is not None:
            try:
                seen: Inspection | Exception = await inspect_async(self.lock.uri, **self.look)
            except Exception as e:
                seen = e
            self.say(seen)
        return self.done()


def took_over(call: str, lock: BlobLock | None) -> None:
    """Says, at WARNING, that ``lock`` (a call's, just acquired) was taken over from a holder
    whose lease had expired, if it was."""
    previous = lock._native.took_over if lock is not None else None
    if previous is not None:
        _logger.warning(
            "joblib call %s: took it over from %s, whose lease had expired (it stopped "
            "renewing: its process died or lost the store); computing it here",
            call,
            previous,
        )


class Computing:
    """The call this thread or task computes under its claim: what ``_after_call`` checks
    just before joblib writes the result."""

    __slots__ = ("call", "call_id", "calls", "claim", "kept", "settled")

    def __init__(self, call_id: tuple[str, str], claim: MemoClaim, calls: Calls) -> None:
        self.call_id = call_id
        self.call = f"{call_id[0]}/{call_id[1]}"
        self.claim = claim
        self.calls = calls
        took_over(self.call, claim.lock)  # said as the call starts computing here
        # Settled before the write by an async call (``settle_async``): the lease was held
        # (None), or the renewal of a lost one, or why it failed.
        self.settled = False
        self.kept: KeepAlive | LockError | None = None

    async def settle_async(self) -> None:
        """An async call's check of its lease before joblib's write (which joblib makes
        synchronously, on the event loop): a lost one is renewed here, awaited, so that
        ``store`` makes no request."""
        lock = self.claim.lock
        if lock is not None and lock.lost:
            self.kept = await self.calls.keep_async(lock)
        self.settled = True

    async def end_async(self) -> None:
        """Stops the renewal ``settle_async`` started, if any."""
        if isinstance(self.kept, KeepAlive):
            await self.kept.stop_async()

    def store(self, write: Callable[[], Any], unstored: Any) -> Any:
        """Runs ``write`` (joblib's write of the result and what it returns) if the lock
        holds, or, once lost, if nobody has taken the call since (its lease renewed again
        for the write). Else the result is not written, and the call raises ``LockLost``
        (``raise_on_lost``, the default) or returns ``unstored``."""
        lock = self.claim.lock
        if lock is None:  # a claim that computes holds its lock
            return write()
        if self.settled:
            kept = self.kept  # None: held when an async call checked it
        else:
            kept = self.calls.keep(lock) if lock.lost else None
        if kept is None:
            written = write()
            if lock.lost:
                _logger.warning(
                    "joblib call %s: its lock %s was lost while its result was written (%s); "
                    "the result is written, and another process may have taken the call "
                    "meanwhile and computes it too",
                    self.call,
                    lock.uri,
                    lock.lost_reason,
                )
            return written
        if isinstance(kept, KeepAlive):
            try:
                written = write()
            finally:
                if not self.settled:  # an async call's stops it awaited (end_async)
                    kept.stop()
            _logger.warning(
                "joblib call %s: its lock was lost while it computed, and nobody had taken "
                "the call since: its lease was renewed and the result stored",
                self.call,
            )
            return written
        message = (
            f"joblib call {self.call}: its lock {lock.uri} was lost while it computed "
            f"({lock.lost_reason}), and its result was not stored: {kept.message}"
        )
        _logger.warning("%s", message)
        if self.calls.raise_on_lost:
            raise LockLost(message, lock.uri) from kept
        return unstored


def _lost(call: str, error: LockLost) -> None:
    """A call's lock lost while held (on one of blob-lock's notice threads; the user's
    ``on_lost`` follows on its callback threads)."""
    _logger.warning("joblib call %s: its lock was lost while held: %s", call, error.message)
