"""blob_lock: a lease lock on blob stores for orchestrators and their remotes.

with BlobLock("s3://bucket/memo/abc/lock") as held:
    launch_remote(uri, held.owner)      # the remote calls keep_alive(uri, owner)
"""

from blob_lock._blob_lock import __version__
from blob_lock._lock import BlobLock, KeepAlive, ReleaseStatus, keep_alive
from blob_lock.exceptions import (
    InvalidLockFile,
    LockError,
    LockLost,
    LockNotFound,
    LockStolen,
    LockTimeout,
    StoreError,
)

__all__ = [
    "BlobLock",
    "InvalidLockFile",
    "KeepAlive",
    "LockError",
    "LockLost",
    "LockNotFound",
    "LockStolen",
    "LockTimeout",
    "ReleaseStatus",
    "StoreError",
    "__version__",
    "keep_alive",
]
