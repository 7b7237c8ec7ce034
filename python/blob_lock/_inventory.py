"""Every lock under a prefix: ``list_locks`` reads each once, ``prune_locks`` removes the
lockfiles released or expired long ago."""

from __future__ import annotations

import enum
import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

from blob_lock import _args, _blob_lock, _credentials
from blob_lock._args import Seconds, seconds
from blob_lock._credentials import CredentialProvider
from blob_lock._inspect import Inspection, LockState, _entry
from blob_lock._options import LOCK_OPTIONS

__all__ = ["PruneOutcome", "Pruned", "list_locks", "prune_locks"]

_STATES = ("held", "expired", "released", "invalid", "ours")
#: A lock's default ``clock_skew`` (its one definition is in the native core).
_CLOCK_SKEW = next(o.default for o in LOCK_OPTIONS if o.name == "clock_skew")


def _states(state: str | LockState | None) -> frozenset[str] | None:
    if state is None:
        return None
    if not isinstance(state, str) or state not in _STATES:
        raise ValueError(f"state must be one of {', '.join(_STATES)} or None, got {state!r}")
    return frozenset([str(state)])


def _inventory(
    prefix: object,
    storage_options: Mapping[str, str] | None,
    credential_provider: object,
    clock_skew: Seconds | None = _CLOCK_SKEW,
):
    if not isinstance(prefix, (str, os.PathLike)):
        raise TypeError(
            f"prefix must be a str (s3://bucket/memo, a folder, ...) or a pathlib.Path, "
            f"got {type(prefix).__name__} {prefix!r}"
        )
    uri = _args.lock_uri(prefix)
    return _blob_lock.NativeInventory(
        uri,
        **_credentials.resolve(uri, storage_options, credential_provider, prefix=True),
        clock_skew=clock_skew,
    )


def list_locks(
    prefix: str | os.PathLike[str],
    *,
    state: str | LockState | None = None,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: CredentialProvider | object | None = None,
) -> Iterator[Inspection]:
    """Every lock whose lockfile lies anywhere under ``prefix``, each as one read of it
    shows it (an ``Inspection``, whose ``uri`` is the lock's), page by page as the iterator
    is consumed: a prefix with millions of objects costs the memory of one page. Never
    writes. ``state`` keeps only ``held``, ``expired``, ``released``, ``ours`` or
    ``invalid`` (an object named ``lock.json`` that is not a lockfile: its ``problem`` says
    why). A prefix that is no URI, or a local folder that does not exist, is a
    ``ValueError`` at once; ``StoreError`` when the store fails while listing.
    """
    wanted = _states(state)
    inventory = _inventory(prefix, storage_options, credential_provider)

    def pages() -> Iterator[Inspection]:
        while page := inventory.next_page():
            for entry in page:
                seen = _entry(entry)
                if wanted is None or seen.state.value in wanted:
                    yield seen

    return pages()


class PruneOutcome(str, enum.Enum):
    """What ``prune_locks`` did with one lock. A str, so ``outcome == "deleted"`` works."""

    DELETED = "deleted"
    """Its lockfile was deleted: the next acquisition of the lock starts a new lockfile's
    tokens, above the deleted one's."""
    WOULD_DELETE = "would_delete"
    """A dry run: it would have been deleted."""
    TOO_RECENT = "too_recent"
    """Released or expired, but not for ``older_than`` yet (by both the writer's and the
    store's clock), or its last acquisition is more recent than ``clock_skew`` plus its
    ``expire`` (deleted sooner, the next holder's tokens could start below its last); kept."""
    HELD = "held"
    """Held; kept."""
    CHANGED = "changed"
    """Taken, renewed or released by someone since it was listed, or not yet expired
    beyond ``expire + clock_skew`` by the wall clock; kept (``detail`` says which)."""
    UNREADABLE = "unreadable"
    """Not a lockfile blob-lock can read; never deleted by prune."""
    NO_CONDITIONAL_DELETE = "no_conditional_delete"
    """Old enough, but the store offers no conditional delete blob-lock can send (``detail``
    says why) and runs ``cas``: an unconditional delete held up in the network could delete
    a later holder's lockfile, so it is kept, untouched."""
    FAILED = "failed"
    """A store error ended the attempt (``detail`` says which); whatever prune took was
    released again, and the lockfile is kept."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Pruned:
    """One lock that ``prune_locks`` looked at: what it did, and the lock as listed."""

    uri: str
    outcome: PruneOutcome
    found: Inspection
    detail: str | None = None


def prune_locks(
    prefix: str | os.PathLike[str],
    *,
    older_than: Seconds,
    dry_run: bool = False,
    only: Collection[str] | None = None,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: CredentialProvider | object | None = None,
    clock_skew: Seconds | None = _CLOCK_SKEW,
) -> Iterator[Pruned]:
    """Deletes the lockfiles under ``prefix`` released or expired at least ``older_than``
    (seconds or a timedelta) ago, judged by both the writer's clock and the store's. Each is
    deleted only if it is unchanged since it was listed: it is taken through the protocol,
    as a waiter takes over a free lock, and deleted while held, so a lock someone took
    meanwhile is never deleted from under them; the delete is conditional on prune's own
    write, so a delete held up in the network cannot land on a later holder's lockfile (on
    a store that offers no conditional delete and runs ``cas``, lockfiles are kept:
    ``no_conditional_delete``). Held and unreadable lockfiles are kept. Yields what it did
    with each lock, page by page as the iterator is consumed (nothing is deleted before
    that); ``dry_run`` writes nothing. ``only`` limits the deletions to those lock URIs (the
    ones a person confirmed after a dry run); the others are judged as in a dry run.

    Fencing tokens survive the delete: the next acquisition of a pruned lock starts a new
    lockfile's tokens from its wall clock (microseconds since the epoch), above the deleted
    one's, as long as the machines' wall clocks disagree by less than ``clock_skew`` (as
    ``BlobLock``'s, 60 s by default; None, not trusting wall clocks, counts as a day).
    prune keeps a lockfile whose last acquisition is more recent than that plus its
    ``expire`` (``too_recent``).
    """
    if older_than is None:
        raise TypeError("older_than must be seconds (a number) or a timedelta, got None")
    if not isinstance(dry_run, bool):
        raise TypeError(f"dry_run must be a bool, got {dry_run!r}")
    if only is not None and (isinstance(only, str) or not all(isinstance(u, str) for u in only)):
        raise TypeError(f"only must be a collection of lock URIs (str), got {only!r}")
    chosen = None if only is None else set(only)
    inventory = _inventory(prefix, storage_options, credential_provider, clock_skew=clock_skew)
    return _prune(inventory, older_than, dry_run, chosen)


def _prune(
    inventory: _blob_lock.NativeInventory,
    older_than: Seconds,
    dry_run: bool,
    only: set[str] | None,
) -> Iterator[Pruned]:
    """``prune_locks``, deleting only the URIs in ``only`` when given (the ones a person
    confirmed); the others are judged as in a dry run."""
    age = seconds("older_than", older_than)
    if age < 0:
        raise ValueError(f"older_than must be zero or more seconds, got {age}")

    def pages() -> Iterator[Pruned]:
        while page := inventory.next_page(age, not dry_run, only):
            for entry in page:
                assert entry.prune is not None  # each is judged when older_than is given
                yield Pruned(
                    uri=entry.uri,
                    outcome=PruneOutcome(entry.prune),
                    found=_entry(entry),
                    detail=entry.prune_detail,
                )

    return pages()
