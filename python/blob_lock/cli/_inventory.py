"""The commands over every lock under a prefix: ``ls`` lists them, ``prune`` removes the
lockfiles released or expired long ago."""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import sys
import textwrap
from datetime import datetime, timezone

from blob_lock import (
    Inspection,
    LockState,
    Pruned,
    PruneOutcome,
    duration_text,
    list_locks,
    prune_locks,
)
from blob_lock.cli._exits import EXIT_ERROR, EXIT_REFUSED
from blob_lock.cli._parser import storage_options

# prune_locks's own default, as its signature states it (the CLI uses public names only).
_CLOCK_SKEW = inspect.signature(prune_locks).parameters["clock_skew"].default

FENCING_NOTE = (
    "Fencing tokens survive the delete: the next holder of a pruned lock starts its tokens "
    "from its wall clock (microseconds), above the deleted lockfile's, as long as machines' "
    "wall clocks disagree by less than --clock-skew."
)


def _idle(seen: Inspection, now: datetime) -> float | None:
    """Seconds since a lock was released, or since its last write expired."""
    if seen.state is LockState.RELEASED and seen.released_at is not None:
        return (now - seen.released_at).total_seconds()
    if seen.state is LockState.EXPIRED and seen.expires_in is not None:
        return -seen.expires_in
    return None


def _row(seen: Inspection, now: datetime) -> list[str]:
    if seen.state is LockState.INVALID:
        # The problem last, where a cell of any length leaves the columns in line.
        return [seen.state.value, "-", "-", "-", "-", seen.uri, f"({seen.problem})"]
    held_for, idle = seen.held_for(now), _idle(seen, now)
    age = held_for if held_for is not None else idle
    holder = (seen.owner or "-")[:12]
    if seen.hostname:
        holder += f"@{seen.hostname}"
    if seen.pid:
        holder += f":{seen.pid}"
    expires = (
        duration_text(seen.expires_in)
        if seen.expires_in is not None and seen.expires_in > 0
        else "-"
    )
    labels = ",".join(f"{k}={v}" for k, v in seen.labels.items())
    return [
        seen.state.value,
        str(seen.token) if seen.token is not None else "-",
        duration_text(age) if age is not None else "-",
        expires,
        holder,
        seen.uri,
        labels,
    ]


HEADER = ["STATE", "TOKEN", "AGE", "EXPIRES", "HOLDER", "URI", "LABELS"]
# Rows are printed as they are read, so the widths are fixed: a token is its writer's wall
# clock in microseconds, or a little more (16 digits until the year 2286).
WIDTHS = [9, 16, 8, 8, 36, 0, 0]


def _print_row(cells: list[str]) -> None:
    line = " ".join(c.ljust(w) if w else c for c, w in zip(cells, WIDTHS))
    print(line.rstrip(), flush=True)


def ls_command(args: argparse.Namespace) -> int:
    """``blob-lock ls``: every lock under the prefix, a line each as it is read."""
    locks = list_locks(args.uri, state=args.state, storage_options=storage_options(args))
    # The first page before the header: a listing that fails says only why.
    first = next(locks, None)
    if not args.json:
        _print_row(HEADER)
    for seen in itertools.chain([first] if first is not None else [], locks):
        if args.json:
            print(json.dumps(seen.to_json()), flush=True)
        else:
            _print_row(_row(seen, datetime.now(timezone.utc)))
    return 0


def _ask(question: str) -> bool:
    """Asks on standard error (standard output may be a pipe), answered on standard input."""
    if not sys.stdin.isatty():
        print(f"blob-lock: {question} -- not at a terminal: pass --yes", file=sys.stderr)
        return False
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def _deletable_in(kept: Pruned, older_than: float, skew: float, now: datetime) -> float | None:
    """Seconds until prune may delete a lockfile it kept as too recent, by this machine's
    clock: once released or expired ``older_than`` ago, and once its last acquisition (its
    token, microseconds by its writer's clock, or more) is older than ``skew`` plus its
    expire (src/inventory.rs, ``judge``). None when the lockfile does not say."""
    seen, waits = kept.found, []
    idle = _idle(seen, now)
    if idle is not None:
        waits.append(older_than - idle)
    if seen.state is LockState.RELEASED and seen.last_modified is not None:
        waits.append(older_than - (now - seen.last_modified).total_seconds())  # the store's
    if seen.token is not None and seen.expire_s is not None:
        waits.append((seen.token + 1) / 1e6 + skew + seen.expire_s - now.timestamp())
    return max(waits) if waits else None


