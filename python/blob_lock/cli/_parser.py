"""The command line: its parser, and the storage options it takes."""

from __future__ import annotations

import argparse
import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from blob_lock import LOCK_OPTIONS, LockOption, __version__
from blob_lock.cli._exits import COMMON, help_text, sentence

# The lock's options that `run` takes as flags: the seconds and the protocol, from their one
# definition (blob_lock._options), so that a new one is a flag with no change here.
RUN_OPTIONS = tuple(o for o in LOCK_OPTIONS if o.kind in ("seconds", "seconds_or_none", "protocol"))


def _help(option: LockOption) -> str:
    default = "" if option.default is None else f" (default {option.default})"
    return (option.doc.replace("`", "") + default).replace("%", "%%")


def run_options(args: argparse.Namespace) -> dict[str, object]:
    """The lock's options given to ``run`` as flags."""
    return {o.name: getattr(args, o.name) for o in RUN_OPTIONS if hasattr(args, o.name)}


def storage_options(args: argparse.Namespace) -> dict[str, str] | None:
    """The ``-o KEY=VALUE`` options of a command, or None."""
    pairs: list[str] | None = args.storage_option
    profile: str | None = getattr(args, "profile", None)
    if not pairs and not profile:
        return None
    out = {"aws_profile": profile} if profile else {}
    for pair in pairs or ():
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


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``12h``, ``7d`` or ``1.5h``, in seconds (argparse's type)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: write a number with s, m, h or d (90s, 30m, 12h, 7d)"
        )
    return float(m.group(1)) * _UNITS[m.group(2)]


#: Where the options that every command takes land when given before the command
#: (``blob-lock --profile prod status URI``, as ``aws --profile`` and ``git -C``): apart from
#: the command's own, then merged (``parse``), so that neither place overwrites the other.
_GLOBAL = "global_"


def _common(p: argparse.ArgumentParser, dest: str) -> None:
    """The options every command takes, before or after its name."""
    p.add_argument(
        "-o",
        "--storage-option",
        action="append",
        dest=f"{dest}storage_option",
        metavar="KEY=VALUE",
        help="an object_store configuration key (repeatable), on top of the environment",
    )
    p.add_argument(
        "--profile",
        dest=f"{dest}profile",
        metavar="NAME",
        help="the AWS profile for s3:// (as AWS_PROFILE), from ~/.aws",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        dest=f"{dest}verbose",
        help="log lock activity, and the store's and the cloud libraries' own messages",
    )


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line parsed, with the options given before the command merged into the
    command's: storage options from both places, the profile and -v from either."""
    p = parser()
    args, rest = p.parse_known_args(argv)
    if rest:  # before the command: unknown to the top level (a command's were refused)
        unknown = p.unknown(rest)
        if unknown:
            commands = next(a for a in p._actions if isinstance(a, _Commands)).choices
            p.refuse(unknown, commands)
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    before: list[str] = getattr(args, f"{_GLOBAL}storage_option") or []
    after: list[str] = args.storage_option or []
    args.storage_option = [*before, *after] or None
    args.profile = args.profile or getattr(args, f"{_GLOBAL}profile")
    args.verbose = args.verbose or getattr(args, f"{_GLOBAL}verbose")
    for name in ("storage_option", "profile", "verbose"):
        delattr(args, f"{_GLOBAL}{name}")
    return args


# What argparse takes for a negative number, a value rather than an option.
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def _nearest(word: str, known: list[str]) -> str | None:
    near = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return near[0] if near else None


