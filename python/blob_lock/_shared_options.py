"""Options dicts shared between locks: thousands of locks made with the same plain keyword
arguments (``expire=30``) keep one dict between them instead of 200 bytes each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

__all__ = ["is_plain", "options_key", "shared"]

# One per distinct set of plain values.
_SHARED: dict[tuple[tuple[tuple[str, object], ...], tuple[type, ...]], Mapping[str, Any]] = {}
_PLAIN = frozenset({str, int, float, bool, type(None)})
_Options = TypeVar("_Options", bound=Mapping[str, Any])


def options_key(options: Mapping[str, Any]) -> tuple[Any, ...]:
    """What tells ``options`` from other sets, compared with their types (``1`` is not
    ``True``). Unhashable when a value is (a dict); see ``is_plain``."""
    # map and tuple, not a generator: a fresh BlobLock per `with` makes this call each time.
    return (tuple(options.items()), tuple(map(type, options.values())))


def is_plain(key: tuple[Any, ...]) -> bool:
    """Whether the options of ``key`` (``options_key``) are all plain values: no callback, no
    provider, no dict, which are never kept beyond the lock they were given to."""
    return _PLAIN.issuperset(key[1])


def shared(options: _Options, key: tuple[Any, ...]) -> _Options:
    """``options``, or an equal dict kept for locks made with the same options before (never
    to be changed: it is read when a lock is pickled or decorates a function). ``key`` is
    ``options_key(options)``, of plain values only, and only a few dozen sets are kept, so
    user objects (callbacks, providers) are never kept alive here."""
    kept = _SHARED.get(key)
    if kept is not None:
        return cast(_Options, kept)
    if len(_SHARED) < 64:
        _SHARED[key] = options
    return options
