"""keep_alive: a remote's renewal of the lock its orchestrator acquired."""

from __future__ import annotations

import inspect as _pyinspect
import os
from collections.abc import Awaitable, Callable, Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from blob_lock import _blob_lock, _process
from blob_lock._args import lock_uri
from blob_lock._options import KEEP_ALIVE, KeepAliveOptions, signature

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["KeepAlive", "KeepAliveStarting", "keep_alive", "keep_alive_async"]


class KeepAlive:
    """A remote's renewal of its orchestrator's lock; see ``keep_alive``. Never releases."""

    def __init__(self, native: _blob_lock.NativeKeepAlive) -> None:
        self._native = native
        self._forked = False  # True in a child made by fork: the renewal runs in the parent
        _process.track(self)

    def stop(self) -> None:
        """Stops renewing. The lock then expires unless the orchestrator releases it."""
        _process.untrack(self)
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
        _process.untrack(self)
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

    def _end_at_exit(self) -> None:
        self.stop()
        return None

    def _in_fork_child(self) -> None:
        self._native.leak_in_child()
        self._forked = True

    def __repr__(self) -> str:
        state = "lost" if self.lost else "alive"
        return f"<KeepAlive {self.uri!r} {state} owner={self.owner} token={self.token}>"


def _owner(owner: object) -> str:
    if not isinstance(owner, str):
        raise TypeError(f"owner must be the str owner id of the orchestrator's lock, got {owner!r}")
    return owner


def keep_alive(
    uri: str | os.PathLike[str], owner: str, **options: Unpack[KeepAliveOptions]
) -> KeepAlive:
    """What a remote calls before it runs user code: renews ``owner``'s lock at ``uri``.

    Raises ``LockNotFound`` when there is no lockfile and ``LockStolen`` when it names
    another owner or is released. Otherwise renews it as a co-owner, on the schedule of the
    lockfile's ``expire_s``, until ``stop()`` (or the end of the ``with`` block). Never
    releases: only the orchestrator does. ``on_lost`` is called once, on a thread of its
    own, with the ``LockLost`` error if the lock stops being this owner's.
    """
    uri, owner = lock_uri(uri), _owner(owner)
    parsed = _blob_lock.keep_alive_options(uri, options)
    return KeepAlive(_blob_lock.keep_alive(uri, owner, parsed))


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
    uri: str | os.PathLike[str], owner: str, **options: Unpack[KeepAliveOptions]
) -> KeepAliveStarting:
    """``keep_alive`` without blocking the event loop: ``async with keep_alive_async(uri,
    owner) as kept:`` (or ``kept = await keep_alive_async(uri, owner)``, then
    ``await kept.stop_async()``). Bad arguments raise at once."""
    uri = lock_uri(uri)
    owner = _owner(owner)
    parsed = _blob_lock.keep_alive_options(uri, options)

    async def start() -> KeepAlive:
        return KeepAlive(await _blob_lock.keep_alive_async(uri, owner, parsed))

    return KeepAliveStarting(start)


_URI_OWNER = [
    _pyinspect.Parameter("uri", _pyinspect.Parameter.POSITIONAL_OR_KEYWORD),
    _pyinspect.Parameter("owner", _pyinspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str"),
]
keep_alive.__signature__ = signature(_URI_OWNER, KEEP_ALIVE)  # type: ignore[attr-defined]
keep_alive_async.__signature__ = signature(_URI_OWNER, KEEP_ALIVE)  # type: ignore[attr-defined]
