"""Which kind of store a lock URI names, as the native side reads its scheme: the one table
of schemes is there (src/store/config/schemes.rs), and nothing here keeps a copy."""

from __future__ import annotations

import enum
import os

from blob_lock import _blob_lock

__all__ = ["StoreKind", "store_kind"]


class StoreKind(str, enum.Enum):
    """The kind of store a lock URI names. A str, so ``kind == "s3"`` works too."""

    S3 = "s3"
    """Amazon S3 and S3-compatible stores: ``s3://``, ``s3a://``."""
    AZURE = "azure"
    """Azure Blob Storage: ``az://``, ``azure://``, ``abfs://``, ``abfss://``, ``adl://``."""
    GCS = "gcs"
    """Google Cloud Storage: ``gs://``."""
    FILE = "file"
    """Local files: ``file://`` or a plain path."""
    MEMORY = "memory"
    """``memory://``: a store inside this process, which no other process sees."""

    def __str__(self) -> str:
        return self.value


def store_kind(uri: str | os.PathLike[str]) -> StoreKind | None:
    """The kind of store ``uri`` names, from its scheme alone; None for a scheme no store
    has. Says nothing of whether the rest of the URI is valid: ``BlobLock`` checks that."""
    kind = _blob_lock.store_kind(os.fspath(uri))
    return None if kind is None else StoreKind(kind)
