"""docs/cli.md's usage lines and option tables, generated from the parser so that they never
fall behind it (``make cli-docs`` writes them; tests/python/test_cli.py fails while they differ)."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from blob_lock.cli._parser import parser

# One width, whatever the terminal of whoever generates it.
_WIDTH = "100"
_COMMON = {"-h", "-o", "--profile", "-v"}
_BLOCK = re.compile(
    r"(<!-- generated from the parser \(make cli-docs\): (\w+) -->\n)(.*?)(<!-- end generated -->)",
    re.S,
)


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _flags(action: argparse.Action) -> str:
    """How the option is written: each spelling, with what it takes."""
    if action.nargs == 0:
        return ", ".join(f"`{s}`" for s in action.option_strings)
    if action.metavar is not None:
        takes = str(action.metavar)
    elif action.choices is not None:
        takes = "{" + ",".join(map(str, action.choices)) + "}"
    else:
        takes = action.dest.upper()
    return ", ".join(f"`{s} {takes}`" for s in action.option_strings)


def section(name: str) -> str:
    """The usage line and option table of command ``name``, as docs/cli.md shows them."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = _WIDTH
    try:
        command = _commands()[name]
        usage = command.format_usage().removeprefix("usage: ").rstrip()
    finally:
        if before is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = before
    rows = [
        f"| {_flags(a)} | {(a.help or '').replace('%%', '%').replace('|', '/')} |"
        for a in command._actions
        if a.option_strings and not _COMMON & set(a.option_strings)
    ]
    text = f"```text\n{usage}\n```\n"
    if rows:
        text += "\n| option | meaning |\n|---|---|\n" + "\n".join(rows) + "\n"
    return text + "\n"


def render(doc: str) -> str:
    """``doc`` with every generated block made from the parser as it is now."""
    return _BLOCK.sub(lambda m: m.group(1) + section(m.group(2)) + m.group(4), doc)


def write(path: Path) -> bool:
    """Rewrites the generated blocks of ``path``; True if anything changed."""
    before = path.read_text()
    after = render(before)
    if after != before:
        path.write_text(after)
    return after != before
