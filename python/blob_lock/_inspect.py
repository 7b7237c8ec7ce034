"""Looking at a lock without taking it: ``inspect`` and ``doctor``."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from blob_lock import _blob_lock

__all__ = ["DoctorReport", "Inspection", "LockState", "Probe", "doctor", "inspect", "inspect_async"]


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
        if self.owner is None:
            return f"{self.uri}: {self.state.value}"
        who = f"owner {self.owner}"
        if self.hostname:
            who += f" on {self.hostname}"
        if self.pid:
            who += f" (pid {self.pid})"
        line = f"{self.uri}: {self.state.value}, {who}, token {self.token}"
        held_for = self.held_for()
        if held_for is not None:
            line += f", held for {_duration(held_for)}"
        if self.expires_in is not None:
            if self.expires_in > 0:
                line += f", expires in {_duration(self.expires_in)} unless renewed"
            else:
                line += f", expired {_duration(-self.expires_in)} ago"
        return line

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


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s < 60:
        return f"{max(seconds, 0):.1f}s" if seconds < 10 else f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _ours(owner: str) -> bool:
    from blob_lock._lock import _owners_here

    return owner in _owners_here()


def _inspection(uri: str, d: dict[str, Any], owner: str | None) -> Inspection:
    state = LockState(d["state"])
    if state is LockState.HELD and (d.get("owner") == owner or _ours(d.get("owner", ""))):
        state = LockState.OURS
    return Inspection(
        uri=uri,
        state=state,
        owner=d.get("owner"),
        hostname=d.get("hostname") or None,
        pid=d.get("pid") or None,
        token=d.get("token"),
        written_at=_time(d.get("written_at")),
        expire_s=d.get("expire_s"),
        expires_in=d.get("expires_in"),
        released_at=_time(d.get("released_at")),
        first_acquired_at=_time(d.get("first_acquired_at")),
        writer_name=d.get("writer_name"),
        protocol=d.get("protocol"),
        last_modified=_time(d.get("last_modified")),
    )


def _native(uri: str, storage_options: Mapping[str, str] | None) -> _blob_lock.NativeLock:
    from blob_lock._lock import _options

    return _blob_lock.NativeLock(
        str(uri),
        expire=30.0,
        heartbeat=None,
        protocol="auto",
        storage_options=_options(storage_options),
        settle=None,
        clock_skew=None,
        on_lost=None,
    )


def inspect(
    uri: str, *, owner: str | None = None, storage_options: Mapping[str, str] | None = None
) -> Inspection:
    """Reads the lock at ``uri`` once and says what it shows; never writes.

    The state is ``ours`` when the holder is this process (a held ``BlobLock`` or a running
    ``keep_alive``) or ``owner``. Raises ``InvalidLockFile`` for a lockfile it cannot read
    and ``StoreError`` when the store fails.
    """
    return _inspection(str(uri), _native(uri, storage_options).inspect(), owner)


async def inspect_async(
    uri: str, *, owner: str | None = None, storage_options: Mapping[str, str] | None = None
) -> Inspection:
    """``inspect`` without blocking the event loop."""
    d = await _native(uri, storage_options).inspect_async()
    return _inspection(str(uri), d, owner)


@dataclass(frozen=True)
class Probe:
    """One call ``doctor`` made to the store."""

    name: str
    ok: bool
    seconds: float
    detail: str


@dataclass(frozen=True)
class DoctorReport:
    """What ``doctor`` found: each probe, and whether ``cas`` is safe on this store."""

    uri: str
    scratch: str
    probes: tuple[Probe, ...]
    create_is_conditional: bool
    update_is_conditional: bool
    reads_see_writes: bool
    cas_safe: bool
    lww_usable: bool

    def verdict(self) -> str:
        """A sentence for people."""
        if self.cas_safe:
            return "cas is safe here: conditional writes are honoured and reads see writes"
        why = []
        if not self.create_is_conditional:
            why.append("create-if-absent (If-None-Match) is ignored")
        if not self.update_is_conditional:
            why.append("update-if-match (If-Match) is ignored")
        if not self.reads_see_writes:
            why.append("reads do not always see the last write")
        lww = (
            "; lww works here, best effort (see the README)"
            if self.lww_usable
            else "; lww is not safe either"
        )
        return "cas is NOT safe here: " + "; ".join(why) + lww


def doctor(
    uri: str, *, storage_options: Mapping[str, str] | None = None, expire: float = 30.0
) -> DoctorReport:
    """Probes the store behind ``uri`` on a scratch lockfile beside it (deleted afterwards):
    create-if-absent twice, read-after-write, update-if-match, an update with a stale
    version, with the latency of each call. Says whether ``cas`` is safe there.

    ``expire`` sizes the request timeout as a lock's would. A missing bucket or bad
    credentials raise ``StoreError``.
    """
    from blob_lock._lock import _options

    d = _blob_lock.doctor(str(uri), storage_options=_options(storage_options), expire=expire)
    probes = tuple(Probe(**p) for p in d.pop("probes"))
    return DoctorReport(probes=probes, **d)
