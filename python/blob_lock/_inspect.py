"""Looking at a lock without taking it: ``inspect`` and ``doctor``."""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from blob_lock import _args, _blob_lock, _process

__all__ = [
    "DoctorReport",
    "Inspection",
    "LockState",
    "Probe",
    "RaceReport",
    "doctor",
    "inspect",
    "inspect_async",
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
        if self.broken_by is not None and self.state is LockState.RELEASED:
            when = f" at {self.released_at.isoformat()}" if self.released_at else ""
            return (
                f"{self.uri}: released, broken by {self.broken_by}{when} "
                f"(it was held by owner {self.owner}, token {self.token})"
            )
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
    return owner in _process.owners_here()


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
        broken_by=d.get("broken_by"),
        write_count=d.get("write_count"),
    )


def _native(uri: object, storage_options: Mapping[str, str] | None) -> _blob_lock.NativeLock:
    return _blob_lock.NativeLock(
        _args.lock_uri(uri),
        expire=30.0,
        heartbeat=None,
        protocol="auto",
        storage_options=_args.storage_options(storage_options),
        settle=None,
        clock_skew=None,
        on_lost=None,
    )


def inspect(
    uri: str | os.PathLike[str],
    *,
    owner: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> Inspection:
    """Reads the lock at ``uri`` once and says what it shows; never writes.

    The state is ``ours`` when the holder is this process (a held ``BlobLock`` or a running
    ``keep_alive``) or ``owner``. Raises ``InvalidLockFile`` for a lockfile it cannot read
    and ``StoreError`` when the store fails.
    """
    native = _native(uri, storage_options)
    return _inspection(native.uri, native.inspect(), owner)


async def inspect_async(
    uri: str | os.PathLike[str],
    *,
    owner: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> Inspection:
    """``inspect`` without blocking the event loop."""
    native = _native(uri, storage_options)
    return _inspection(native.uri, await native.inspect_async(), owner)


@dataclass(frozen=True)
class Probe:
    """One call ``doctor`` made to the store."""

    name: str
    ok: bool
    seconds: float
    detail: str


@dataclass(frozen=True)
class RaceReport:
    """What ``doctor(race=True)`` found racing independent clients beside the lock: each
    round, every racer tries a create-if-absent of one new key, then an update-if-match over
    one version, at the same moment. More than one winner in a round means the store checks
    a condition and writes in two steps, and ``cas`` is not safe there."""

    scratch: str
    racers: int
    rounds: int
    create_doubles: int
    update_doubles: int
    errors: int
    #: Rounds in which no write of a race landed (failed or refused): the race is then
    #: inconclusive, ``cas_safe`` False.
    unsettled: int
    first_double: str | None
    seconds: float
    cas_safe: bool

    def verdict(self) -> str:
        """A sentence for people."""
        if self.cas_safe:
            return (
                f"no round of {self.rounds} had two winners ({self.racers} racers, "
                f"{self.seconds:.1f}s): conditional writes held under races"
            )
        if self.first_double is not None:
            return f"conditional writes are NOT atomic under races: {self.first_double}"
        return (
            f"inconclusive: in {self.unsettled} of {self.rounds} rounds no write landed "
            f"({self.errors} failed); check the store's health and run the race again"
        )


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
    race: RaceReport | None = None
    """The race, with ``doctor(race=True)``; ``cas_safe`` is False if it found two winners."""

    def verdict(self) -> str:
        """A sentence for people."""
        why = []
        if not self.create_is_conditional:
            why.append("create-if-absent (If-None-Match) is ignored")
        if not self.update_is_conditional:
            why.append("update-if-match (If-Match) is ignored")
        if not self.reads_see_writes:
            why.append("reads do not always see the last write")
        if self.race is not None and not self.race.cas_safe:
            why.append("conditional writes are not atomic under races")
        if not why:
            return "cas is safe here: conditional writes are honoured and reads see writes" + (
                ", also under races" if self.race is not None else ""
            )
        lww = (
            "; lww works here, best effort (see the README)"
            if self.lww_usable
            else "; lww is not safe either"
        )
        return "cas is NOT safe here: " + "; ".join(why) + lww


def doctor(
    uri: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
    expire: float = 30.0,
    race: bool = False,
    racers: int = 16,
    rounds: int = 100,
) -> DoctorReport:
    """Probes the store behind ``uri`` on a scratch lockfile beside it (deleted afterwards):
    create-if-absent twice, read-after-write, update-if-match, an update with a stale
    version, with the latency of each call. Says whether ``cas`` is safe there.

    With ``race``, ``racers`` independent clients (each with its own connections) then race
    both conditional writes for ``rounds`` rounds; a round with more than one winner makes
    ``cas_safe`` False. A race that finds none is evidence, not proof: a store that checks
    and writes in two steps lets two racers in only when their requests meet inside that
    window, so more racers and rounds find rarer races (moto's server, 64 racers: a double
    within 4 rounds in one race, none in 150 in another; race again on a store that
    passes). ``expire`` sizes the request timeout as a lock's would. A missing
    bucket or bad credentials raise ``StoreError``.
    """
    for name, value in (("racers", racers), ("rounds", rounds)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if value < 0:  # the range is checked by the race itself
            raise ValueError(f"{name} must be positive, got {value}")
    d = _blob_lock.doctor(
        _args.lock_uri(uri),
        storage_options=_args.storage_options(storage_options),
        expire=expire,
        race=(racers, rounds) if race else None,
    )
    probes = tuple(Probe(**p) for p in d.pop("probes"))
    raced = d.pop("race")
    report = RaceReport(**raced) if raced is not None else None
    if report is not None and not report.cas_safe:
        d["cas_safe"] = False
    return DoctorReport(probes=probes, race=report, **d)
