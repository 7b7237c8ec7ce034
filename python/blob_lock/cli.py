"""The blob-lock command: ``blob-lock run URI -- COMMAND...`` holds a lock while a command runs.

Exit codes: the command's own code (128 + N when signal N ended it, as shells report it);
75 when the lock was not acquired within ``--timeout`` (EX_TEMPFAIL, as flock(1) uses for a
failed wait); 127 when the command cannot be started; 2 for bad arguments; 1 for store and
lockfile errors; 128 + N when signal N came before the lock was acquired.

SIGTERM, SIGINT and SIGHUP are passed on to the command; the lock is released once the
command has ended, so that nobody else starts while it is still cleaning up. (A Ctrl-C at a
terminal reaches the command from the terminal as well, so it sees SIGINT twice.)
"""

from __future__ import annotations

import argparse
import logging
import signal
import subprocess
import sys

from blob_lock._lock import BlobLock
from blob_lock.exceptions import LockError, LockTimeout

EXIT_TIMEOUT = 75
EXIT_CANNOT_RUN = 127
PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _Signalled(BaseException):
    """A signal came while waiting for the lock: stop waiting (nothing is held)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="blob-lock",
        description="A lease lock on blob stores (s3://, az://, gs://, file:// or a path, memory://).",
    )
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="hold a lock while a command runs",
        description=(
            "Acquire the lock at URI, keep it alive while COMMAND runs, release it, and exit "
            "with COMMAND's exit code (75 if the lock was not acquired within --timeout)."
        ),
    )
    run.add_argument("uri", metavar="URI", help="lock URI; the lockfile is URI/lock.json")
    run.add_argument(
        "cmd", metavar="COMMAND", nargs="*", help="the command and its arguments, after --"
    )
    run.add_argument("--expire", type=float, default=30.0, help="seconds (default 30)")
    run.add_argument(
        "--timeout", type=float, default=None, help="seconds to wait (default: for ever)"
    )
    run.add_argument("--protocol", choices=["auto", "cas", "lww"], default="auto")
    run.add_argument("-v", "--verbose", action="store_true", help="log lock activity")
    return p


def _run(args: argparse.Namespace, cmd: list[str]) -> int:
    if not cmd:
        print("blob-lock run: no command given (blob-lock run URI -- COMMAND...)", file=sys.stderr)
        return 2
    lock = BlobLock(args.uri, expire=args.expire, timeout=args.timeout, protocol=args.protocol)
    # Before the lock is held a signal ends the wait; once it is held, signals go to the
    # command, or wait for it to start if they come first (never lost, never unlocked).
    child: subprocess.Popen | None = None
    held = False
    pending: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        if child is not None:
            child.send_signal(signum)
        elif held:
            pending.append(signum)
        else:
            raise _Signalled(signum)

    previous = {s: signal.signal(s, on_signal) for s in PASSED_ON}
    try:
        try:
            lock.__enter__()  # raises LockTimeout naming the holder
            held = True
        except LockTimeout as e:
            print(f"blob-lock: {e}", file=sys.stderr)
            return EXIT_TIMEOUT
        except _Signalled as s:
            held = True  # from here on signals wait; release what may have been written
            lock.release()
            return 128 + s.signum
        try:
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
            lost = lock._release_noting_loss(raise_lost=False)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if lost:
        print(
            f"blob-lock: warning: the lock was lost while the command ran: {lost}", file=sys.stderr
        )
    return code


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first "--" is the command, options and all; argparse would
    # otherwise read the command's own options (or ours placed after URI) wrongly.
    cmd: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, cmd = argv[:cut], argv[cut + 1 :]
    args = _parser().parse_args(argv)
    cmd = cmd or list(getattr(args, "cmd", None) or [])
    if args.verbose:
        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")
    try:
        return _run(args, cmd)
    except ValueError as e:
        print(f"blob-lock: {e}", file=sys.stderr)
        return 2
    except LockError as e:
        print(f"blob-lock: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
