"""The blob-lock command: flock(1) for blob stores, and the tools to look after a lock.

    blob-lock run URI [--expire S] [--timeout S] [--no-wait] -- COMMAND...
    blob-lock status URI [--json]
    blob-lock wait URI [--timeout S]
    blob-lock break URI [--yes]
    blob-lock doctor URI [--json] [--race [--racers N] [--rounds N]]

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

While ``run`` or ``wait`` waits, it shows who holds the lock and for how long: on a terminal
one line on standard error, updated in place each second; otherwise a line every 30 s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TextIO

from blob_lock import __version__, _args, _blob_lock
from blob_lock._inspect import Inspection, _inspection, doctor
from blob_lock._lock import BlobLock
from blob_lock.exceptions import LockError, LockTimeout

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_LOST = 4
EXIT_TIMEOUT = 75
# A reader of our output went away (`| head`): as a program killed by SIGPIPE exits.
EXIT_PIPE = 128 + signal.SIGPIPE
EXIT_CANNOT_RUN = 127
PASSED_ON = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Seconds between progress lines when standard error is not a terminal.
LOG_EVERY = 30.0


class _Signalled(BaseException):
    """A signal came while waiting for the lock: stop waiting (nothing is held)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Progress:
    """Shows who holds the lock while we wait for it: on a terminal one line updated in
    place each second, otherwise a line every ``LOG_EVERY`` seconds. Reads the lockfile on
    a thread of its own (one read a second); never writes. Its reads are awaitables on an
    event loop of its own, cancelled at the end: a read hanging on a store that does not
    answer holds up nothing (a Ctrl-C ends the command at once)."""

    def __init__(self, native: _blob_lock.NativeLock, out: TextIO | None = None) -> None:
        # None when the command started with standard error closed: then nothing is shown.
        out = sys.stderr if out is None else out
        self._native, self._out = native, out
        try:
            self._tty = out is not None and out.isatty()
        except ValueError:  # standard error is closed
            self._tty = False
        self._stop = threading.Event()
        self._began = time.monotonic()
        self._loop = asyncio.new_event_loop()
        self._look: asyncio.Future[Any] | None = None
        self._thread = threading.Thread(target=self._run, name="blob-lock progress", daemon=True)

    def __enter__(self) -> _Progress:
        if self._out is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with contextlib.suppress(RuntimeError):  # its loop closed: the thread ended already
            self._loop.call_soon_threadsafe(self._cancel)
        if self._thread.is_alive():
            self._thread.join(1.0)
        elif not self._thread.ident:  # never started
            self._loop.close()
        if self._tty and self._out is not None:
            try:
                self._out.write("\r\x1b[K")
                self._out.flush()
            except (BrokenPipeError, ValueError):
                pass

    def _cancel(self) -> None:
        if self._look is not None:
            self._look.cancel()

    async def _inspect(self) -> Inspection:
        self._look = asyncio.ensure_future(self._native.inspect_async())
        return _inspection(self._native.uri, await self._look, None)

    def _run(self) -> None:
        try:
            self._show()
        finally:
            self._loop.close()

    def _show(self) -> None:
        out = self._out
        if out is None:
            return
        # The first look after a second: an uncontended acquisition shows nothing.
        every = 1.0 if self._tty else LOG_EVERY
        while not self._stop.wait(1.0 if self._tty else min(1.0, every)):
            try:
                line = self._line(self._loop.run_until_complete(self._inspect()))
            except asyncio.CancelledError:
                return
            except Exception as e:  # a failed look must not end the wait
                line = f"waiting {time.monotonic() - self._began:.0f}s; cannot read the lock: {e}"
            try:
                if self._tty:
                    out.write("\r\x1b[K" + line[:200])
                    out.flush()
                else:
                    stamp = datetime.now().strftime("%H:%M:%S")
                    out.write(f"{stamp} blob-lock: {line}\n")
                    out.flush()
            except (BrokenPipeError, ValueError):  # nobody reads standard error any more
                return
            if not self._tty and self._stop.wait(every - 1.0):
                return

    def _line(self, seen: Inspection) -> str:
        waited = time.monotonic() - self._began
        return f"waiting {waited:.0f}s for {seen.describe()}"


def _storage_options(pairs: list[str] | None) -> dict[str, str] | None:
    if not pairs:
        return None
    out = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ValueError(f"--storage-option takes KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def _parser() -> argparse.ArgumentParser:
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


def _native(args: argparse.Namespace) -> _blob_lock.NativeLock:
    return _blob_lock.NativeLock(
        args.uri,
        expire=30.0,
        heartbeat=None,
        protocol="auto",
        storage_options=_args.storage_options(_storage_options(args.storage_option)),
        settle=None,
        clock_skew=60.0,  # `wait` judges expiry as a BlobLock with defaults would
        on_lost=None,
    )


def _look(native: _blob_lock.NativeLock) -> Callable[[], Inspection]:
    return lambda: _inspection(native.uri, native.inspect(), None)


def _handle_signals(on_signal: Callable[[int, Any], None]) -> Mapping[int, Any]:
    return {s: signal.signal(s, on_signal) for s in PASSED_ON}


def _restore(previous: Mapping[int, Any]) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)


