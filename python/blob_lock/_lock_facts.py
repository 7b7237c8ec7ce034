"""What a BlobLock says of itself without a request (its URI, owner, token, whether it
holds and whether it lost the lock, its settings) and the one read ``inspect`` makes: the
read-only half of ``BlobLock``, which its asynchronous half (``_lock_async.py``) and then
its blocking half (``_lock.py``) extend."""

from __future__ import annotations

from blob_lock import _blob_lock
from blob_lock._inspect import Inspection, _inspection

__all__ = ["LockFacts"]


class LockFacts:
    """The read-only properties of a lock over its native lock (``_native``)."""

    __slots__ = ()

    @property
    def _native(self) -> _blob_lock.NativeLock:
        raise NotImplementedError

    @property
    def handed_off(self) -> bool:
        """True while the lock held was handed off to a remote (``hand_off``)."""
        return self._native.handed_off

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
        """True once the held lease was lost: taken over, or not renewed before its
        deadline. Keeps its value after the release (the end of a ``with`` block), until
        the next acquisition."""
        return self._native.lost

    @property
    def lost_reason(self) -> str | None:
        """Why the lease was lost, if it was (kept after the release, as ``lost``)."""
        return self._native.lost_reason

    @property
    def state(self) -> str:
        """Where this lock is in its lifecycle: ``unheld`` when it has no lease
        (before acquiring, and after a release), else ``held``, ``renewing``,
        ``renew_retrying`` or ``lost`` (the lifecycle logged under ``blob_lock.lifecycle``)."""
        return self._native.state

    def inspect(self) -> Inspection:
        """Reads this lock's lockfile once (``blob_lock.inspect``); never writes."""
        return _inspection(self.uri, self._native.inspect(), self.owner)

    @property
    def protocol(self) -> str:
        """``"cas"`` or ``"lww"``: the protocol in use. With ``protocol="auto"``, ``"auto"``
        until the store decided (the first acquisition on a store checks, once per process,
        whether it honours conditional writes: ``cas`` if it does, ``lww`` if not)."""
        return self._native.protocol

    @property
    def expire(self) -> float:
        """Seconds after its last write at which an unrenewed lock expires."""
        return self._native.expire

    @property
    def heartbeat(self) -> float:
        """Seconds between renewals."""
        return self._native.heartbeat

    @property
    def labels(self) -> dict[str, str]:
        """The labels each acquisition writes (a copy; empty when none were given)."""
        return self._native.labels

    def __repr__(self) -> str:
        state = "lost" if self.lost else ("held" if self.held else "not held")
        token = f" token={self.token}" if self.token is not None else ""
        return (
            f"<{type(self).__name__} {self.uri!r} {state} owner={self.owner}{token} "
            f"protocol={self.protocol} expire={self.expire:g}s>"
        )
