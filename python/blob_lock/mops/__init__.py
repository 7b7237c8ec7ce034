"""blob-lock as mops's lease: ``blob_lock.mops.install()`` sends every lease call of mops
(``thds.mops.pure.core.lease``) in this process through blob-lock, unchanged mops and user
code around it. Remotes that mops starts switch on by themselves when ``BLOB_LOCK_MOPS=1``
is in their environment (``install()`` sets it, so the subprocess shim's children inherit
it; set it on a Kubernetes job's container): mops loads blob-lock as a plugin at import, and
the plugin installs the adapter then.

What changes for mops: real mutual exclusion on stores with conditional writes (mops's own
lease is last-writer-wins by wall clock), fencing tokens, expiry without synchronized
clocks, a single attempt (mops's lease waiter's ``block=0``) that watches the lock as a
waiting acquisition does, and the launch grace (``BlobLock.hand_off``): when mops hands an
invocation to its remote, the lock is handed off with ``BLOB_LOCK_MOPS_GRACE`` seconds of
grace (default 600; 0 switches it off), so an orchestrator that dies while its remote is
queued no longer makes the restart launch a duplicate.

URIs as mops spells them: ``file://`` (home folder expanded), plain paths, and
``adls://ACCOUNT/CONTAINER/PATH`` (as ``az://CONTAINER/PATH`` on that account). Anything
else raises ValueError. On ADLS the adapter authenticates as mops does, with thds.adls's
``SharedCredential`` (azure-identity's DefaultAzureCredential, or the prefetched token or
cached CLI token mops uses), unless the environment gives Azure credentials of its own
(an account key, SAS, connection string, the emulator), which then win as they would for
object_store.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from blob_lock._inspect import LockState, break_lock, inspect
from blob_lock._keep_alive import KeepAlive, keep_alive
from blob_lock._lock import BlobLock
from blob_lock.exceptions import LockError, LockNotFound, LockStolen, StoreSaturated

__all__ = ["ENV", "GRACE_ENV", "TESTED_WITH", "install", "installed", "lock_location", "uninstall"]

ENV = "BLOB_LOCK_MOPS"
"""Set to ``1``, processes that import mops install the adapter (remotes, restarts)."""
GRACE_ENV = "BLOB_LOCK_MOPS_GRACE"
"""Seconds of launch grace when mops hands an invocation to its remote (default 600)."""
TESTED_WITH = ("3.34",)
"""The thds-mops releases (major.minor) the adapter is tested with."""

_REPLACED = (
    "acquire",
    "maintain_to_release",
    "add_lease_to_maintenance_daemon",
    "make_remote_lease_writer",
    "read_lease",
)
_originals: dict[tuple[str, str], Any] = {}
_guard = threading.Lock()


def _lease_module() -> Any:
    try:
        import thds.mops.pure.core.lease as lease  # type: ignore[import-not-found,unused-ignore]  # an extra
    except ImportError as e:
        raise ImportError(
            "blob_lock.mops adapts thds-mops's lease, and thds-mops is not installed: "
            "pip install 'thds-mops'"
        ) from e
    return lease


def _mops_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("thds.mops")
    except PackageNotFoundError:
        return "unknown"


def install() -> None:
    """Sends mops's lease calls in this process through blob-lock, and sets ``BLOB_LOCK_MOPS=1``
    so that the processes it starts do the same. Idempotent. Raises RuntimeError naming the
    mops version when its lease module lacks a function the adapter replaces."""
    lease = _lease_module()
    from thds.mops.pure.core.lease import maintain

    needed = [*_REPLACED, "CannotMaintainLease", "LeaseLostError"]
    missing = [name for name in needed if not hasattr(lease, name)]
    in_maintain = ("add_lease_to_maintenance_daemon", "MAINTAIN_LEASES")
    missing += [f"maintain.{n}" for n in in_maintain if not hasattr(maintain, n)]
    if missing:
        raise RuntimeError(
            f"thds-mops {_mops_version()} has no {', '.join(missing)} in its lease module: "
            f"blob_lock.mops is tested with thds-mops {', '.join(TESTED_WITH)}; pin one of those"
        )
    with _guard:
        if not _originals:
            for name in _REPLACED:
                _originals[("lease", name)] = getattr(lease, name)
            for name in ("maintain_to_release", "add_lease_to_maintenance_daemon"):
                _originals[("maintain", name)] = getattr(maintain, name)
            for name in _REPLACED:
                setattr(lease, name, globals()[name])
            # mops's maintain_to_release calls this module global, not the package's.
            maintain.maintain_to_release = maintain_to_release
            maintain.add_lease_to_maintenance_daemon = add_lease_to_maintenance_daemon
    os.environ[ENV] = "1"


def uninstall() -> None:
    """Puts mops's own lease functions back (for tests); leases held stay held."""
    from thds.mops.pure.core.lease import maintain

    lease = _lease_module()
    with _guard:
        for (where, name), original in _originals.items():
            setattr(lease if where == "lease" else maintain, name, original)
        _originals.clear()
    os.environ.pop(ENV, None)


