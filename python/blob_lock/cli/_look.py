"""The commands that look after a lock without running anything under it: ``status``,
``wait``, ``break`` and ``doctor``."""

from __future__ import annotations

import argparse
import json
import sys

from blob_lock import (
    BlobSemaphore,
    BreakOutcome,
    LockState,
    LockTimeout,
    break_lock,
    credential_source,
    doctor,
    inspect,
    wait_free,
)
from blob_lock.cli._exits import EXIT_REFUSED, EXIT_TIMEOUT
from blob_lock.cli._parser import storage_options
from blob_lock.cli._progress import Progress
from blob_lock.cli._semaphore import refused_at_semaphore, semaphore_json, show_semaphore
from blob_lock.cli._signals import Signalled, handle_signals, raise_signalled, restore


def status_command(args: argparse.Namespace) -> int:
    """``blob-lock status``: one read of the lock and one of ``URI/semaphore.json``, shown."""
    options = storage_options(args)
    seen = inspect(args.uri, storage_options=options)
    # A semaphore's prefix, perhaps: one more read. Where a plain lock was taken there too (a
    # `run` without --slots, before such runs were refused), both are shown: the lock alone
    # would hide the semaphore, whose slots' holders never take it.
    stored = BlobSemaphore(args.uri, 1, storage_options=options).stored()
    if stored is not None and seen.state == LockState.UNLOCKED:
        show_semaphore(args.uri, stored, options, args.json)
        return 0
    if args.json:
        body = seen.to_json()
        if stored is not None:
            body["semaphore_here"] = semaphore_json(args.uri, stored, options)
        print(json.dumps(body, indent=2))
        return 0
    print(seen.describe())
    if seen.written_at is not None:
        print(f"  last written {seen.written_at.isoformat()} (expire_s {seen.expire_s:g})")
    if seen.released_at is not None:
        print(f"  released {seen.released_at.isoformat()}")
    if stored is not None:
        print("  a plain lock at a semaphore's prefix, which no holder of a slot takes:")
        show_semaphore(args.uri, stored, options)
    return 0


def wait_command(args: argparse.Namespace) -> int:
    """``blob-lock wait``: until the lock is free, taking nothing."""
    options = storage_options(args)
    refused = refused_at_semaphore("wait", args.uri, options)
    if refused is not None:
        return refused
    previous = handle_signals(raise_signalled)
    try:
        with Progress(args.uri, options, timeout=args.timeout):
            seen = wait_free(args.uri, timeout=args.timeout, storage_options=options)
    except LockTimeout as e:
        print(f"blob-lock: {e}", file=sys.stderr)
        return EXIT_TIMEOUT
    except Signalled as s:
        return 128 + s.signum
    finally:
        restore(previous)
    print(seen.describe())
    return 0


def _ask(question: str) -> bool:
    if not sys.stdin.isatty():
        print(
            f"blob-lock: {question} -- not at a terminal: pass --yes to break it", file=sys.stderr
        )
        return False
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def break_command(args: argparse.Namespace) -> int:
    """``blob-lock break``: the acquisition that one read shows, if it still holds."""
    options = storage_options(args)
    refused = refused_at_semaphore("break", args.uri, options)
    if refused is not None:
        return refused
    seen = inspect(args.uri, storage_options=options)
    if seen.owner is None or seen.state.value == "released":
        print(f"nothing to break: {seen.describe()}")
        return 0
    if not args.yes and not _ask(f"break the lock? {seen.describe()}"):
        return EXIT_REFUSED
    broken = break_lock(args.uri, owner=seen.owner, token=seen.token, storage_options=options)
    if broken.outcome is BreakOutcome.BROKEN:
        print(f"broke {seen.describe()}")
        return 0
    if broken.outcome is BreakOutcome.CHANGED and broken.found is not None:
        print(
            "blob-lock: not broken: the lock changed hands meanwhile; now "
            f"{broken.found.describe()}",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    print(f"nothing to break: {broken.outcome.value.replace('_', ' ')}")
    return 0


def doctor_command(args: argparse.Namespace) -> int:
    """``blob-lock doctor``: is cas safe on this store?"""
    options = storage_options(args)
    if not args.json:
        # Before any request: when the store refuses them, this line says whose they were.
        print(f"probing {args.uri}")
        print(f"  credentials: {credential_source(args.uri, options)}", flush=True)
    report = doctor(
        args.uri,
        storage_options=options,
        race=args.race,
        racers=args.racers,
        rounds=args.rounds,
    )
    if args.json:
        out = {k: v for k, v in report.__dict__.items() if k not in ("probes", "race")}
        out["probes"] = [p.__dict__ for p in report.probes]
        out["race"] = (
            {**report.race.__dict__, "verdict": report.race.verdict()}
            if report.race is not None
            else None
        )
        out["verdict"] = report.verdict()
        print(json.dumps(out, indent=2))
    else:
        print(f"  scratch lock: {report.scratch}")
        for p in report.probes:
            mark = "ok  " if p.ok else "FAIL"
            print(f"  {mark} {p.name:<30} {p.seconds * 1000:8.1f} ms  {p.detail}")
        if report.race is not None:
            r = report.race
            mark = "ok  " if r.cas_safe else "FAIL"
            print(
                f"  {mark} {'race ' + str(r.racers) + ' clients':<30} {r.seconds * 1000:8.1f} ms  "
                f"{r.rounds} rounds, {r.create_doubles + r.update_doubles} with two winners, "
                f"{r.errors} failed writes"
            )
            if not r.cas_safe:
                print(f"       {r.verdict()}")
        print(report.verdict())
    return 0 if report.cas_safe else EXIT_REFUSED
