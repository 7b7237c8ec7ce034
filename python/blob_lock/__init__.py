"""blob_lock: a lease lock on blob stores for orchestrators and their remotes.

with BlobLock("s3://bucket/memo/abc/lock") as held:
    launch_remote(uri, held.owner)      # the remote calls keep_alive(uri, owner)
"""

from blob_lock import _logs  # noqa: F401 - next: records reach logging at its levels
from blob_lock._blob_lock import __version__
from blob_lock._claiming import claim_memo, claim_memo_async
from blob_lock._credentials import CredentialProvider, credential_source, set_credentials
from blob_lock._doctor import DoctorReport, Probe, RaceReport, doctor
from blob_lock._held_slot import HeldSlot
from blob_lock._inspect import (
    BreakOutcome,
    Broken,
    Inspection,
    LockState,
    break_lock,
    duration_text,
    inspect,
    inspect_async,
    wait_free,
    wait_free_async,
)
from blob_lock._inventory import Pruned, PruneOutcome, list_locks, prune_locks
from blob_lock._keep_alive import KeepAlive, KeepAliveStarting, keep_alive, keep_alive_async
from blob_lock._lock import BlobLock, locked
from blob_lock._memo_claim import MemoClaim
from blob_lock._option_types import KeepAliveOptions, LockOptions
from blob_lock._options import LOCK_OPTIONS, LockOption
from blob_lock._release_status import ReleaseStatus
from blob_lock._semaphore import BlobSemaphore, SemaphoreConfig
from blob_lock._stats import Histogram, Stats, stats
from blob_lock._stores import StoreKind, store_kind
from blob_lock._write_once import write_once, write_once_async
from blob_lock.exceptions import (
    CredentialsError,
    InvalidLockFile,
    LockError,
    LockLost,
    LockNotFound,
    LockStolen,
    LockTimeout,
    StoreError,
    StoreSaturated,
    UnsafeStore,
)

__all__ = [
    "LOCK_OPTIONS",
    "BlobLock",
    "BlobSemaphore",
    "BreakOutcome",
    "Broken",
    "CredentialProvider",
    "CredentialsError",
    "DoctorReport",
    "HeldSlot",
    "Histogram",
    "Inspection",
    "InvalidLockFile",
    "KeepAlive",
    "KeepAliveOptions",
    "KeepAliveStarting",
    "LockError",
    "LockLost",
    "LockNotFound",
    "LockOption",
    "LockOptions",
    "LockState",
    "LockStolen",
    "LockTimeout",
    "MemoClaim",
    "Probe",
    "PruneOutcome",
    "Pruned",
    "RaceReport",
    "ReleaseStatus",
    "SemaphoreConfig",
    "Stats",
    "StoreError",
    "StoreKind",
    "StoreSaturated",
    "UnsafeStore",
    "__version__",
    "break_lock",
    "claim_memo",
    "claim_memo_async",
    "credential_source",
    "doctor",
    "duration_text",
    "inspect",
    "inspect_async",
    "keep_alive",
    "keep_alive_async",
    "list_locks",
    "locked",
    "prune_locks",
    "set_credentials",
    "stats",
    "store_kind",
    "wait_free",
    "wait_free_async",
    "write_once",
    "write_once_async",
]