def _raise_signalled(signum: int, _frame: object) -> None:
    raise _Signalled(signum)


def _run(args: argparse.Namespace, cmd: list[str]) -> int:
    if not cmd:
        print("blob-lock run: no command given (blob-lock run URI -- COMMAND...)", file=sys.stderr)
        return EXIT_USAGE
    lock = BlobLock(
        args.uri,
        expire=args.expire,
        timeout=args.timeout,
        protocol=args.protocol,
        storage_options=_storage_options(args.storage_option),
    )
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
            raise _Signalled(signum)

    previous = _handle_signals(on_signal)
    try:
        try:
            if not args.wait:
                if not lock.try_acquire():
                    print(f"blob-lock: {lock.inspect().describe()}", file=sys.stderr)
                    return EXIT_TIMEOUT
            else:
                with _Progress(lock._native):
                    lock.__enter__()  # raises LockTimeout naming the holder
            held = True
        except LockTimeout as e:
            print(f"blob-lock: {e}", file=sys.stderr)
            return EXIT_TIMEOUT
        except _Signalled as s:
            # Nothing is held. What the interrupted attempt may have written is being
            # released in the background; the exit gives that a moment (blob_lock's atexit).
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
        _restore(previous)
    if lost:
        print(
            f"blob-lock: warning: the lock was lost while the command ran: {lost}", file=sys.stderr
        )
        if code == 0:
            return EXIT_LOST
    return code


def _status(args: argparse.Namespace) -> int:
    seen = _look(_native(args))()
    if args.json:
        print(json.dumps(seen.to_json(), indent=2))
    else:
        print(seen.describe())
        if seen.written_at is not None:
            print(f"  last written {seen.written_at.isoformat()} (expire_s {seen.expire_s:g})")
        if seen.released_at is not None:
            print(f"  released {seen.released_at.isoformat()}")
    return 0


def _wait(args: argparse.Namespace) -> int:
    native = _native(args)
    previous = _handle_signals(_raise_signalled)
    try:
        with _Progress(native):
            d = native.wait_free(args.timeout)
    except LockTimeout as e:
        print(f"blob-lock: {e}", file=sys.stderr)
        return EXIT_TIMEOUT
    except _Signalled as s:
        return 128 + s.signum
    finally:
        _restore(previous)
    print(_inspection(native.uri, d, None).describe())
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


def _break(args: argparse.Namespace) -> int:
    native = _native(args)
    seen = _look(native)()
    if seen.owner is None or seen.state.value == "released":
        print(f"nothing to break: {seen.describe()}")
        return 0
    if not args.yes and not _ask(f"break the lock? {seen.describe()}"):
        return EXIT_REFUSED
    outcome, lockfile = native.break_lock(seen.owner, seen.token)
    if outcome == "broken":
        print(f"broke {seen.describe()}")
        return 0
    if outcome == "changed" and lockfile is not None:
        now = _inspection(native.uri, {"state": "held", **lockfile}, None)
        print(
            f"blob-lock: not broken: the lock changed hands meanwhile; now {now.describe()}",
            file=sys.stderr,
        )
        return EXIT_REFUSED
    print(f"nothing to break: {outcome.replace('_', ' ')}")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    report = doctor(
        args.uri,
        storage_options=_storage_options(args.storage_option),
        race=args.race,
        racers=args.racers,
        rounds=args.rounds,
    )
    if args.json:
        out = {k: v for k, v in report.__dict__.items() if k not in ("probes", "race")}
        out["probes"] = [p.__dict__ for p in report.probes]
        out["race"] = report.race.__dict__ if report.race is not None else None
        out["verdict"] = report.verdict()
        print(json.dumps(out, indent=2))
    else:
        print(f"probing {report.uri} on the scratch lock {report.scratch}")
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
        args = _parser().parse_args(argv)
        verbose = args.verbose
        cmd = cmd or list(getattr(args, "cmd", None) or [])
        if args.verbose:
            logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(message)s")
        if args.uri.strip().lower().startswith("memory://"):
            print(
                "blob-lock: warning: a memory:// store lives inside one process; no other "
                "process sees this lock",
                file=sys.stderr,
            )
        commands: dict[str, Callable[[], int]] = {
            "run": lambda: _run(args, cmd),
            "status": lambda: _status(args),
            "wait": lambda: _wait(args),
            "break": lambda: _break(args),
            "doctor": lambda: _doctor(args),
        }
        code = commands[args.command]()
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


if __name__ == "__main__":
    sys.exit(main())
