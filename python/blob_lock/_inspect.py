"""Looking at a lock from outside, without holding it: ``inspect`` reads it once,
``wait_free`` waits until it is free, ``break_lock`` marks it released by hand."""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from blob_lock import _args, _blob_lock, _credentials, _process
from blob_lock._args import Seconds, seconds
from blob_lock._credentials import CredentialProvider

__all__ = [
    "BreakOutcome",
    "Broken",
    "Inspection",
    "LockState",
    "break_lock",
    "duration_text",
    "inspect",
    "inspect_async",
    "wait_free",
    "wait_free_async",
]


class LockState(str, enum.Enum):
    """What one read of a lockfile shows. A str, so ``state == "held"`` works too."""

    UNLOCKED = "unlocked"
    """There is no lockfile: nobody ever took the lock here."""
    HELD = "held"
    """Someone else holds it: its last write has not expired by this machine's clock."""
    OURS = "ours"
    """Held by this process (a held BlobLock or a running keep_alive), or by ``owner``."""
    EXPIRED = "expired"
    """Nobody renewed it within ``expire_s`` of its last write: the next waiter takes it."""
    RELEASED = "released"
    """Its holder released it."""
    INVALID = "invalid"
    """Only in ``list_locks``: the object is not a lockfile blob-lock can read (``problem``
    says why). ``inspect`` raises ``InvalidLockFile`` instead."""

    def __str__(self) -> str:
        return self.value


def _time(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, tz=timezone.utc)


@dataclass(frozen=True)
class Inspection:
    """A lock as one read of its lockfile shows it (``blob_lock.inspect``).

    ``expires_in`` is the seconds until its last write expires by this machine's wall clock
    (negative once it has; None when unlocked or released). Waiters judge expiry on their
    own monotonic clocks instead, so a writer whose clock runs ahead looks alive here longer.
    """

    uri: str
    state: LockState
    owner: str | None = None
    hostname: str | None = None
    pid: str | None = None
    token: int | None = None
    written_at: datetime | None = None
    expire_s: float | None = None
    expires_in: float | None = None
    released_at: datetime | None = None
    first_acquired_at: datetime | None = None
    writer_name: str | None = None
    protocol: str | None = None
    last_modified: datetime | None = None
    broken_by: str | None = None
    """Who broke the lock (``blob-lock break``), when its release was not its holder's."""
    write_count: int | None = None
    """Writes by the current owner: its acquisition, then each renewal."""
    grace_s: float | None = None
    """The launch grace of the last write (``hand_off``): seconds after it during which
    waiters do not take over, when longer than ``expire_s``. None once the remote has written."""
    grace_until: datetime | None = None
    """When that grace ends, by the writer's clock."""
    labels: dict[str, str] = field(default_factory=dict, hash=False)
    """What the holder said about why it holds the lock (``BlobLock(labels=...)``); kept
    through renewals and the release."""
    problem: str | None = None
    """Why the lockfile cannot be read, when ``state`` is ``invalid`` (``list_locks``)."""

    @property
    def handed_off(self) -> bool:
        """True while its holder has handed it to a remote that has not written yet."""
        return self.grace_s is not None and self.state in (LockState.HELD, LockState.OURS)

    @property
    def free(self) -> bool:
        """True when a waiter may take the lock now: unlocked, released or expired."""
        return self.state in (LockState.UNLOCKED, LockState.RELEASED, LockState.EXPIRED)

    def held_for(self, now: datetime | None = None) -> float | None:
        """Seconds since the current holder first acquired the lock (None if not held)."""
        if self.first_acquired_at is None or self.state not in (LockState.HELD, LockState.OURS):
            return None
        return ((now or datetime.now(timezone.utc)) - self.first_acquired_at).total_seconds()

    def describe(self) -> str:
        """One line for people: the state and, when someone holds it, who and for how long."""
        if self.state is LockState.INVALID:
            return f"{self.uri}: invalid lockfile: {self.problem}"
        if self.owner is None:
            return f"{self.uri}: {self.state.value}"
        if self.broken_by is not None and self.state is LockState.RELEASED:
            when = f" at {self.released_at.isoformat()}" if self.released_at else ""
            return (
                f"{self.uri}: released, broken by {self.broken_by}{when} "
                f"(it was held by owner {self.owner}, token {self.token})"
            ) + self._labels_text()
        who = f"owner {self.owner}"
        if self.hostname:
            who += f" on {self.hostname}"
        if self.pid:
            who += f" (pid {self.pid})"
        line = f"{self.uri}: {self.state.value}, {who}, token {self.token}"
        held_for = self.held_for()
        if held_for is not None:
            line += f", held for {duration_text(held_for)}"
        if self.handed_off and self.grace_until is not None:
            line += f", handed off, grace until {self.grace_until.isoformat(timespec='seconds')}"
        if self.expires_in is not None:
            if self.expires_in > 0:
                line += f", expires in {duration_text(self.expires_in)} unless renewed"
            else:
                line += f", expired {duration_text(-self.expires_in)} ago"
        return line + self._labels_text()

    def _labels_text(self) -> str:
        if not self.labels:
            return ""
        return "; labels: " + ", ".join(f"{k}={v}" for k, v in self.labels.items())

    def to_json(self) -> dict[str, Any]:
        """A dict of plain JSON values (times as ISO 8601 strings)."""
        out: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            v = getattr(self, name)
            out[name] = (
                v.isoformat()
                if isinstance(v, datetime)
                else (v.value if isinstance(v, LockState) else v)
            )
        return out


