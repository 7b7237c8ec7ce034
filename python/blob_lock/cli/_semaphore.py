"""What the command line shows and does at a semaphore's prefix: ``status PREFIX`` shows its
slots, ``slots PREFIX N`` changes their number. (``run --slots`` takes one: ``_run.py``.)"""

from __future__ import annotations

import argparse
import json

from blob_lock import BlobSemaphore, LockState, SemaphoreConfig, list_locks
from blob_lock.cli._parser import storage_options


def slots_command(args: argparse.Namespace) -> int:
    """``blob-lock slots PREFIX N``: stores N as the number of slots."""
    options = storage_options(args)
    semaphore = BlobSemaphore(args.uri, args.number, storage_options=options)
    before = semaphore.stored()
    now = semaphore.set_slots(args.number)
    if before is None:
        print(f"{args.uri}: semaphore of {now.slots} slots (new)")
    elif before.slots == now.slots:
        print(f"{args.uri}: semaphore of {now.slots} slots (unchanged)")
    else:
        change = "raised" if now.slots > before.slots else "lowered"
        drain = (
            "; holders of the slots past it keep them until they release, "
            "and no one takes them anew"
            if now.slots < before.slots
            else ""
        )
        print(
            f"{args.uri}: semaphore of {now.slots} slots ({change} from {before.slots}, set by "
            f"{before.set_by} at {before.set_at}){drain}"
        )
    return 0


def show_semaphore(
    prefix: str, stored: SemaphoreConfig, options: dict[str, str] | None, as_json: bool = False
) -> None:
    """A semaphore's number and its slots, each as one read shows it (a slot past a lowered
    number still shows while its holder finishes); with ``as_json``, one JSON object: the
    configuration, how many are held, and each slot's inspection as ``status --json``
    prints a lock's."""
    listed = list_locks(prefix, storage_options=options)
    found = [(i, seen) for seen in listed if (i := _slot(prefix, seen.uri)) is not None]
    slots = [seen for _, seen in sorted(found, key=lambda f: f[0])]
    busy = sum(seen.state in (LockState.HELD, LockState.OURS) for seen in slots)
    if as_json:
        body = {
            "uri": prefix,
            "semaphore": {"slots": stored.slots, "set_by": stored.set_by, "set_at": stored.set_at},
            "held": busy,
            "slot_locks": [seen.to_json() for seen in slots],
        }
        print(json.dumps(body, indent=2))
        return
    print(
        f"{prefix}: semaphore of {stored.slots} slots, {busy} held "
        f"(set by {stored.set_by} at {stored.set_at})"
    )
    for seen in slots:
        print(f"  {seen.describe()}")


def _slot(prefix: str, uri: str) -> int | None:
    """The index of the slot ``uri`` names under ``prefix`` (``PREFIX/slot-<i>``), if it does."""
    rest = uri[len(prefix.rstrip("/")) :]
    if not rest.startswith("/slot-") or not rest[6:].isdigit():
        return None
    return int(rest[6:])
