"""Native locks made before, kept as templates: users make a fresh ``BlobLock`` for every
``with``, and for a local lock whose URI names one place whatever the working folder and
HOME (an absolute path, ``file:///``, ``memory://``; not a relative path nor ``~``) made before
with the same plain options, the new one's native lock is the template's ``another()`` (an
owner id of its own, the same engine and store) instead of a lock whose options are parsed
and whose store is opened again. Cloud locks are made anew each time: their credentials
depend on the environment and ``set_credentials``, which may change between two locks."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from blob_lock import _blob_lock
from blob_lock._blob_lock import NativeLock
from blob_lock._shared_options import is_plain, options_key, shared

__all__ = ["native_lock"]

# (uri, plain options) -> (a template never acquired, the options shared). A few dozen:
# thousands of locks on distinct URIs each pay one miss, not memory held for ever.
_TEMPLATES: dict[object, tuple[NativeLock, Mapping[str, Any] | None]] = {}
_MAX = 64


def native_lock(
    uri: str, options: Mapping[str, Any]
) -> tuple[NativeLock, Mapping[str, Any] | None]:
    """The native lock of ``BlobLock(uri, **options)``, and the options to keep (shared
    between locks made with equal plain options; None for none)."""
    # Looked up before the values are checked to be plain: only plain ones are ever kept.
    given = options_key(options) if options else ()
    key: object = (uri, given) if options else uri
    try:
        made = _TEMPLATES.get(key)
    except Exception:  # an unhashable value (a dict), or one whose hash fails: not kept
        return NativeLock(uri, options), options
    if made is not None:
        return made[0].another(), made[1]
    native = NativeLock(uri, options)  # checks every option
    if options and not is_plain(given):  # a callback, a provider: not kept beyond this lock
        return native, options
    kept = shared(options, given) if options else None
    # Local stores only (a cloud lock's credentials are resolved anew for each), named
    # whatever the working folder and HOME are (they may change).
    if _blob_lock.store_kind(uri) in ("file", "memory") and _blob_lock.names_a_fixed_place(uri):
        while len(_TEMPLATES) >= _MAX:
            # The oldest out, until there is room: threads that insert at once can each
            # find room and overshoot, and the next insertion takes the excess out. Without
            # a lock (a `with` must not take one): another thread may evict it first, or
            # change the dict between iter() and next().
            try:
                _TEMPLATES.pop(next(iter(_TEMPLATES)), None)
            except (StopIteration, RuntimeError):
                break
        _TEMPLATES[key] = (native.another(), kept)
    return native, kept


def _forget() -> None:
    _TEMPLATES.clear()  # a child made by fork opens its own stores


os.register_at_fork(after_in_child=_forget)