def duration_text(seconds: float) -> str:
    """A duration as blob-lock's messages write it: ``4.2s``, ``45s``, ``7m05s``, ``3h20m``."""
    s = round(seconds)
    if s < 60:
        return f"{max(seconds, 0):.1f}s" if seconds < 10 else f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _ours(owner: str) -> bool:
    return owner in _process.owners_here()


def _inspection(uri: str, native: _blob_lock.NativeInspection, owner: str | None) -> Inspection:
    """The Inspection of what the native layer read, field by field (a field renamed on
    either side fails the type check)."""
    state = LockState(native.state)
    lf = native.lockfile
    if state is LockState.HELD and lf is not None and (lf.owner == owner or _ours(lf.owner)):
        state = LockState.OURS
    return _seen(uri, state, lf, native.expires_in, _time(native.last_modified))


def _seen(
    uri: str,
    state: LockState,
    lf: _blob_lock.NativeLockfileFacts | None,
    expires_in: float | None = None,
    last_modified: datetime | None = None,
) -> Inspection:
    if lf is None:
        return Inspection(uri=uri, state=state, expires_in=expires_in, last_modified=last_modified)
    return Inspection(
        uri=uri,
        state=state,
        owner=lf.owner,
        hostname=lf.hostname,
        pid=lf.pid,
        token=lf.token,
        written_at=_time(lf.written_at),
        expire_s=lf.expire_s,
        expires_in=expires_in,
        released_at=_time(lf.released_at),
        first_acquired_at=_time(lf.first_acquired_at),
        writer_name=lf.writer_name,
        protocol=lf.protocol,
        last_modified=last_modified,
        broken_by=lf.broken_by,
        write_count=lf.write_count,
        grace_s=lf.grace_s,
        grace_until=_time(lf.grace_until),
        labels=dict(lf.labels),
    )


def _lockfile(
    uri: object, storage_options: Mapping[str, str] | None, credential_provider: object
) -> _blob_lock.NativeLockfile:
    uri = _args.lock_uri(uri)
    return _blob_lock.NativeLockfile(
        uri, **_credentials.resolve(uri, storage_options, credential_provider)
    )


def inspect(
    uri: str | os.PathLike[str],
    *,
    owner: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: CredentialProvider | object | None = None,
) -> Inspection:
    """Reads the lock at ``uri`` once and says what it shows; never writes.

    The state is ``ours`` when the holder is this process (a held ``BlobLock`` or a running
    ``keep_alive``) or ``owner``. Raises ``InvalidLockFile`` for a lockfile it cannot read
    and ``StoreError`` when the store fails.
    """
    lockfile = _lockfile(uri, storage_options, credential_provider)
    return _inspection(lockfile.uri, lockfile.inspect(), owner)


