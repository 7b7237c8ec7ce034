"""The blob-lock command: flock(1) for blob stores, and the tools to look after a lock.

    blob-lock run URI [--expire S] [--timeout S] [--no-wait] -- COMMAND...
    blob-lock status URI [--json]
    blob-lock slots PREFIX N
    blob-lock wait URI [--timeout S]
    blob-lock break URI [--yes]
    blob-lock doctor URI [--json] [--race [--racers N] [--rounds N]]
    blob-lock ls PREFIX [--json] [--state held|expired|released|invalid]
    blob-lock prune PREFIX --older-than DURATION [--yes]

Exit codes, for every command: 0 success; 1 a store or lockfile error (an unreachable
store among them); 2 bad arguments; 75 (EX_TEMPFAIL, as flock(1)) the lock was not free
within ``--timeout`` (or at once, with ``run --no-wait``); 128 + N when signal N ended the
wait. ``run`` exits with the command's own code (128 + N when signal N ended it), 127 when
the command cannot be started, and 4 when the command succeeded but the lock was lost while
it ran. ``break`` exits 3 when it broke nothing because it was declined or the lock changed
hands; ``doctor`` exits 3 when ``cas`` is not safe on the store.

``run`` passes SIGTERM, SIGINT and SIGHUP on to the command; the lock is released once the
command has ended, so that nobody else starts while it is still cleaning up. (A Ctrl-C at a
terminal reaches the command from the terminal as well, so it sees SIGINT twice.)

While ``run`` or ``wait`` waits, it shows who holds the lock, how long it has waited and the
most it will (``--timeout``): on a terminal one line on standard error, updated in place each
second; otherwise a line every 30 s. At a semaphore's prefix (``PREFIX/semaphore.json``),
``run`` without ``--slots``, ``wait`` and ``break`` refuse (exit 2), naming the command meant.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import TextIO

from blob_lock import store_kind
from blob_lock.cli._exits import EXIT_ERROR, EXIT_PIPE, EXIT_USAGE
from blob_lock.cli._inventory import ls_command, prune_command
from blob_lock.cli._look import break_command, doctor_command, status_command, wait_command
from blob_lock.cli._parser import parse
from blob_lock.cli._run import run
from blob_lock.cli._semaphore import slots_command
from blob_lock.exceptions import LockError

__all__ = ["main"]

#: Loggers of the libraries under the command, quiet unless -v.
QUIET_UNLESS_VERBOSE = ("azure", "botocore", "boto3", "google", "urllib3", "msal")


def _drop_if_unread(stream: TextIO | None) -> None:
    """Flushes ``stream``; if its reader went away (`2>&1 | head`), points it at os.devnull,
    where what it still holds is dropped at exit: Python 3.11.2 (Debian 12's) would fail that
    flush there and exit 120 in place of the command's status."""
    if stream is None:  # started with the descriptor closed
        return
    try:
        stream.flush()
    except (BrokenPipeError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


def main(argv: list[str] | None = None) -> int:
    """The ``blob-lock`` command; returns its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first "--" is the command, options and all; argparse would
    # otherwise read the command's own options (or ours placed after URI) wrongly.
    cmd: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, cmd = argv[:cut], argv[cut + 1 :]
    verbose = False
    try:
        try:
            args = parse(argv)
        except SystemExit:
            # --help and --version print, then exit: their output flushed here, where a closed
            # pipe is still told apart (at exit, Python 3.11.2, Debian 12's, would print a
            # BrokenPipeError and exit 120).
            sys.stdout.flush()
            raise
        verbose = args.verbose
        cmd = cmd or list(getattr(args, "cmd", None) or [])
        if args.verbose:
            logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")
        else:
            # The cloud libraries warn at length while a credential chain looks for
            # credentials (azure-identity: a paragraph per source); blob-lock's own error
            # says what was tried and what to do. -v shows theirs.
            for name in QUIET_UNLESS_VERBOSE:
                logging.getLogger(name).setLevel(logging.CRITICAL)
        if store_kind(args.uri.strip()) == "memory":
            print(
                "blob-lock: warning: a memory:// store lives inside one process; no other "
                "process sees this lock",
                file=sys.stderr,
            )
        commands: dict[str, Callable[[], int]] = {
            "run": lambda: run(args, cmd),
            "status": lambda: status_command(args),
            "slots": lambda: slots_command(args),
            "wait": lambda: wait_command(args),
            "break": lambda: break_command(args),
            "doctor": lambda: doctor_command(args),
            "ls": lambda: ls_command(args),
            "prune": lambda: prune_command(args),
        }
        code = commands[args.command]()
        _drop_if_unread(sys.stderr)
        sys.stdout.flush()  # here, where a closed pipe can still be told apart
        return code
    except BrokenPipeError:
        # The reader went away (`| head`): no traceback, and none at exit either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_PIPE
    except (ValueError, TypeError) as e:
        print(f"blob-lock: {e}", file=sys.stderr)
        return EXIT_USAGE
    except LockError as e:
        print(f"blob-lock: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    except Exception as e:  # a bug of ours: one line, the traceback with -v
        if verbose:
            raise
        print(
            f"blob-lock: unexpected error: {type(e).__name__}: {e} (-v shows where)",
            file=sys.stderr,
        )
        return EXIT_ERROR
