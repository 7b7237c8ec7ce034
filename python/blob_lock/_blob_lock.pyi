"""Stubs of the native module (src/python); the public API is the blob_lock package.

The ``*_async`` callables return an ``asyncio.Future`` of the running event loop (made by
pyo3-async-runtimes): await it, or cancel it to drop the native future.
"""

from asyncio import Future
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Literal, final

from blob_lock._stats_types import Stats

__all__ = [
    "KEEP_ALIVE_OPTIONS",
    "STORE_NAMES",
    "KeepAliveOptions",
    "NativeCredentials",
    "NativeDoctorReport",
    "NativeEntry",
    "NativeInspection",
    "NativeInventory",
    "NativeKeepAlive",
    "NativeLock",
    "NativeLockfile",
    "NativeLockfileFacts",
    "NativeProbe",
    "NativeRaceReport",
    "NativeSemaphore",
    "NativeSemaphoreConfig",
    "__version__",
    "after_fork_in_child",
    "check_timeout",
    "check_uri",
    "close_async",
    "close_python_calls",
    "cloud_of",
    "doctor",
    "drain",
    "keep_alive",
    "keep_alive_async",
    "keep_alive_options",
    "logging_changed",
    "names_a_fixed_place",
    "option_definitions",
    "release_all",
    "stats",
    "store_kind",
    "sweep",
    "write_once",
    "write_once_async",
]

__version__: str

# What `release` found (blob_lock.ReleaseStatus holds the same values).
_ReleaseStatus = Literal["released", "no_lockfile", "held_by_other", "already_released"]
# Where a lock's current lifecycle is: "unheld" before any acquisition, else its state.
_LifecycleState = Literal[
    "unheld",
    "new",
    "acquiring",
    "waiting",
    "retrying",
    "held",
    "renewing",
    "renew_retrying",
    "releasing",
    "released",
    "stopped",
    "lost",
    "failed",
]
# What `break_lock` did.
_BreakOutcome = Literal["no_lockfile", "already_released", "changed", "broken"]

@final
class NativeLock:
    """The native lock behind `blob_lock.BlobLock`."""

    def __new__(cls, uri: str, options: Mapping[str, Any] | None = None) -> NativeLock:
        """`options` are BlobLock's keyword arguments as given (`blob_lock.LockOptions`)."""
    @property
    def timeout(self) -> float | None:
        """The `timeout` option: seconds an acquisition waits by default (None: for ever)."""
    @property
    def raise_on_lost(self) -> bool:
        """The `raise_on_lost` option."""
    def for_child(self) -> NativeLock:
        """This lock as a child made by fork sees it (the parent's state is leaked there)."""
    def another(self) -> NativeLock:
        """A lock like this one (its URI and options) with an owner id of its own and nothing
        held, made without parsing or opening anything again."""
    def take_turn(self, me: object) -> bool:
        """Takes the turn to hold this object for `me` (a thread or task) if it is free: True;
        False while another holds it; LockError if `me` does (`blob_lock._turn`)."""
    def give_turn(self) -> None:
        """Gives the turn back, whoever holds it."""
    def acquire(self, timeout: float | None, raise_timeout: bool) -> bool:
        """Waits for the lock; False on timeout, or raises LockTimeout when `raise_timeout`."""
    def try_acquire(self) -> bool:
        """One attempt; never waits."""
    def release(self) -> _ReleaseStatus:
        """Releases; returns the status name."""
    def release_at_end(
        self, patience: float | None = None, warn: bool = True
    ) -> tuple[_ReleaseStatus | None, str | None]:
        """The release at the end of a block whose work is done: best effort, waiting at most
        `patience` seconds (None: two request timeouts; 0: not at all). The status name, or
        None and what happened when it was not answered in time. Never raises a store error."""
    def release_at_end_async(
        self, patience: float | None = None, warn: bool = True
    ) -> Future[tuple[_ReleaseStatus | None, str | None]]:
        """`release_at_end` as an awaitable."""
    def acquire_async(self, timeout: float | None, raise_timeout: bool) -> Future[bool]:
        """`acquire` as an awaitable; cancelling it releases whatever it may have written."""
    def try_acquire_async(self) -> Future[bool]:
        """`try_acquire` as an awaitable."""
    def abandon(self) -> None:
        """After an asyncio acquisition was cancelled: releases, in the background, what it
        acquired or may have written."""
    def release_async(self) -> Future[_ReleaseStatus]:
        """`release` as an awaitable."""
    def hand_off(self, grace: float) -> None:
        """Hands the held lock to a remote that may take up to `grace` seconds to start
        (`Lease::hand_off`). `LockError` when nothing is held, `LockLost` when it was lost."""
    def hand_off_async(self, grace: float) -> Future[None]:
        """`hand_off` as an awaitable."""
    @property
    def handed_off(self) -> bool:
        """True while the lease held was handed off (`hand_off`)."""
    def let_go(self) -> None:
        """Stops renewing the lease held, without releasing it (left to the remote after a
        hand-off); keeps why it was lost, if it was. Writes nothing."""
    def inspect(self) -> NativeInspection:
        """Reads the lockfile once: what it shows. Never writes."""
    def inspect_async(self) -> Future[NativeInspection]:
        """`inspect` as an awaitable."""
    @property
    def owner(self) -> str: ...
    @property
    def uri(self) -> str: ...
    @property
    def state(self) -> _LifecycleState: ...
    @property
    def protocol(self) -> Literal["cas", "lww", "auto"]: ...
    @property
    def expire(self) -> float: ...
    @property
    def heartbeat(self) -> float: ...
    @property
    def labels(self) -> dict[str, str]:
        """The labels each acquisition writes (a new dict)."""
    @property
    def token(self) -> int | None: ...
    @property
    def took_over(self) -> str | None:
        """The holder whose expired lease the current acquisition wrote over (its lockfile
        described), if it took the lock over; None when it found the lock free."""
    @property
    def held(self) -> bool: ...
    @property
    def lost(self) -> bool: ...
    @property
    def lost_reason(self) -> str | None: ...

