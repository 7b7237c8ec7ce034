"""The store doctor: probes a store's conditional writes on a scratch lockfile, and races
independent clients over them (``doctor``, ``blob-lock doctor``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from blob_lock import _args, _blob_lock, _credentials
from blob_lock._credentials import CredentialProvider

__all__ = ["DoctorReport", "Probe", "RaceReport", "doctor"]


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
    inconclusive: int
    first_double: str | None
    seconds: float
    cas_safe: bool

    def verdict(self) -> str:
        """A sentence for people: what the race saw, and, when it found no double, what
        that does not prove."""
        if self.cas_safe:
            return f"{self._seen()}; {_NOT_PROOF}"
        if self.first_double is not None:
            return f"conditional writes are NOT atomic under races: {self.first_double}"
        return (
            f"inconclusive: in {self.inconclusive} of {self.rounds} rounds no write landed "
            f"({self.errors} failed); check the store's health and run the race again"
        )

    def _seen(self) -> str:
        """What a race without a double saw: ``100 rounds of 16 racers: one winner each
        time``."""
        failed = f" ({self.errors} failed writes)" if self.errors else ""
        return f"{self.rounds} rounds of {self.racers} racers: one winner each time{failed}"


#: What a race without a double does not prove: a store that checks a condition and then
#: writes in a second step lets two writers in only when they meet inside that window.
_NOT_PROOF = (
    "this does not prove the store's conditional writes are atomic: a rarer race can still let "
    "two writers in; race again with more racers and rounds (docs/stores/s3.md)"
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
    credentials: str = "none needed"
    """Where the credentials came from (a profile, a CLI login, a provider), never a secret."""

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
        if not why and self.race is not None:
            return (
                "no check failed: conditional writes are honoured and reads see writes; under "
                f"races, {self.race._seen()}; {_NOT_PROOF}"
            )
        if not why:
            return (
                "conditional writes are honoured one request at a time and reads see writes; "
                "not checked: whether two writers racing over one condition can both land "
                "(some stores check and then write in two steps): run with --race "
                "(doctor(race=True)) to check that before trusting cas here"
            )
        lww = (
            "; lww works here, best effort (see docs/guarantees.md)"
            if self.lww_usable
            else "; lww is not safe either"
        )
        return "cas is NOT safe here: " + "; ".join(why) + lww


def doctor(
    uri: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: CredentialProvider | object | None = None,
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
    uri = _args.lock_uri(uri)
    n = _blob_lock.doctor(
        uri,
        **_credentials.resolve(uri, storage_options, credential_provider),
        expire=expire,
        race=(racers, rounds) if race else None,
    )
    raced = None if n.race is None else _race(n.race)
    return DoctorReport(
        uri=n.uri,
        scratch=n.scratch,
        probes=tuple(
            Probe(name=p.name, ok=p.ok, seconds=p.seconds, detail=p.detail) for p in n.probes
        ),
        create_is_conditional=n.create_is_conditional,
        update_is_conditional=n.update_is_conditional,
        reads_see_writes=n.reads_see_writes,
        cas_safe=n.cas_safe and (raced is None or raced.cas_safe),
        lww_usable=n.lww_usable,
        race=raced,
        credentials=_credentials.credential_source(uri, storage_options, credential_provider),
    )


def _race(r: _blob_lock.NativeRaceReport) -> RaceReport:
    return RaceReport(
        scratch=r.scratch,
        racers=r.racers,
        rounds=r.rounds,
        create_doubles=r.create_doubles,
        update_doubles=r.update_doubles,
        errors=r.errors,
        inconclusive=r.inconclusive,
        first_double=r.first_double,
        seconds=r.seconds,
        cas_safe=r.cas_safe,
    )
