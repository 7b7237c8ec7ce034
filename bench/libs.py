"""The locks under comparison, behind one small interface: ``make(kind, where, expire)``
returns an object with ``acquire(timeout=None) -> bool`` (blocking; False on timeout) and
``release()``.

- ``blob-lock`` (and ``blob-lock-lww``): ``BlobLock(uri, expire=...)``; the lockfile is
  ``<where>/lock.json``.
- ``mops``: thds-mops's lease, ``lease.acquire(where, expire=..., debug=False, block=...)``
  and ``.release()``; the leasefile is ``<where>/lock.json`` (the same format). Its blocking
  acquisition polls every 0.2 s.
- ``flufl.lock``: ``flufl.lock.Lock(<where>.lck, lifetime=expire)``, ``lock()``/``unlock()``
  (NFS-safe hard-link lock files; a blocked ``lock()`` sleeps 0.01 to 2.01 s between tries).
- ``filelock``: ``filelock.FileLock(<where>.lock)``, ``acquire()``/``release()`` (flock(2);
  a blocked acquire polls every 0.05 s). Not a lease: nothing expires; it is here as the
  floor of what a local lock costs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

KINDS = ["blob-lock", "mops", "flufl.lock", "filelock"]


class Lockish(Protocol):
    def acquire(self, timeout: float | None = None) -> bool: ...
    def release(self) -> None: ...


class _Blob:
    def __init__(
        self,
        where: str,
        expire: float,
        protocol: str = "cas",
        storage_options: dict[str, str] | None = None,
    ) -> None:
        from blob_lock import BlobLock

        self.lock = BlobLock(
            where, expire=expire, protocol=protocol, storage_options=storage_options
        )

    def acquire(self, timeout: float | None = None) -> bool:
        return self.lock.acquire(timeout=timeout)

    def try_acquire(self) -> bool:
        return self.lock.try_acquire()

    def release(self) -> None:
        self.lock.release()


class _Mops:
    def __init__(self, where: str, expire: float) -> None:
        from thds.mops.pure.core import lease

        self._lease = lease
        self.where, self.expire = where, timedelta(seconds=expire)
        self.held: Any = None

    def acquire(self, timeout: float | None = None) -> bool:
        block = None if timeout is None else timedelta(seconds=max(timeout, 0.0))
        self.held = self._lease.acquire(self.where, expire=self.expire, debug=False, block=block)
        return self.held is not None

    def try_acquire(self) -> bool:
        return self.acquire(0.0)

    def release(self) -> None:
        held, self.held = self.held, None
        held.release()


class _Flufl:
    def __init__(self, where: str, expire: float) -> None:
        from flufl.lock import Lock

        self.lock = Lock(where + ".lck", lifetime=timedelta(seconds=expire))

    def acquire(self, timeout: float | None = None) -> bool:
        from flufl.lock import TimeOutError

        try:
            self.lock.lock(timeout=None if timeout is None else timedelta(seconds=timeout))
        except TimeOutError:
            return False
        return True

    def try_acquire(self) -> bool:
        return self.acquire(0.0)

    def release(self) -> None:
        self.lock.unlock()


class _FileLock:
    def __init__(self, where: str, expire: float) -> None:
        from filelock import FileLock

        self.lock = FileLock(where + ".lock")

    def acquire(self, timeout: float | None = None) -> bool:
        from filelock import Timeout

        try:
            self.lock.acquire(timeout=-1 if timeout is None else timeout)
        except Timeout:
            return False
        return True

    def try_acquire(self) -> bool:
        return self.acquire(0.0)

    def release(self) -> None:
        self.lock.release()


def make(kind: str, where: str, expire: float, **kw: Any) -> Any:
    if kind == "blob-lock":
        return _Blob(where, expire, **kw)
    if kind == "blob-lock-lww":
        return _Blob(where, expire, protocol="lww", **kw)
    if kind == "mops":
        return _Mops(where, expire)
    if kind == "flufl.lock":
        return _Flufl(where, expire)
    if kind == "filelock":
        return _FileLock(where, expire)
    raise ValueError(f"unknown lock kind {kind!r}")


def poll_max(expire: float) -> float:
    """blob-lock's largest poll interval of a waiter for ``expire`` (src/timing.rs:
    ``(expire / 10).clamp(50 ms, 3 s)``); each pause is that times a jitter in [0.5, 1)."""
    return min(max(expire / 10, 0.05), 3.0)
