"""keep_alive: a remote's renewal of the lock its orchestrator acquired."""

from __future__ import annotations

import contextlib
import inspect as _pyinspect
import os
import threading
from collections.abc import Awaitable, Callable, Generator, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from blob_lock import _blob_lock, _handover, _process
from blob_lock._args import lock_uri
from blob_lock._option_types import KeepAliveOptions
from blob_lock._options import KEEP_ALIVE, signature
from blob_lock.exceptions import LockLost

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["KeepAlive", "KeepAliveStarting", "keep_alive", "keep_alive_async"]


class _FirstLoss:
    """Which of several kept locks was lost first, as their ``on_lost`` hooks report it,
    and the caller's ``on_lost``, called with that first loss only."""

    __slots__ = ("_guard", "_on_lost", "uri")

    def __init__(self, on_lost: Callable[[LockLost], object] | None) -> None:
        self._guard = threading.Lock()
        self._on_lost = on_lost
        self.uri: str | None = None

    def of(self, uri: str) -> Callable[[LockLost], None]:
        """The ``on_lost`` hook of the lock at ``uri``."""

        def lost(error: LockLost) -> None:
            with self._guard:
                if self.uri is not None:
                    return
                self.uri = uri
            if self._on_lost is not None:
                self._on_lost(error)

        return lost


class KeepAlive:
    """A remote's renewal of its orchestrator's lock, or of every lock of a claim's
    hand-over; see ``keep_alive``. Never releases."""

    def __init__(
        self, natives: Sequence[_blob_lock.NativeKeepAlive], first_loss: _FirstLoss | None = None
    ) -> None:
        self._natives = tuple(natives)
        self._first_loss = first_loss
        self._forked = False  # True in a child made by fork: the renewal runs in the parent
        _process.track(self)

    def stop(self) -> None:
        """Stops renewing (every lock kept). Each then expires unless the orchestrator
        releases it."""
        _process.untrack(self)
        if not self._forked:
            for native in self._natives:
                native.stop()

    @property
    def lost(self) -> bool:
        """True once a lock kept (any of them) stopped being this owner's, or was not
        renewed in time.

        Always True in a child made by fork: the renewal runs in the parent, not here.
        """
        return self._forked or any(native.lost for native in self._natives)

    @property
    def lost_reason(self) -> str | None:
        """Why it was lost, if it was: with several locks kept, the first lost, named."""
        if self._forked:
            return "this process is a child made by fork: the renewal runs in the parent"
        lost = [native for native in self._natives if native.lost]
        if not lost:
            return None
        if len(self._natives) == 1:
            return lost[0].lost_reason
        first = self._first_loss.uri if self._first_loss is not None else None
        native = next((n for n in lost if n.uri == first), lost[0])
        reason = native.lost_reason or "lost"
        return reason if native.uri in reason else f"{native.uri}: {reason}"

    @property
    def owner(self) -> str:
        """The owner id being kept alive."""
        return self._natives[0].owner

    @property
    def token(self) -> int:
        """The fencing token of the acquisition being kept alive (of the first lock, the
        memo's, when a hand-over names several)."""
        return self._natives[0].token

    @property
    def uri(self) -> str:
        """The lock URI (the first, the memo's lock, when a hand-over names several)."""
        return self._natives[0].uri

    @property
    def uris(self) -> tuple[str, ...]:
        """Every lock URI kept alive, in order: one for ``keep_alive(uri, owner)``; for a
        claim's hand-over, the memo's lock, then its quota's slot if it took one."""
        return tuple(native.uri for native in self._natives)

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
        _process.untrack(self)
        if not self._forked:
            for native in self._natives:
                await native.stop_async()

    async def __aenter__(self) -> KeepAlive:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop_async()

    def _end_at_exit(self) -> None:
        self.stop()
        return None

    def _in_fork_child(self) -> None:
        for native in self._natives:
            native.leak_in_child()
        self._forked = True

    def __repr__(self) -> str:
        state = "lost" if self.lost else "alive"
        where = repr(self.uri) if len(self._natives) == 1 else repr(list(self.uris))
        return f"<KeepAlive {where} {state} owner={self.owner} token={self.token}>"


def _owner(owner: object) -> str:
    if not isinstance(owner, str):
        raise TypeError(f"owner must be the str owner id of the orchestrator's lock, got {owner!r}")
    return owner


def _what_to_keep(uri: object, owner: object) -> tuple[tuple[str, ...], str]:
    """The lock URIs and the owner id that ``keep_alive(uri, owner)`` or
    ``keep_alive(handover)`` names. The two forms are told apart by their arguments, never
    by guessing what a string holds: a ``str`` hand-over with an owner, or a URI without
    one, is refused, saying which form takes what."""
    if owner is None:
        if not _handover.is_handover(uri):
            raise TypeError(
                "keep_alive(uri, owner) keeps the lock at uri, and keep_alive(handover) every "
                "lock of a claim's handover (claim.handover, which carries the owner id); got "
                f"{uri!r} and no owner"
            )
        assert isinstance(uri, str)
        owner, uris = _handover.decode(uri)
        return tuple(lock_uri(u) for u in uris), owner
    if _handover.is_handover(uri):
        raise TypeError(
            "keep_alive(handover) takes no owner: a claim's handover carries its owner id "
            "(for a local path of that name, pass a pathlib.Path)"
        )
    return (lock_uri(uri),), _owner(owner)


