"""What a release found."""

from __future__ import annotations

import enum

__all__ = ["ReleaseStatus", "release_status"]


class ReleaseStatus(str, enum.Enum):
    """What ``release()`` found. A str, so ``status == "released"`` works too."""

    RELEASED = "released"
    """We held the lock and released it."""
    NO_LOCKFILE = "no_lockfile"
    """There is no lockfile at the URI."""
    HELD_BY_OTHER = "held_by_other"
    """A later acquisition holds the lock, or held it after ours and released it since: the
    lock was taken from us (a loss); nothing was written."""
    ALREADY_RELEASED = "already_released"
    """Our acquisition was already released, by someone else (a break); nothing was
    written."""

    def __str__(self) -> str:
        return self.value


_BY_VALUE: dict[str, ReleaseStatus] = {s.value: s for s in ReleaseStatus}


def release_status(value: str) -> ReleaseStatus:
    """The member for the native release's word: a dict lookup, where ``ReleaseStatus(value)``
    goes through Enum's call machinery (ten times slower, and every release makes one)."""
    return _BY_VALUE[value]
