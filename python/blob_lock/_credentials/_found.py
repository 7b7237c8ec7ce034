"""What a cloud's default chain found, the forms of its expiry, and the scopes the
clouds' tokens are asked for: the leaf that the chains (``_aws``, ``_azure``, ``_gcs``) and
the bridge both import, so that neither imports the other back."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple

from blob_lock.exceptions import CredentialsError

AZURE_SCOPE = "https://storage.azure.com/.default"
GCS_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"


def epoch(value: object) -> float | None:
    """An expiry as seconds since the epoch: a timezone-aware datetime, a number, or
    None."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            # Local time or UTC? Either guess would shift every refresh by hours somewhere.
            raise CredentialsError(
                f"a credential's expires_at must be a timezone-aware datetime, got the naive "
                f"{value.isoformat()}: give datetime.now(timezone.utc) + ..., or .replace("
                "tzinfo=timezone.utc) on a UTC time"
            )
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise CredentialsError(f"a credential's expiry must be a datetime or None, got {value!r}")


class Found(NamedTuple):
    """What a cloud's default chain found: the storage options to give object_store,
    the fetch function of credentials from outside object_store's chain with where they
    come from (None: object_store's own chain), and the source in words. For object_store's
    chain, what was looked at before it and the fix, for the error if it finds nothing."""

    options: dict[str, str]
    fetch: tuple[Callable[[], tuple[Any, ...]], str] | None
    source: str
    tried: str = "credentials were given to object_store"
    fix: str = "check the credentials given"


class FoundAtFirstFetch:
    """A default chain walked at the first fetch, not when a lock is made (it may ask a
    metadata service), and again at each fetch until it finds credentials: ``find``
    returns the fetch function of what it found, or raises CredentialsError."""

    def __init__(self, find: Callable[[], Callable[[], tuple[Any, ...]]]) -> None:
        self._find = find
        self._fetch: Callable[[], tuple[Any, ...]] | None = None
        self._guard = threading.Lock()

    def __call__(self) -> tuple[Any, ...]:
        with self._guard:
            if self._fetch is None:
                self._fetch = self._find()
        return self._fetch()
