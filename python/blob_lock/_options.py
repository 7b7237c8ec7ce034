"""The lock's options as Python sees them, read from their one definition in the native core
(``src/lease/settings.rs``: name, kind, default, doc), with the type each kind is written
as: what the signatures that ``help()`` shows, the CLI's flags and the typing that ``make
options`` writes (``_option_types.py``, by ``_make_option_types.py``) are made from."""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

from blob_lock import _blob_lock

__all__ = ["KEEP_ALIVE", "LOCK_OPTIONS", "TYPES", "LockOption", "signature"]


class LockOption(NamedTuple):
    """One option of the lock, as its definition gives it."""

    name: str
    kind: str
    default: Any
    doc: str


LOCK_OPTIONS: tuple[LockOption, ...] = tuple(
    LockOption(*row) for row in _blob_lock.option_definitions()
)
KEEP_ALIVE: tuple[str, ...] = tuple(_blob_lock.KEEP_ALIVE_OPTIONS)

#: How each kind is typed, in signatures and in ``_option_types.py``.
TYPES = {
    "seconds": "Seconds",
    "seconds_or_none": "Seconds | None",
    "protocol": 'Literal["auto", "cas", "lww"]',
    "flag": "bool",
    "labels": "Mapping[str, str] | None",
    "storage_options": "Mapping[str, str] | None",
    "credentials": "CredentialProvider | object | None",
    "callback": "Callable[[LockLost], object] | None",
}


def signature(
    head: list[inspect.Parameter], names: tuple[str, ...] | None = None
) -> inspect.Signature:
    """``head`` followed by the options (those in ``names``, else all) as keyword-only
    parameters with their defaults: what ``help()`` and ``inspect.signature`` show."""
    return inspect.Signature(
        head
        + [
            inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default,
                              annotation=TYPES[o.kind])
            for o in LOCK_OPTIONS
            if names is None or o.name in names
        ]
    )  # fmt: skip
