"""``write_once``: publish a result so that a late writer can never overwrite it."""

from __future__ import annotations

import os
from collections.abc import Mapping

from blob_lock import _args, _blob_lock, _credentials
from blob_lock._credentials import CredentialProvider

__all__ = ["write_once", "write_once_async"]


def _object_uri(uri: object) -> str:
    if isinstance(uri, (str, os.PathLike)):
        return _args.lock_uri(uri)
    raise TypeError(
        "the result URI must be a str (s3://bucket/memo/abc/result, a file path, ...) or a "
        f"pathlib.Path, got {type(uri).__name__} {uri!r}"
    )


def _data(data: object) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    hint = " (encode a str first, e.g. text.encode())" if isinstance(data, str) else ""
    raise TypeError(f"data must be bytes, bytearray or memoryview{hint}, got {type(data).__name__}")


def write_once(
    uri: str | os.PathLike[str],
    data: bytes | bytearray | memoryview,
    *,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: CredentialProvider | object | None = None,
) -> bool:
    """Writes ``data`` to the object ``uri`` only if no object is there: True when this call
    wrote it, False when one was already there (then nothing is written).

    Publish results this way and a remote that lost its lock mid-run, and finishes late,
    can never overwrite the result another run published: its ``write_once`` returns False.
    The store must honour create-if-absent writes; that is checked once per process and
    store, as for a ``cas`` lock, and ``UnsafeStore`` is raised where it does not (there a
    second write would silently replace the first). A refused write is read back: when the
    object holds exactly ``data`` (this call's write landed and its answer was lost, a server
    error the client retried), the answer is True; calling again after an error is True
    likewise. Identical bytes written by another caller count as ours: they are the same
    result.
    """
    return _blob_lock.write_once(
        _object_uri(uri),
        _data(data),
        **_credentials.resolve(_object_uri(uri), storage_options, credential_provider),
    )


async def write_once_async(
    uri: str | os.PathLike[str],
    data: bytes | bytearray | memoryview,
    *,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: CredentialProvider | object | None = None,
) -> bool:
    """``write_once`` without blocking the event loop."""
    return await _blob_lock.write_once_async(
        _object_uri(uri),
        _data(data),
        **_credentials.resolve(_object_uri(uri), storage_options, credential_provider),
    )