def _prepared(
    uri: object, owner: object, options: KeepAliveOptions
) -> tuple[str, list[tuple[str, _blob_lock.KeepAliveOptions]], _FirstLoss | None]:
    """The owner id, each lock URI with its options parsed (every one checked before
    anything starts), and, with several locks, the hook that tells the first loss."""
    uris, owner_id = _what_to_keep(uri, owner)
    on_lost = options.get("on_lost")
    if len(uris) == 1 or not (on_lost is None or callable(on_lost)):  # the native check
        return owner_id, [(u, _blob_lock.keep_alive_options(u, options)) for u in uris], None
    first_loss = _FirstLoss(on_lost)
    parsed = [
        (u, _blob_lock.keep_alive_options(u, {**options, "on_lost": first_loss.of(u)}))
        for u in uris
    ]
    return owner_id, parsed, first_loss


def keep_alive(
    uri: str | os.PathLike[str], owner: str | None = None, **options: Unpack[KeepAliveOptions]
) -> KeepAlive:
    """What a remote calls before it runs user code: ``keep_alive(uri, owner)`` renews
    ``owner``'s lock at ``uri``; ``keep_alive(handover)``, given a claim's
    ``MemoClaim.handover``, renews every lock the claim holds (the memo's lock, and its
    quota's slot if it took one), as one ``KeepAlive``.

    Raises ``LockNotFound`` when there is no lockfile and ``LockStolen`` when it names
    another owner or is released (for a hand-over, when any lock named is not the owner's:
    those started are stopped first). Otherwise renews each as a co-owner, on the schedule
    of its lockfile's ``expire_s``, until ``stop()`` (or the end of the ``with`` block).
    Never releases: only the orchestrator does. ``on_lost`` is called once, on a thread of
    its own, with the ``LockLost`` error if a lock stops being this owner's (the first, for
    a hand-over; the others are renewed on until ``stop()``).

    The hand-over is one opaque string rather than a list of URIs because a remote is most
    often launched with string arguments (a command line, a Kubernetes job's args): it needs
    no separator that some URI could hold, survives a shell unquoted, carries the owner with
    the URIs, and lets a claim that takes a quota slot be kept whole by a remote that never
    heard of quotas. The options (``storage_options``, ...) are the remote's own and apply to
    every lock kept; the hand-over holds no credentials.
    """
    owner_id, parsed, first_loss = _prepared(uri, owner, options)
    natives: list[_blob_lock.NativeKeepAlive] = []
    try:
        for u, opts in parsed:
            natives.append(_blob_lock.keep_alive(u, owner_id, opts))
    except BaseException:
        for native in natives:  # nothing keeps renewing for a call that raised
            with contextlib.suppress(Exception):
                native.stop()
        raise
    return KeepAlive(natives, first_loss)


class KeepAliveStarting:
    """What ``keep_alive_async`` returns: ``async with keep_alive_async(uri, owner) as
    kept:`` renews until the block ends; ``kept = await keep_alive_async(uri, owner)``
    starts renewing and leaves the stop to you."""

    __slots__ = ("_kept", "_start")

    def __init__(self, start: Callable[[], Awaitable[KeepAlive]]) -> None:
        self._start = start
        self._kept: KeepAlive | None = None

    def __await__(self) -> Generator[Any, None, KeepAlive]:
        return self._start().__await__()

    async def __aenter__(self) -> KeepAlive:
        self._kept = await self._start()
        return self._kept

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._kept is not None:
            await self._kept.stop_async()


def keep_alive_async(
    uri: str | os.PathLike[str], owner: str | None = None, **options: Unpack[KeepAliveOptions]
) -> KeepAliveStarting:
    """``keep_alive`` without blocking the event loop: ``async with keep_alive_async(uri,
    owner) as kept:`` or ``async with keep_alive_async(handover) as kept:`` (or ``kept =
    await keep_alive_async(...)``, then ``await kept.stop_async()``). Bad arguments raise
    at once."""
    owner_id, parsed, first_loss = _prepared(uri, owner, options)

    async def start() -> KeepAlive:
        natives: list[_blob_lock.NativeKeepAlive] = []
        try:
            for u, opts in parsed:
                natives.append(await _blob_lock.keep_alive_async(u, owner_id, opts))
        except BaseException:
            for native in natives:  # stopped at once, not awaited: this task may be cancelled
                with contextlib.suppress(Exception):
                    native.stop()
            raise
        return KeepAlive(natives, first_loss)

    return KeepAliveStarting(start)


_URI_OWNER = [
    _pyinspect.Parameter("uri", _pyinspect.Parameter.POSITIONAL_OR_KEYWORD),
    _pyinspect.Parameter(
        "owner", _pyinspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation="str | None"
    ),
]
keep_alive.__signature__ = signature(_URI_OWNER, KEEP_ALIVE)  # type: ignore[attr-defined]
keep_alive_async.__signature__ = signature(_URI_OWNER, KEEP_ALIVE)  # type: ignore[attr-defined]