def _too_recent(older_than: float, skew: float, soonest: float | None) -> str:
    """Why lockfiles were kept as too recent, and when to prune again."""
    when = (
        "Run prune again later."
        if soonest is None
        else f"The first may be deleted in about {duration_text(soonest)}: run prune again then."
    )
    return textwrap.fill(
        "prune deletes a lockfile once it was released or expired at least --older-than "
        f"({duration_text(older_than)}) ago and its last acquisition is older than "
        f"--clock-skew ({duration_text(skew)}) plus its expire: deleted sooner, the next "
        f"holder's fencing tokens could start below its last. {when}",
        width=88,
        initial_indent="  ",
        subsequent_indent="  ",
        break_on_hyphens=False,
    )


def prune_command(args: argparse.Namespace) -> int:
    """``blob-lock prune``: deletes lockfiles released or expired longer ago than
    ``--older-than``; without ``--yes``, shows them and asks first."""
    options = storage_options(args)
    skew = {"clock_skew": args.clock_skew} if hasattr(args, "clock_skew") else {}
    allowance = skew.get("clock_skew", _CLOCK_SKEW)
    age = duration_text(args.older_than)
    # What was shown and confirmed is all that may be deleted: a lock that ages past
    # --older-than while the question is read waits for the next prune.
    confirmed: set[str] | None = None
    # The soonest a lockfile kept as too recent may be deleted (None: none kept, or unknown).
    too_recent, soonest = 0, None

    def kept_too_recent(p: Pruned) -> None:
        nonlocal too_recent, soonest
        too_recent += 1
        wait = _deletable_in(p, args.older_than, allowance, datetime.now(timezone.utc))
        if wait is not None:
            soonest = wait if soonest is None else min(soonest, wait)

    if not args.yes:
        confirmed = set()
        for p in prune_locks(
            args.uri, older_than=args.older_than, dry_run=True, storage_options=options, **skew
        ):
            if p.outcome is PruneOutcome.WOULD_DELETE:
                confirmed.add(p.uri)
                print(f"would delete {p.found.describe()}", flush=True)
            elif p.outcome is PruneOutcome.TOO_RECENT:
                kept_too_recent(p)
        if not confirmed and too_recent:
            s = "s" if too_recent > 1 else ""
            print(f"nothing to delete yet under {args.uri}: {too_recent} lockfile{s} too recent")
            print(_too_recent(args.older_than, allowance, soonest))
            return 0
        if not confirmed:
            print(f"nothing released or expired more than {age} ago under {args.uri}")
            return 0
        print(FENCING_NOTE, file=sys.stderr)
        if not _ask(f"delete these {len(confirmed)} lockfiles?"):
            return EXIT_REFUSED
    counts: dict[PruneOutcome, int] = {}
    for p in prune_locks(
        args.uri, older_than=args.older_than, only=confirmed, storage_options=options, **skew
    ):
        if confirmed is not None and p.uri not in confirmed:
            continue
        counts[p.outcome] = counts.get(p.outcome, 0) + 1
        if p.outcome is PruneOutcome.TOO_RECENT:
            kept_too_recent(p)
        if p.outcome is PruneOutcome.DELETED:
            print(f"deleted {p.found.describe()}", flush=True)
        elif p.outcome in (
            PruneOutcome.CHANGED,
            PruneOutcome.UNREADABLE,
            PruneOutcome.NO_CONDITIONAL_DELETE,
            PruneOutcome.FAILED,
        ):
            print(f"kept {p.uri}: {p.outcome.value}, {p.detail}", flush=True)
    kept = {
        o.value.replace("_", " "): n for o, n in counts.items() if o is not PruneOutcome.DELETED
    }
    summary = f"deleted {counts.get(PruneOutcome.DELETED, 0)} lockfiles"
    if kept:
        summary += "; kept " + ", ".join(f"{n} {what}" for what, n in sorted(kept.items()))
    print(summary)
    if counts.get(PruneOutcome.TOO_RECENT):
        print(_too_recent(args.older_than, allowance, soonest))
    return EXIT_ERROR if counts.get(PruneOutcome.FAILED) else 0