def installed() -> bool:
    """True when mops's lease calls in this process go through blob-lock."""
    return bool(_originals)


def _credential(options: dict[str, str] | None) -> Any:
    """The credential mops itself uses for an ADLS account (thds.adls's SharedCredential),
    unless the environment or options give Azure credentials; None elsewhere."""
    if not options or "azure_storage_account_name" not in options:
        return None
    from blob_lock._credentials import _azure

    if _azure.explicit(options):
        return None
    try:
        from thds.adls.shared_credential import SharedCredential  # type: ignore[import-not-found,unused-ignore]  # an extra
    except ImportError:
        return None
    return SharedCredential()


def lock_location(lease_dir_uri: str) -> tuple[str, dict[str, str] | None]:
    """The lock URI and storage options for a mops lease directory URI."""
    if not isinstance(lease_dir_uri, str):
        raise TypeError(f"a mops lease URI is a str, got {lease_dir_uri!r}")
    scheme, sep, rest = lease_dir_uri.partition("://")
    if not sep:
        return str(Path(lease_dir_uri).expanduser().resolve()), None
    if scheme == "file":
        return str(Path(rest).expanduser().resolve()), None
    if scheme == "adls":
        account, _, path = rest.partition("/")
        container, _, key = path.partition("/")
        if not account or not container or not key:
            raise ValueError(
                f"{lease_dir_uri!r} is not adls://ACCOUNT/CONTAINER/PATH, as mops spells ADLS URIs"
            )
        return f"az://{container}/{key}", {"azure_storage_account_name": account}
    raise ValueError(
        f"blob_lock.mops cannot lock {lease_dir_uri!r}: mops URIs with scheme {scheme!r} are not "
        "supported; use a file:// or adls:// blob root, or uninstall the adapter"
    )


def _grace() -> float:
    raw = os.environ.get(GRACE_ENV, "600")
    try:
        grace = float(raw)
    except ValueError:
        raise ValueError(f"{GRACE_ENV}={raw!r} is not a number of seconds") from None
    return grace


