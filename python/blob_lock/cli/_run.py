"""``blob-lock run``: flock(1) for blob stores. Holds the lock while a command runs, passes
signals on to it, and releases the lock once the command has ended."""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys

from blob_lock import BlobLock, BlobSemaphore, LockTimeout
from blob_lock.cli._exits import EXIT_CANNOT_RUN, EXIT_LOST, EXIT_TIMEOUT, EXIT_USAGE
from blob_lock.cli._parser import labels, run_options, storage_options
from blob_lock.cli._progress import Progress
from blob_lock.cli._semaphore import refused_at_semaphore
from blob_lock.cli._signals import Signalled, handle_signals, restore


def run(args: argparse.Namespace, cmd: list[str]) -> int:
    """``blob-lock run``: holds the lock while the command runs."""
    if not cmd:
        print("blob-lock run: no command given (blob-lock run URI -- COMMAND...)", file=sys.stderr)
        return EXIT_USAGE
    options = storage_options(args)
    settings: dict[str, object] = {
        **run_options(args),
        "storage_options": options,
        "raise_on_lost": False,  # a loss is reported after the command (exit 4), not raised
        "labels": labels(args),
    }
    # The lock held while the command runs: the plain lock at URI, or a slot under it.
    semaphore, lock = None, None
    if args.slots is not None:
        semaphore = BlobSemaphore(args.uri, args.slots, **settings)  # type: ignore[arg-type]
    else:
        lock = BlobLock(args.uri, **settings)  # type: ignore[arg-type]
        # A semaphore's prefix is no lock: one read of its semaphore.json says which.
        refused = refused_at_semaphore("run", args.uri, options)
        if refused is not None:
            return refused
    # Before the lock is held a signal ends the wait; once it is held, signals go to the
    # command, or wait for it to start if they come first (never lost, never unlocked).
    child: subprocess.Popen[bytes] | None = None
    held = False
    pending: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        if child is not None:
            child.send_signal(signum)
        elif held:
            pending.append(signum)
        else:
            raise Signalled(signum)

    previous = handle_signals(on_signal)
    try:
        # Leaving this block releases the lock once the command has ended.
        with contextlib.ExitStack() as holding:
            try:
                if semaphore is not None:
                    slot = semaphore.acquire() if args.wait else semaphore.try_acquire()
                    if slot is None:
                        print(f"blob-lock: every slot of {args.uri} is held", file=sys.stderr)
                        return EXIT_TIMEOUT
                    holding.push(slot)
                    lock = slot
                elif lock is None:
                    raise AssertionError("neither a lock nor a semaphore")
                elif not args.wait:
                    if not lock.try_acquire():
                        print(f"blob-lock: {lock.inspect().describe()}", file=sys.stderr)
                        return EXIT_TIMEOUT
                    holding.push(lock)
                else:
                    with Progress(args.uri, options, timeout=getattr(args, "timeout", None)):
                        holding.enter_context(lock)  # raises LockTimeout naming the holder
                held = True
            except LockTimeout as e:
                print(f"blob-lock: {e}", file=sys.stderr)
                return EXIT_TIMEOUT
            except Signalled as s:
                # Nothing is held. What the interrupted attempt may have written is being
                # released in the background; the exit gives that a moment (blob_lock's atexit).
                return 128 + s.signum
            try:
                child = subprocess.Popen(cmd)
            except OSError as e:
                print(f"blob-lock: cannot run {cmd[0]!r}: {e}", file=sys.stderr)
                code = EXIT_CANNOT_RUN
            else:
                for signum in pending:
                    child.send_signal(signum)
                code = child.wait()
                if code < 0:  # ended by a signal
                    code = 128 - code
    finally:
        restore(previous)
    lost = lock.lost_reason if lock is not None else None  # decided by the release, kept after it
    if lost:
        print(
            f"blob-lock: warning: the lock was lost while the command ran: {lost}", file=sys.stderr
        )
        if code == 0:
            return EXIT_LOST
    return code