@final
class NativeCredentials:
    """Credentials for one cloud (`"s3"`, `"azure"`, `"gcs"`) fetched by `fetch()`, which
    returns for s3 `(key_id, secret, token | None, expires | None)`, for azure `(kind,
    value, expires | None)` with kind `"token"`, `"access_key"` or `"sas"`, for gcs
    `(token, expires | None)`; expires in seconds since the epoch. Fetched again `refresh`
    seconds before they expire (at most half their lifetime)."""

    def __new__(
        cls, cloud: str, fetch: Callable[[], tuple[Any, ...]], *, source: str, refresh: float
    ) -> NativeCredentials: ...
    @staticmethod
    def object_store_chain(cloud: str, *, source: str, tried: str, fix: str) -> NativeCredentials:
        """object_store's own chain for `cloud` (keys, web identity, container credentials,
        instance metadata), named `source`; when it finds nothing, the error says what was
        looked at before it (`tried`) and what to do (`fix`)."""
    @property
    def source(self) -> str:
        """Where the credentials come from; never a secret."""

@final
class NativeInventory:
    """The locks under a prefix, a page at a time (`blob_lock.list_locks`, `prune_locks`)."""

    def __new__(
        cls,
        prefix: str,
        *,
        storage_options: dict[str, str] | None,
        credentials: NativeCredentials | None = None,
        clock_skew: float | timedelta | None = ...,
    ) -> NativeInventory: ...
    def next_page(
        self,
        older_than: float | None = None,
        delete: bool = False,
        only: set[str] | None = None,
    ) -> list[NativeEntry]:
        """The next page of locks (with `older_than`, each pruned or judged for it); empty
        once all were listed."""

@final
class NativeSemaphore:
    """The native semaphore behind `blob_lock.BlobSemaphore`."""

    def __new__(
        cls, prefix: str, slots: int, options: Mapping[str, Any] | None = None
    ) -> NativeSemaphore:
        """`options` are BlobSemaphore's keyword arguments as given (a lock's)."""
    @property
    def prefix(self) -> str:
        """The prefix the slots are under."""
    @property
    def asked(self) -> int:
        """The number of slots asked for."""
    @property
    def timeout(self) -> float | None:
        """The `timeout` option: seconds an acquisition waits by default (None: for ever)."""
    def acquire(self, timeout: float | None, owner: str | None = None) -> tuple[int, NativeLock]:
        """Waits for a slot: its index and the lock holding it; raises LockTimeout."""
    def try_acquire(self) -> tuple[int, NativeLock] | None:
        """One attempt at every slot; None when all are held."""
    def acquire_async(
        self, timeout: float | None, owner: str | None = None
    ) -> Future[tuple[int, NativeLock]]:
        """`acquire` as an awaitable; cancelling it releases whatever it may have written."""
    def try_acquire_async(self) -> Future[tuple[int, NativeLock] | None]:
        """`try_acquire` as an awaitable (a released `HeldSlot`'s `try_acquire_async`)."""
    def configuration(self) -> NativeSemaphoreConfig:
        """The stored configuration, written with the number asked for if there is none."""
    def stored(self) -> NativeSemaphoreConfig | None:
        """The stored configuration, if there is one; writes nothing."""
    def set_slots(self, slots: int) -> NativeSemaphoreConfig:
        """Stores `slots` as the number of slots."""

