"""An adapter's ``on_lost``: its own notice of a loss and the user's callback, run apart."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from blob_lock.exceptions import LockLost

__all__ = ["LossNotice"]


class LossNotice:
    """What an adapter passes as a lock's ``on_lost``: ``notice``, its own (a log line, its
    bookkeeping: short, never blocking), and ``user``, the user's ``on_lost`` or None.
    blob-lock runs them apart when the lock is lost, the notice on threads of its own: a
    user's callback that blocks never holds up an adapter's WARNING, and at interpreter exit
    a blocked user callback is left while the notices run. Called as one (by Python code),
    the notice comes first."""

    __slots__ = ("_blob_lock_notice", "_blob_lock_user")

    def __init__(
        self,
        notice: Callable[[LockLost], Any],
        user: Callable[[LockLost], Any] | None,
    ) -> None:
        self._blob_lock_notice = notice
        self._blob_lock_user = user

    def __call__(self, error: LockLost) -> None:
        self._blob_lock_notice(error)
        if self._blob_lock_user is not None:
            self._blob_lock_user(error)

    def __repr__(self) -> str:
        return f"LossNotice({self._blob_lock_notice!r}, user={self._blob_lock_user!r})"
