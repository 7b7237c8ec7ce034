"""A claim's hand-over: the one string an orchestrator launches its remote with, naming the
owner id and every lock the remote keeps alive (``MemoClaim.handover``, read by
``keep_alive(handover)``).

``blob-lock-handover:1:`` then ``{"owner": ..., "uris": [...]}`` as compact JSON, base64url
without padding. JSON, so that no URI can be misread, whatever it holds (file paths with
commas, ``#``, spaces or quotes; object keys of any characters); base64url, so that the
whole is one word of ``[A-Za-z0-9_:-]`` that shells, YAML, environment variables and
Kubernetes args pass on unquoted and unsplit. The version tells a later format apart: a
remote older than its orchestrator says so instead of misreading it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Sequence

__all__ = ["decode", "encode", "is_handover"]

_HEAD = "blob-lock-handover:"
_VERSION = 1
_PREFIX = f"{_HEAD}{_VERSION}:"
_BODY = re.compile(r"[A-Za-z0-9_-]+")


def encode(owner: str, uris: Sequence[str]) -> str:
    """The hand-over of ``owner``'s locks at ``uris``, in the order they are kept."""
    body = json.dumps({"owner": owner, "uris": list(uris)}, separators=(",", ":"))
    return _PREFIX + base64.urlsafe_b64encode(body.encode()).rstrip(b"=").decode("ascii")


def is_handover(text: object) -> bool:
    """Whether ``text`` is meant as a hand-over (well formed or not)."""
    return isinstance(text, str) and text.startswith(_HEAD)


def decode(handover: str) -> tuple[str, tuple[str, ...]]:
    """The owner id and the lock URIs of a hand-over; ``ValueError`` naming what is wrong
    when it is not one (cut short, altered, or of a later version)."""

    def refused(why: str) -> ValueError:
        shown = handover if len(handover) <= 60 else handover[:57] + "..."
        return ValueError(
            f"not a blob-lock hand-over ({why}): pass a claim's handover on whole, as it "
            f"is; got {shown!r}"
        )

    if not handover.startswith(_HEAD):
        raise refused(f"it does not begin with {_HEAD!r}")
    version, _, text = handover[len(_HEAD) :].partition(":")
    if version != str(_VERSION):
        if version.isdigit() and int(version) > _VERSION:
            raise refused(
                f"version {version}, made by a newer blob-lock than this one, which reads "
                f"version {_VERSION}: upgrade blob-lock where keep_alive runs"
            )
        raise refused(f"version {version!r} is not one blob-lock made")
    if not _BODY.fullmatch(text):
        raise refused("its body holds characters other than letters, digits, - and _")
    try:
        body = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, UnicodeDecodeError, ValueError) as e:
        raise refused(f"its body does not decode: {e}") from None
    if not isinstance(body, dict) or set(body) != {"owner", "uris"}:
        raise refused("its body is not an owner and URIs")
    owner, uris = body["owner"], body["uris"]
    if not isinstance(owner, str) or not owner:
        raise refused("its owner id is not a non-empty string")
    if not isinstance(uris, list) or not uris or not all(isinstance(u, str) and u for u in uris):
        raise refused("its URIs are not a non-empty list of strings")
    return owner, tuple(uris)