class _Lease:
    """What ``acquire`` returns to mops (its ``LeaseAcquired``): the held lock, renewed by
    blob-lock's heartbeat from the acquisition on. Pickled into another process (mops's
    lazy result futures), it becomes a co-owner there: maintaining it keeps the lock alive,
    releasing it releases that owner's acquisition."""

    def __init__(
        self,
        uri: str,
        options: dict[str, str] | None,
        writer_id: str,
        expire_s: float,
        token: int,
        lock: BlobLock | None,
    ) -> None:
        self.writer_id, self.expire_s, self.token = writer_id, expire_s, token
        self._uri, self._options, self._lock = uri, options, lock
        self._kept: KeepAlive | None = None
        self._done = threading.Lock()
        self._released = False

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self._uri, self._options, self.writer_id, self.expire_s, self.token, None)
        return (_Lease, args)

    def maintain(self) -> None:
        """Renewal is blob-lock's heartbeat; a copy in another process keeps it alive."""
        with self._done:
            if self._lock is None and self._kept is None and not self._released:
                opts = self._options
                self._kept = keep_alive(
                    self._uri,
                    self.writer_id,
                    storage_options=opts,
                    credential_provider=_credential(opts),
                )

    def hand_off(self) -> None:
        grace = _grace()
        if grace > 0 and self._lock is not None and self._lock.held:
            self._lock.hand_off(grace)

    def release(self) -> None:
        """Releases; again (mops releases twice) it does nothing. A copy releases the
        acquisition it stands for, if the lock is still that acquisition's."""
        with self._done:
            if self._released:
                return
            self._released = True
            kept, self._kept = self._kept, None
            lock, self._lock = self._lock, None
        if kept is not None:
            kept.stop()
        if lock is not None:
            if lock.held or lock.lost:
                lock._release_at_end()  # the invocation is done: best effort
            return
        opts = self._options
        break_lock(
            self._uri,
            owner=self.writer_id,
            token=self.token,
            storage_options=opts,
            credential_provider=_credential(opts),
        )


class _Remote:
    """What ``make_remote_lease_writer`` returns: the remote's keep-alive of the lock."""

    def __init__(self, kept: KeepAlive, expire_s: float) -> None:
        self.writer_id, self.expire_s, self._kept = kept.owner, expire_s, kept

    def maintain(self) -> None:
        """Renewal is blob-lock's keep-alive."""

    def release(self) -> None:
        """A remote never releases (mops's remote writer does not either)."""

    def stop(self) -> None:
        self._kept.stop()


def acquire(
    lease_dir_uri: str,
    *,
    expire: timedelta = timedelta(seconds=30),
    acquire_margin: timedelta = timedelta(seconds=0.0),
    debug: bool = True,
    block: timedelta | None = timedelta(seconds=0),
) -> _Lease | None:
    """mops's ``lease.acquire`` on blob-lock: None when someone else holds the lock
    (``block`` of 0: one attempt; a timedelta: wait that long; None: wait for ever)."""
    uri, options = lock_location(lease_dir_uri)
    lock = BlobLock(
        uri, expire=expire, storage_options=options, credential_provider=_credential(options)
    )
    wait = None if block is None else block.total_seconds()
    deadline = None if wait is None else time.monotonic() + wait
    margin = acquire_margin.total_seconds()
    while True:
        began = time.monotonic()
        if deadline is None:
            got = lock.acquire()
        elif deadline - began <= 0:
            try:
                got = lock.try_acquire()
            except StoreSaturated:
                # The store is taking all this process sends it (held locks come first):
                # to mops, a lock not taken this time, which its waiter tries again later.
                return None
        else:
            got = lock.acquire(timeout=deadline - began)
        if not got:
            return None
        attempt = time.monotonic() - began if wait == 0 else None
        if _verified(lock, margin, attempt):
            token = lock.token or 0
            return _Lease(uri, options, lock.owner, float(lock.expire), token, lock)
        if deadline is not None and time.monotonic() >= deadline:
            return None  # lost the race to a mops write, and no time left to wait


# At least this long after an acquisition before it is trusted: a plain mops writer is
# Python over fsspec, slower between its read and its write than our own attempt.
_MIN_PAUSE = 0.01


def _pause(seconds: float) -> None:
    time.sleep(seconds)


def _verified(lock: BlobLock, margin: float, attempt: float | None) -> bool:
    """Plain mops writes its lease without a condition, after a read that may come before
    our write; it trusts its own write only after waiting twice its read-and-write time (or
    its ``acquire_margin``) and reading again. Adapter processes do the same: twice the
    acquisition attempt's time (one read's time four times over, when it waited), at least
    ``acquire_margin`` and 10 ms, so that such a mops write landing just after ours makes
    us lose, not both hold. False (the lock released, nothing written) when it did."""
    try:
        began = time.monotonic()
        for look in range(2):
            seen = lock.inspect()
            if seen.owner != lock.owner or seen.token != lock.token:
                lock._release_at_end()  # another owner's lockfile: writes nothing
                return False
            if look == 0:
                read = time.monotonic() - began
                own = 2 * attempt if attempt is not None else 4 * read
                _pause(max(0.0, max(own, margin, _MIN_PAUSE) - read))
        return True
    except BaseException:
        lock._release_at_end()  # best effort: the error that came is the one to raise
        raise