@final
class NativeSemaphoreConfig:
    """A semaphore's stored configuration."""

    @property
    def slots(self) -> int: ...
    @property
    def set_by(self) -> str: ...
    @property
    def set_at(self) -> str: ...

@final
class NativeLockfile:
    """A lock seen from outside, by someone who does not hold it (`blob_lock.inspect`,
    `wait_free`, `break_lock`); expiry judged as a BlobLock with default options would."""

    def __new__(
        cls,
        uri: str,
        *,
        storage_options: dict[str, str] | None,
        credentials: NativeCredentials | None = None,
    ) -> NativeLockfile: ...
    @property
    def uri(self) -> str: ...
    def inspect(self) -> NativeInspection:
        """Reads the lockfile once: what it shows. Never writes."""
    def inspect_async(self) -> Future[NativeInspection]:
        """`inspect` as an awaitable."""
    def wait_free(self, timeout: float | None) -> NativeInspection:
        """Waits until the lock is free to take (takes nothing): what was seen last. Raises
        LockTimeout after `timeout` seconds."""
    def wait_free_async(self, timeout: float | None) -> Future[NativeInspection]:
        """`wait_free` as an awaitable."""
    def break_lock(
        self, owner: str | None = None, token: int | None = None
    ) -> tuple[_BreakOutcome, NativeLockfileFacts | None]:
        """Marks the lock released whoever holds it (only the acquisition `owner`/`token`
        name; both or neither): `(outcome, the lockfile as found, or None)`."""

@final
class NativeKeepAlive:
    """The native handle behind `blob_lock.keep_alive` (made by `keep_alive` only)."""

    def leak_in_child(self) -> None:
        """Leaks this object in a child made by fork (as `NativeLock` leaks its state there)."""
    def stop(self) -> None:
        """Stops heartbeating (never releases)."""
    def stop_async(self) -> Future[None]:
        """`stop` as an awaitable."""
    @property
    def owner(self) -> str: ...
    @property
    def uri(self) -> str: ...
    @property
    def token(self) -> int: ...
    @property
    def lost(self) -> bool: ...
    @property
    def lost_reason(self) -> str | None: ...

KEEP_ALIVE_OPTIONS: list[str]

@final
class KeepAliveOptions:
    """`keep_alive`'s options, parsed and checked before anything starts."""

def keep_alive_options(uri: str, options: Mapping[str, Any] | None = None) -> KeepAliveOptions:
    """Parses `keep_alive`'s keyword arguments (`blob_lock.KeepAliveOptions`) for `uri`."""

def keep_alive(uri: str, owner: str, options: KeepAliveOptions) -> NativeKeepAlive:
    """Starts keeping `owner`'s lock at `uri` alive."""

def keep_alive_async(uri: str, owner: str, options: KeepAliveOptions) -> Future[NativeKeepAlive]:
    """`keep_alive` as an awaitable."""

@final
class NativeLockfileFacts:
    """A lockfile's fields; times as Unix seconds (`blob_lock.Inspection` takes them)."""

    @property
    def owner(self) -> str: ...
    @property
    def hostname(self) -> str | None: ...
    @property
    def pid(self) -> str | None: ...
    @property
    def token(self) -> int: ...
    @property
    def expire_s(self) -> float: ...
    @property
    def written_at(self) -> float | None: ...
    @property
    def released_at(self) -> float | None: ...
    @property
    def first_acquired_at(self) -> float | None: ...
    @property
    def write_count(self) -> int: ...
    @property
    def writer_name(self) -> str | None: ...
    @property
    def protocol(self) -> str | None: ...
    @property
    def broken_by(self) -> str | None: ...
    @property
    def grace_s(self) -> float | None: ...
    @property
    def grace_until(self) -> float | None: ...
    @property
    def labels(self) -> list[tuple[str, str]]: ...

@final
class NativeInspection:
    """What one read of a lockfile shows (`blob_lock.Inspection` is built from it)."""

    @property
    def state(self) -> Literal["unlocked", "held", "expired", "released"]: ...
    @property
    def expires_in(self) -> float | None: ...
    @property
    def last_modified(self) -> float | None: ...
    @property
    def lockfile(self) -> NativeLockfileFacts | None: ...