async def inspect_async(
    uri: str | os.PathLike[str],
    *,
    owner: str | None = None,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: CredentialProvider | object | None = None,
) -> Inspection:
    """``inspect`` without blocking the event loop."""
    lockfile = _lockfile(uri, storage_options, credential_provider)
    return _inspection(lockfile.uri, await lockfile.inspect_async(), owner)


def wait_free(
    uri: str | os.PathLike[str],
    *,
    timeout: Seconds | None = None,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: CredentialProvider | object | None = None,
) -> Inspection:
    """Waits until the lock at ``uri`` is free to take (unlocked, released, or expired as a
    ``BlobLock`` with the default options would judge it); takes nothing, writes nothing.
    Returns what the last read showed. Raises ``LockTimeout``, naming the holder, when
    ``timeout`` (seconds or a timedelta; None waits for ever) passes first. Someone else may
    take the lock the moment it is free: to hold it, acquire a ``BlobLock`` instead.
    """
    t = seconds("timeout", timeout)
    lockfile = _lockfile(uri, storage_options, credential_provider)
    return _inspection(lockfile.uri, lockfile.wait_free(t), None)


async def wait_free_async(
    uri: str | os.PathLike[str],
    *,
    timeout: Seconds | None = None,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: CredentialProvider | object | None = None,
) -> Inspection:
    """``wait_free`` without blocking the event loop."""
    t = seconds("timeout", timeout)
    lockfile = _lockfile(uri, storage_options, credential_provider)
    return _inspection(lockfile.uri, await lockfile.wait_free_async(t), None)


class BreakOutcome(str, enum.Enum):
    """What ``break_lock`` did. A str, so ``outcome == "broken"`` works too."""

    BROKEN = "broken"
    """The acquisition was marked released; its holder learns at its next renewal that it
    lost the lock."""
    CHANGED = "changed"
    """Another acquisition than the one named (``owner``, ``token``) holds the lock now;
    nothing was written."""
    ALREADY_RELEASED = "already_released"
    """Nobody held it; nothing was written."""
    NO_LOCKFILE = "no_lockfile"
    """There is no lockfile; nothing was written."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Broken:
    """What ``break_lock`` did, and the lockfile as it found it (None if there was none)."""

    outcome: BreakOutcome
    found: Inspection | None


def break_lock(
    uri: str | os.PathLike[str],
    *,
    owner: str | None = None,
    token: int | None = None,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: CredentialProvider | object | None = None,
) -> Broken:
    """Marks the lock at ``uri`` released, whoever holds it: for a holder that is gone for
    good and will not be back before its lock expires. With ``owner`` and ``token`` (both,
    as ``inspect`` shows them), breaks only that acquisition: a lock that changed hands since
    is left alone (``CHANGED``). The fencing token is kept, so the next acquisition gets a
    larger one, and the lockfile records who broke it. A holder still running loses its
    lock at its next renewal (``LockLost``).
    """
    if owner is not None and not isinstance(owner, str):
        raise TypeError(f"owner must be a str, got {owner!r}")
    if token is not None and (isinstance(token, bool) or not isinstance(token, int)):
        raise TypeError(f"token must be an int, got {token!r}")
    if token is not None and token < 0:
        raise ValueError(f"token must not be negative, got {token}")
    lockfile = _lockfile(uri, storage_options, credential_provider)
    outcome, found = lockfile.break_lock(owner, token)
    seen = None
    if found is not None:
        # As found, before any break: released, or held (expiry is not judged here).
        if found.released_at is not None:
            state = LockState.RELEASED
        else:
            state = LockState.OURS if _ours(found.owner) else LockState.HELD
        seen = _seen(lockfile.uri, state, found)
    return Broken(BreakOutcome(outcome), seen)


def _entry(entry: _blob_lock.NativeEntry) -> Inspection:
    """A lock of a listing as an Inspection: what a read of it showed, or ``invalid`` with
    the problem."""
    if entry.inspection is None:
        return Inspection(uri=entry.uri, state=LockState.INVALID, problem=entry.problem)
    return _inspection(entry.uri, entry.inspection, None)