def add_lease_to_maintenance_daemon(lease_acq: Any) -> Callable[[], None]:
    """Keeps ``lease_acq`` alive until the returned function is called, which releases it
    (an orchestrator's) or stops renewing (a remote's)."""
    if isinstance(lease_acq, _Remote):
        return lease_acq.stop
    if isinstance(lease_acq, _Lease):
        lease_acq.maintain()
        return lease_acq.release
    return _originals[("maintain", "add_lease_to_maintenance_daemon")](lease_acq)


def maintain_to_release(acquired_lease: Any) -> Callable[[], None]:
    """Where mops hands the invocation to its remote: hands the lock off with the launch
    grace, then keeps it alive (or not, with mops's ``no_maintain_leases``) until released."""
    from thds.mops.pure.core.lease import maintain

    if isinstance(acquired_lease, _Lease):
        acquired_lease.hand_off()
    if not maintain.MAINTAIN_LEASES():
        return acquired_lease.release
    return add_lease_to_maintenance_daemon(acquired_lease)


def make_remote_lease_writer(lease_dir_uri: str, expected_writer_id: str = "") -> _Remote:
    """The remote's side: keeps the orchestrator's lock alive as its co-owner from now on.
    Raises mops's ``LeaseLostError`` when another owner holds it or it was released, and
    ``CannotMaintainLease`` when there is no lockfile or the store cannot be reached."""
    lease = _lease_module()
    uri, options = lock_location(lease_dir_uri)
    credential = _credential(options)
    try:
        owner = (
            expected_writer_id
            or inspect(uri, storage_options=options, credential_provider=credential).owner
        )
        if not owner:
            raise LockNotFound(f"no lease at {uri}", uri)
        kept = keep_alive(uri, owner, storage_options=options, credential_provider=credential)
    except LockStolen as e:
        raise lease.LeaseLostError(str(e)) from e
    except (LockError, OSError) as e:
        raise lease.CannotMaintainLease(str(e)) from e
    try:
        seen = inspect(uri, storage_options=options, credential_provider=credential)
    except BaseException as e:
        kept.stop()  # nobody would hold the handle: it would renew for ever
        if isinstance(e, (LockError, OSError)):
            raise lease.CannotMaintainLease(str(e)) from e
        raise
    return _Remote(kept, float(seen.expire_s or 0.0))


def read_lease(memo_uri: str) -> dict[str, Any] | None:
    """mops's ``read_lease``: the lease's fields as mops names them, or None (never raises)."""
    try:
        uri, options = lock_location(f"{memo_uri.rstrip('/')}/lock")
        seen = inspect(uri, storage_options=options, credential_provider=_credential(options))
    except Exception:
        return None
    if seen.state is LockState.UNLOCKED:
        return None

    def iso(t: Any) -> str:
        return t.isoformat() if t is not None else ""

    return {
        "writer_id": seen.owner,
        "written_at": iso(seen.written_at),
        "expire_s": seen.expire_s,
        "hostname": seen.hostname or "",
        "pid": seen.pid or "",
        "tid": 0,
        "write_count": seen.write_count or 0,
        "first_written_at": "",
        "first_acquired_at": iso(seen.first_acquired_at),
        "released_at": iso(seen.released_at),
    }


def _plugin(uri: str) -> None:
    """mops's blob-store plugin hook (entry point ``thds.mops.pure.blob_stores``): mops loads
    it when it is imported, which installs the adapter where ``BLOB_LOCK_MOPS=1``. It claims
    no URI."""
    return None


if os.environ.get(ENV) == "1":
    install()