@final
class NativeEntry:
    """One lock of a listing: what a read showed, or why its lockfile cannot be read; with
    what pruning did, when it was pruned."""

    @property
    def uri(self) -> str: ...
    @property
    def inspection(self) -> NativeInspection | None: ...
    @property
    def problem(self) -> str | None: ...
    @property
    def prune(self) -> str | None: ...
    @property
    def prune_detail(self) -> str | None: ...

@final
class NativeProbe:
    """One call the doctor made to the store."""

    @property
    def name(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def seconds(self) -> float: ...
    @property
    def detail(self) -> str: ...

@final
class NativeRaceReport:
    """What racing independent clients found."""

    @property
    def scratch(self) -> str: ...
    @property
    def racers(self) -> int: ...
    @property
    def rounds(self) -> int: ...
    @property
    def create_doubles(self) -> int: ...
    @property
    def update_doubles(self) -> int: ...
    @property
    def errors(self) -> int: ...
    @property
    def inconclusive(self) -> int: ...
    @property
    def first_double(self) -> str | None: ...
    @property
    def seconds(self) -> float: ...
    @property
    def cas_safe(self) -> bool: ...

@final
class NativeDoctorReport:
    """What the doctor found; `cas_safe` by the probes alone."""

    @property
    def uri(self) -> str: ...
    @property
    def scratch(self) -> str: ...
    @property
    def probes(self) -> list[NativeProbe]: ...
    @property
    def create_is_conditional(self) -> bool: ...
    @property
    def update_is_conditional(self) -> bool: ...
    @property
    def reads_see_writes(self) -> bool: ...
    @property
    def cas_safe(self) -> bool: ...
    @property
    def lww_usable(self) -> bool: ...
    @property
    def race(self) -> NativeRaceReport | None: ...

def option_definitions() -> list[tuple[str, str, Any, str]]:
    """Every option of the lock: `(name, kind, default, doc)`, from their one definition."""

def doctor(
    uri: str,
    *,
    storage_options: dict[str, str] | None,
    credentials: NativeCredentials | None = None,
    expire: float,
    race: tuple[int, int] | None = None,
) -> NativeDoctorReport:
    """Probes the store behind `uri` on a scratch lockfile, and with `race` (racers, rounds)
    races independent clients beside it."""

def check_uri(uri: str, prefix: bool = False) -> None:
    """Checks a lock URI (with `prefix`, a listing's prefix) as every entry point would take
    it: ValueError naming what is wrong."""

#: Each store kind's name for messages: ``{"s3": "S3", ..., "file": "local files"}``.
STORE_NAMES: dict[str, str]

def store_kind(uri: str) -> Literal["s3", "azure", "gcs", "file", "memory"] | None:
    """The kind of store `uri` names, from its scheme; None for a scheme no store has."""

def cloud_of(uri: str) -> Literal["s3", "azure", "gcs"] | None:
    """The cloud `uri` names; None for local files, memory and a scheme no store has."""

def names_a_fixed_place(uri: str) -> bool:
    """True if `uri` names the same place whatever the working folder and HOME are."""

def check_timeout(timeout: float, name: str = "timeout") -> None:
    """Checks a timeout as `acquire` would take it: ValueError if it is not one, naming
    `name` (`timeout` by default)."""

def drain(timeout: float) -> None:
    """Waits up to `timeout` seconds for the releases that interrupted acquisitions left
    running in the background (called at interpreter exit)."""

def close_async() -> None:
    """From now on no blob-lock awaitable completes (called at interpreter exit)."""

def close_python_calls() -> None:
    """Hands over the log records and loss callbacks still queued, then from now on no
    thread of ours calls into Python: credential fetches are refused and log records
    dropped (blob-lock's exit hook calls it last)."""

def logging_changed() -> None:
    """Reads Python's logging levels again (blob_lock._logs calls it at each change)."""

def release_all(locks: list[NativeLock], within: float) -> None:
    """Releases `locks` all at once, giving up after `within` seconds in all (called at
    interpreter exit)."""

def after_fork_in_child() -> None:
    """Starts handing log records to Python again in a child made by fork."""

def sweep() -> None:
    """Removes now the replaced lockfiles still queued for removal (called at interpreter
    exit, after the releases)."""

def write_once(
    uri: str,
    data: bytes,
    *,
    storage_options: dict[str, str] | None,
    credentials: NativeCredentials | None = None,
) -> bool:
    """Writes `data` to `uri` only if nothing is there: True if this call wrote it."""

def write_once_async(
    uri: str,
    data: bytes,
    *,
    storage_options: dict[str, str] | None,
    credentials: NativeCredentials | None = None,
) -> Future[bool]:
    """`write_once` as an awaitable."""

def stats() -> Stats:
    """Every counter and histogram of this process so far (`blob_lock.stats`)."""