class _Parser(argparse.ArgumentParser):
    """argparse's parser, which names the nearest known option for an unknown one and the
    nearest choice for an invalid one (``--expiry``: did you mean ``--expire``?). A
    command's arguments are checked for unknown options before they are parsed
    (``_Commands``), so that an unknown option is what its command reports, with its own
    usage, rather than a positional argument or a required option it seemed to lack; what
    is left before the command is checked by ``parse``."""

    def known(self, arg: str) -> bool:
        """Whether ``arg``, which starts like an option, is one of ours (whole, with its
        value after ``=`` or joined to a short option, or a long one abbreviated, as argparse
        takes them)."""
        name = arg.split("=", 1)[0]
        if name in self._option_string_actions:
            return True
        if arg.startswith("--"):
            return self.allow_abbrev and any(
                o.startswith(name) for o in self._option_string_actions if o.startswith("--")
            )
        return arg[:2] in self._option_string_actions

    def unknown(self, args: Sequence[str]) -> list[str]:
        """The options in ``args`` that this parser does not know, as argparse reads them."""
        out = []
        for arg in args:
            if arg == "--":
                break
            if len(arg) < 2 or arg[0] not in self.prefix_chars or " " in arg:
                continue  # a positional argument, as argparse reads it
            if _NEGATIVE_NUMBER.match(arg) or self.known(arg):
                continue
            out.append(arg.split("=", 1)[0])
        return out

    def refuse(
        self, unknown: list[str], commands: Mapping[str, argparse.ArgumentParser]
    ) -> NoReturn:
        """Exits 2, naming each unknown option with the nearest known one, or the commands
        that take it when given before them."""
        known = sorted(o for o in self._option_string_actions if o.startswith("--"))
        said = []
        for name in unknown:
            elsewhere = [c for c, p in commands.items() if name in p._option_string_actions]
            near = _nearest(name, known)
            if near is not None:
                said.append(f"unknown option {name}: did you mean {near}?")
            elif elsewhere:
                said.append(
                    f"{name} is an option of {', '.join(elsewhere)}: put it after the command"
                )
            else:
                said.append(f"unknown option {name} ({self.prog} --help lists them)")
        if self.prog.endswith(" run") and not any("did you mean" in s for s in said):
            said.append("the command to run goes after --: blob-lock run URI -- COMMAND ...")
        self.error("; ".join(said))

    def error(self, message: str) -> NoReturn:
        choice = re.search(r"invalid choice: '?([^'\s]*)'? \(choose from (.*)\)$", message)
        if choice and "did you mean" not in message and "maybe you meant" not in message:
            choices = [c.strip().strip("'\"") for c in choice.group(2).split(",")]
            near = _nearest(choice.group(1), choices)
            if near is not None:
                message += f"; did you mean {near}?"
        super().error(message)


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The commands: each command's arguments are checked for unknown options before its
    parser reads them, and what it leaves unread is refused with its usage, not the top
    level's."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        given = [values] if isinstance(values, str) else list(values or [])
        command = self._name_parser_map.get(given[0]) if given else None
        if isinstance(command, _Parser):
            unknown = command.unknown(given[1:])
            if unknown:
                command.refuse(unknown, {})
        super().__call__(parser, namespace, values, option_string)
        rest = getattr(namespace, argparse._UNRECOGNIZED_ARGS_ATTR, None)
        if command is not None and rest:
            command.error(f"unrecognized arguments: {' '.join(rest)}")


#: What PREFIX is to ``ls`` and ``prune``.
EVERY_LOCKFILE_UNDER = "a URI or folder: every lockfile anywhere under it"


