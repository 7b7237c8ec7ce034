"""What the command line shows and does at a semaphore's prefix: ``status PREFIX`` shows its
slots, ``slots PREFIX N`` changes their number, and ``run`` (without ``--slots``), ``wait`` and
``break`` refuse there. (``run --slots`` takes one: ``_run.py``.)"""

from __future__ import annotations

import argparse
import json
import sys

from blob_lock import (
    BlobSemaphore,
    Inspection,
    LockState,
    SemaphoreConfig,
    StoreError,
    list_locks,
)
from blob_lock.cli._exits import EXIT_USAGE
from blob_lock.cli._parser import storage_options


def slots_text(n: int) -> str:
    """``1 slot``, ``2 slots``."""
    return "1 slot" if n == 1 else f"{n} slots"


def refused_at_semaphore(command: str, uri: str, options: dict[str, str] | None) -> int | None:
    """``run`` without ``--slots``, ``wait`` and ``break`` at a semaphore's prefix would take,
    watch or break a plain lock there that no holder of a slot uses (``wait`` would say
    "unlocked" while every slot is held, and a plain lockfile would hide the semaphore from
    ``status``): they refuse, naming the semaphore and the command meant. One read of
    ``URI/semaphore.json``, which writes nothing: all it costs a plain lock. EXIT_USAGE
    after saying so, or None where there is no semaphore."""
    stored = BlobSemaphore(uri, 1, storage_options=options).stored()
    if stored is None:
        return None
    n, prefix = stored.slots, uri.rstrip("/") or uri
    take = f"blob-lock run --slots {n} {prefix} -- COMMAND ..."
    meant = {
        "run": f"to hold one of its slots while a command runs: {take}",
        "wait": (
            "wait watches a plain lock, which no holder of a slot takes; to run a command "
            f"once a slot is free: {take}; to wait for one slot: blob-lock wait {prefix}/slot-<i>"
        ),
        "break": f"to break one slot's holder: blob-lock break {prefix}/slot-<i>",
    }[command]
    print(
        f"blob-lock {command}: {prefix} is a semaphore of {slots_text(n)} "
        f"({prefix}/semaphore.json), not a lock: {meant}; its slots and their holders: "
        f"blob-lock status {prefix}",
        file=sys.stderr,
    )
    return EXIT_USAGE


def slots_command(args: argparse.Namespace) -> int:
    """``blob-lock slots PREFIX N``: stores N as the number of slots."""
    options = storage_options(args)
    semaphore = BlobSemaphore(args.uri, args.number, storage_options=options)
    try:
        before = semaphore.stored()
        unreadable = None
    except StoreError as e:
        # What the error of an unreadable configuration says to run: the number is written
        # over it. (A store that refuses the read refuses the write too, and says why.)
        if e.transient:
            raise
        before, unreadable = None, e
    now = semaphore.set_slots(args.number)
    if unreadable is not None:
        print(
            f"{args.uri}: semaphore of {slots_text(now.slots)} (written over "
            f"{args.uri.rstrip('/')}/semaphore.json, which could not be read)"
        )
    elif before is None:
        print(f"{args.uri}: semaphore of {slots_text(now.slots)} (new)")
    elif before.slots == now.slots:
        print(f"{args.uri}: semaphore of {slots_text(now.slots)} (unchanged)")
    else:
        change = "raised" if now.slots > before.slots else "lowered"
        drain = (
            "; holders of the slots past it keep them until they release, "
            "and no one takes them anew"
            if now.slots < before.slots
            else ""
        )
        print(
            f"{args.uri}: semaphore of {slots_text(now.slots)} ({change} from {before.slots}, "
            f"set by {before.set_by} at {before.set_at}){drain}"
        )
    return 0


def _slots(
    prefix: str, stored: SemaphoreConfig, options: dict[str, str] | None
) -> tuple[list[tuple[int, Inspection]], int, set[int]]:
    """A semaphore's slots as one listing shows them, by index; how many are held; and which
    drain: held at or above the number (lowered while they were held), kept until their
    holders release them and not taken anew."""
    listed = list_locks(prefix, storage_options=options)
    found = [(i, seen) for seen in listed if (i := _slot(prefix, seen.uri)) is not None]
    slots = sorted(found, key=lambda f: f[0])

    def held(seen: Inspection) -> bool:
        return seen.state in (LockState.HELD, LockState.OURS)

    busy = sum(held(seen) for _, seen in slots)
    return slots, busy, {i for i, seen in slots if i >= stored.slots and held(seen)}


def semaphore_json(
    prefix: str, stored: SemaphoreConfig, options: dict[str, str] | None
) -> dict[str, object]:
    """What ``status --json`` prints at a semaphore's prefix: the configuration, how many
    slots are held and draining, and each slot's inspection as ``status --json`` prints a
    lock's, with its index and whether it drains."""
    slots, busy, draining = _slots(prefix, stored, options)
    return {
        "uri": prefix,
        "semaphore": {"slots": stored.slots, "set_by": stored.set_by, "set_at": stored.set_at},
        "held": busy,
        "draining": len(draining),
        "slot_locks": [
            {**seen.to_json(), "slot": i, "draining": i in draining} for i, seen in slots
        ],
    }


def show_semaphore(
    prefix: str, stored: SemaphoreConfig, options: dict[str, str] | None, as_json: bool = False
) -> None:
    """A semaphore's number and its slots, each as one read shows it, a slot that drains
    marked so; with ``as_json``, :func:`semaphore_json`."""
    if as_json:
        print(json.dumps(semaphore_json(prefix, stored, options), indent=2))
        return
    slots, busy, draining = _slots(prefix, stored, options)
    n = stored.slots
    also = f", {len(draining)} draining" if draining else ""
    print(
        f"{prefix}: semaphore of {slots_text(n)}, {busy} held{also} "
        f"(set by {stored.set_by} at {stored.set_at})"
    )
    for i, seen in slots:
        mark = (
            f" (draining: the number stored is {n}; kept until its holder releases it, "
            "then not taken anew)"
            if i in draining
            else ""
        )
        print(f"  {seen.describe()}{mark}")


def _slot(prefix: str, uri: str) -> int | None:
    """The index of the slot ``uri`` names under ``prefix`` (``PREFIX/slot-<i>``), if it does."""
    rest = uri[len(prefix.rstrip("/")) :]
    if not rest.startswith("/slot-") or not rest[6:].isdigit():
        return None
    return int(rest[6:])
