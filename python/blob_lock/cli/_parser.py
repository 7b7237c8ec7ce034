"""The command line: its parser, and the storage options it takes."""

from __future__ import annotations

import argparse

from blob_lock import __version__


def storage_options(args: argparse.Namespace) -> dict[str, str] | None:
    """The ``-o KEY=VALUE`` options of a command, or None."""
    pairs: list[str] | None = args.storage_option
    if not pairs:
        return None
    out = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ValueError(f"--storage-option takes KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def labels(args: argparse.Namespace) -> dict[str, str] | None:
    """The ``--label KEY=VALUE`` options of ``run``, or None."""
    pairs: list[str] | None = args.label
    if not pairs:
        return None
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ValueError(f"--label takes KEY=VALUE, got {pair!r}")
        if key in out:
            raise ValueError(f"--label {key} is given twice; give each label once")
        out[key] = value
    return out


def parser() -> argparse.ArgumentParser:
    """The `blob-lock` command line, with every command and its options."""
    p = argparse.ArgumentParser(
        prog="blob-lock",
        description=(
            "A lease lock on blob stores (s3://, az://, gs://, file:// or a path, memory://). "
            "Exit codes: 0 success, 1 store or lockfile error, 2 bad arguments, 75 not free "
            "within --timeout, 128+N ended by signal N; see each command's --help."
        ),
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help, description=description)
        c.add_argument("uri", metavar="URI", help="lock URI; the lockfile is URI/lock.json")
        c.add_argument(
            "-o",
            "--storage-option",
            action="append",
            metavar="KEY=VALUE",
            help="an object_store configuration key (repeatable), on top of the environment",
        )
        c.add_argument("-v", "--verbose", action="store_true", help="log lock activity")
        return c

    run = command(
        "run",
        "hold a lock while a command runs",
        "Acquire the lock at URI, keep it alive while COMMAND runs, release it, and exit with "
        "COMMAND's exit code (128+N if signal N ended it). 75 if the lock was not acquired "
        "within --timeout (or at once, with --no-wait); 127 if COMMAND cannot be started; 4 "
        "if COMMAND succeeded but the lock was lost while it ran (COMMAND's own failure "
        "code wins).",
    )
    run.add_argument(
        "cmd", metavar="COMMAND", nargs="*", help="the command and its arguments, after --"
    )
    run.add_argument("--expire", type=float, default=30.0, help="seconds (default 30)")
    run.add_argument(
        "--timeout", type=float, default=None, help="seconds to wait (default: for ever)"
    )
    run.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait for the lock (default); --no-wait makes one attempt and exits 75 if it is held",
    )
    run.add_argument("--protocol", choices=["auto", "cas", "lww"], default="auto")
    run.add_argument(
        "-l",
        "--label",
        action="append",
        metavar="KEY=VALUE",
        help="a label written into the lockfile and shown by status, ls, break and waiters "
        "(repeatable): who holds the lock and why, e.g. --label run=$RUN_ID",
    )

    status = command(
        "status",
        "show who holds a lock",
        "Read the lock once and show its state (unlocked, held, expired, released), holder, "
        "token and times. Never writes. Exit 0 whatever the state; 1 if it cannot be read.",
    )
    status.add_argument("--json", action="store_true", help="print one JSON object")

    wait = command(
        "wait",
        "wait until a lock is free",
        "Block until the lock is free to take (unlocked, released, or unchanged for its "
        "expire time), taking nothing. Exit 0 when free, 75 after --timeout.",
    )
    wait.add_argument(
        "--timeout", type=float, default=None, help="seconds to wait (default: for ever)"
    )

    brk = command(
        "break",
        "force-release a lock",
        "Mark the lock released whoever holds it, and print what was broken. Asks first "
        "unless --yes. The holder learns at its next heartbeat that it lost the lock. Exit 0 "
        "when broken or nothing to break; 3 when declined or the lock changed hands meanwhile.",
    )
    brk.add_argument("-y", "--yes", action="store_true", help="do not ask")

    doc = command(
        "doctor",
        "check that a store honours conditional writes",
        "Probe the store on a scratch lockfile beside URI (deleted afterwards): "
        "create-if-absent twice, read-after-write, update-if-match, a stale If-Match; show "
        "the latency of each call and whether the cas protocol is safe there. With --race, "
        "independent clients then race both conditional writes on scratch keys, round after "
        "round: more than one winner in a round means cas is not safe. Exit 0 when it is, "
        "3 when it is not, 1 if the store cannot be used at all.",
    )
    doc.add_argument("--json", action="store_true", help="print one JSON object")
    doc.add_argument(
        "--race", action="store_true", help="also race independent clients (see above)"
    )
    doc.add_argument("--racers", type=int, default=16, help="clients racing (default 16)")
    doc.add_argument(
        "--rounds",
        type=int,
        default=100,
        help="rounds to race (default 100); more racers and rounds find rarer races",
    )
    return p
