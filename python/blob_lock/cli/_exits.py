"""The exit codes of every command: one table, from which each command's ``--help`` and the
table of docs/cli.md are made (tests/python/test_cli.py checks both against it)."""

from __future__ import annotations

import signal

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_REFUSED = 3
EXIT_LOST = 4
EXIT_TIMEOUT = 75
# A reader of our output went away (`| head`): as a program killed by SIGPIPE exits.
# Windows has no SIGPIPE: the number it has on Linux and macOS.
EXIT_PIPE = 128 + getattr(signal, "SIGPIPE", 13)
EXIT_CANNOT_RUN = 127

#: What every command may exit with.
COMMON: list[tuple[str, str]] = [
    ("0", "success"),
    (str(EXIT_ERROR), "store or lockfile error"),
    (str(EXIT_USAGE), "bad arguments"),
    (str(EXIT_TIMEOUT), "not free within --timeout"),
    ("128+N", "ended by signal N"),
    (str(EXIT_PIPE), "the reader of its output went away (| head)"),
]

#: What each command's own codes mean.
BY_COMMAND: dict[str, list[tuple[str, str]]] = {
    "run": [
        ("CMD", "COMMAND's own code (128+N if signal N ended it)"),
        (str(EXIT_LOST), "COMMAND succeeded but the lock was lost while it ran"),
        (str(EXIT_TIMEOUT), "not acquired within --timeout (at once with --no-wait)"),
        (str(EXIT_CANNOT_RUN), "COMMAND cannot be started"),
    ],
    "status": [("0", "whatever the state"), (str(EXIT_ERROR), "the lock cannot be read")],
    "slots": [
        ("0", "stored"),
        (str(EXIT_ERROR), "the store cannot be read or written"),
    ],
    "wait": [("0", "free"), (str(EXIT_TIMEOUT), "not free within --timeout")],
    "break": [
        ("0", "broken, or nothing to break"),
        (str(EXIT_REFUSED), "declined, or the lock changed hands meanwhile"),
    ],
    "doctor": [
        ("0", "no check failed (evidence that cas is safe, not proof)"),
        (str(EXIT_REFUSED), "cas is not safe"),
        (str(EXIT_ERROR), "the store cannot be used at all"),
    ],
    "ls": [("0", "listed"), (str(EXIT_ERROR), "the store cannot be listed")],
    "prune": [
        ("0", "pruned"),
        (str(EXIT_ERROR), "a lock could not be judged or deleted (its line says why)"),
        (str(EXIT_REFUSED), "declined"),
    ],
}


def sentence(codes: list[tuple[str, str]]) -> str:
    """``0 free; 75 not free within --timeout``: the codes as one line of text."""
    return "; ".join(f"{code} {meaning}" for code, meaning in codes)


def help_text(command: str) -> str:
    """The last sentence of a command's ``--help``."""
    return f"Exit codes: {sentence(BY_COMMAND[command])}."
