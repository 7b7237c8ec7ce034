"""Arguments as users give them, checked and turned into what the native module takes.

Each check names the argument and says what it takes: a wrong type is a ``TypeError``
here, a wrong value a ``ValueError`` from the native side (which knows the bounds).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Union, overload

Seconds = Union[float, int, timedelta]


@overload
def seconds(name: str, value: Seconds) -> float: ...
@overload
def seconds(name: str, value: Seconds | None) -> float | None: ...
def seconds(name: str, value: Seconds | None) -> float | None:
    """Seconds from a number or a ``timedelta``."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be seconds (a number) or a timedelta, got {value!r}")
    return float(value)


def lock_uri(uri: object) -> str:
    """A lock URI: a ``str``, or an ``os.PathLike`` (``pathlib.Path``) naming a local path."""
    if isinstance(uri, str):
        return uri
    if isinstance(uri, os.PathLike):
        path = os.fspath(uri)
        if isinstance(path, str):
            return _as_path(path)
    raise TypeError(
        f"the lock URI must be a str (s3://bucket/path, a file path, ...) or a pathlib.Path, "
        f"got {type(uri).__name__} {uri!r}"
    )


def _as_path(path: str) -> str:
    """A path given as a Path stays a path: one that a string would read as a URI, or as a
    URI with a typo (``s3:bucket``, ``s3//bucket``), gets ``./`` in front."""
    first = path.split("/", 1)[0]
    if not os.path.isabs(path) and (":" in first or "//" in path):
        return "./" + path
    return path


def storage_options(options: Mapping[str, str] | None) -> dict[str, str] | None:
    """Storage options as strings; booleans and numbers are written as object_store reads
    them, anything else is refused."""
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise TypeError(
            f"storage_options must be a mapping of option names to strings, got {options!r}"
        )
    out: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise TypeError(f"storage option names are strings, got {key!r}")
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, (int, float)):
            out[key] = str(value)
        elif isinstance(value, str):
            out[key] = value
        else:
            raise TypeError(f"storage option {key!r} must be a string, got {value!r}")
    return out