def parser() -> _Parser:
    """The `blob-lock` command line, with every command and its options."""
    p = _Parser(
        prog="blob-lock",
        description=(
            "A lease lock on blob stores (s3://, az://, gs://, file:// or a path, memory://). "
            f"Exit codes: {sentence(COMMON)}; see each command's --help."
        ),
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _common(p, _GLOBAL)
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", action=_Commands)

    def command(
        name: str, help: str, description: str, prefix: str | None = None
    ) -> argparse.ArgumentParser:
        c = sub.add_parser(name, help=help, description=f"{description} {help_text(name)}")
        if prefix:
            c.add_argument("uri", metavar="PREFIX", help=prefix)
        else:
            c.add_argument("uri", metavar="URI", help="lock URI; the lockfile is URI/lock.json")
        _common(c, "")
        return c

    run = command(
        "run",
        "hold a lock while a command runs",
        "Acquire the lock at URI, keep it alive while COMMAND runs, release it, and exit with "
        "COMMAND's exit code (its own failure code wins over a lost lock).",
    )
    run.add_argument(
        "cmd", metavar="COMMAND", nargs="*", help="the command and its arguments, after --"
    )
    for option in RUN_OPTIONS:
        run.add_argument(
            f"--{option.name.replace('_', '-')}",
            type=float if option.kind != "protocol" else str,
            choices=["auto", "cas", "lww"] if option.kind == "protocol" else None,
            default=argparse.SUPPRESS,
            metavar=None if option.kind == "protocol" else "S",
            help=_help(option),
        )
    run.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="wait for the lock (default); --no-wait makes one attempt and exits 75 if it is held",
    )
    run.add_argument(
        "--slots",
        type=int,
        default=None,
        metavar="N",
        help="take one of N slots of a semaphore at URI instead of its lock: at most N such "
        "commands run at once (the number stored beside the slots wins)",
    )
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
        "token and times; at a semaphore's prefix, its number of slots and each slot's "
        "holder (after a plain lock's lines, where one was taken there too). Never writes.",
    )
    status.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object (at a semaphore's prefix: its number, held count and "
        "slots; beside a plain lock there, as the lock's semaphore_here)",
    )

    slots = command(
        "slots",
        "change the number of a semaphore's slots",
        "Store N as the number of slots of the semaphore at PREFIX, for every process that "
        "uses it: raised, new acquisitions take the new slots at once; lowered, no holder is "
        "evicted, and the slots past N drain as their holders release them. Prints the "
        "number before and after. A configuration that cannot be read is written over (what "
        "the error of an acquisition that met it says to run).",
        prefix="the semaphore's URI or folder: its slots are PREFIX/slot-<i>",
    )
    slots.add_argument("number", metavar="N", type=int, help="how many may hold a slot at once")

    wait = command(
        "wait",
        "wait until a lock is free",
        "Block until the lock is free to take (unlocked, released, or unchanged for its "
        "expire time), taking nothing.",
    )
    wait.add_argument(
        "--timeout", type=float, default=None, help="seconds to wait (default: for ever)"
    )

    brk = command(
        "break",
        "force-release a lock",
        "Mark the lock released whoever holds it, and print what was broken. Asks first "
        "unless --yes. The holder learns at its next heartbeat that it lost the lock.",
    )
    brk.add_argument("-y", "--yes", action="store_true", help="do not ask")

    doc = command(
        "doctor",
        "check that a store honours conditional writes",
        "Probe the store on a scratch lockfile beside URI (deleted afterwards): "
        "create-if-absent twice, read-after-write, update-if-match, a stale If-Match; show "
        "the latency of each call and whether the cas protocol is safe there. With --race, "
        "independent clients then race both conditional writes on scratch keys, round after "
        "round: more than one winner in a round means cas is not safe; one winner in every "
        "round is evidence that it is, not proof.",
    )
    doc.add_argument("--json", action="store_true", help="print one JSON object")
    ls = command(
        "ls",
        "list every lock under a prefix",
        "List every lockfile under PREFIX, a line each as it is read (state, token, age, "
        "expires in, holder, URI, labels); large prefixes are read a page at a time. Never "
        "writes. AGE is how long it has been held, released or expired.",
        prefix=EVERY_LOCKFILE_UNDER,
    )
    ls.add_argument("--json", action="store_true", help="print one JSON object per line")
    ls.add_argument(
        "--state",
        choices=["held", "expired", "released", "invalid"],
        help="only locks in this state (invalid: objects named lock.json that are no lockfile)",
    )
    prune = command(
        "prune",
        "delete lockfiles released or expired long ago",
        "Delete the lockfiles under PREFIX that were released, or whose last write expired, "
        "longer ago than --older-than (by both the writer's and the store's clock). Each is "
        "deleted only if unchanged since it was listed: it is taken as a waiter takes over a "
        "free lock, then deleted while held. Held and unreadable lockfiles are kept. Shows "
        "what it would delete and asks first unless --yes. Fencing tokens survive the delete: "
        "the next holder starts a new lockfile's tokens from its wall clock, above the "
        "deleted one's, as long as clocks disagree by less than --clock-skew; a lockfile "
        "whose last acquisition is more recent than --clock-skew plus its expire is kept "
        "(too recent).",
        prefix=EVERY_LOCKFILE_UNDER,
    )
    prune.add_argument(
        "--older-than",
        required=True,
        type=duration,
        metavar="DURATION",
        help="released or expired at least this long ago: 90s, 30m, 12h, 7d (a bare number: "
        "seconds)",
    )
    prune.add_argument(
        "--clock-skew",
        type=duration,
        default=argparse.SUPPRESS,
        metavar="DURATION",
        help="how far machines' wall clocks may disagree, as the locks are told (default "
        "60s): a lockfile whose last acquisition is more recent than this plus its expire "
        "is kept",
    )
    prune.add_argument("-y", "--yes", action="store_true", help="do not ask")
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
