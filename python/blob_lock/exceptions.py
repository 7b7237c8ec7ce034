"""The exceptions of blob_lock. Bad arguments raise ValueError; everything else a LockError."""

from __future__ import annotations

from typing import Any

__all__ = [
    "CredentialsError",
    "InvalidLockFile",
    "LockError",
    "LockLost",
    "LockNotFound",
    "LockStolen",
    "LockTimeout",
    "StoreError",
    "StoreSaturated",
    "UnsafeStore",
]


class LockError(Exception):
    """Base class of every blob_lock error. ``uri`` names the lock or lockfile concerned."""

    def __init__(self, message: str, uri: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.uri = uri

    def __reduce__(self) -> tuple[Any, ...]:  # keep uri through pickling (multiprocessing)
        return (type(self), (self.message, self.uri))


class LockTimeout(LockError, TimeoutError):
    """The lock was not acquired within the timeout. The message says who held it, or, when
    the store was saturated at the end (no new lock is tried then), that and the store's
    figures: ``saturated`` is then the ``StoreSaturated`` error, also its ``__cause__``.
    ``acquire()`` returns False instead of raising it, and keeps it in ``last_timeout``."""

    @property
    def saturated(self) -> StoreSaturated | None:
        """Why no new lock was tried at the end, when the store was saturated; else None."""
        cause = self.__cause__
        return cause if isinstance(cause, StoreSaturated) else None


class LockLost(LockError):
    """A held lock stopped being ours (taken over after expiry, or released by someone else)."""


class LockStolen(LockError):
    """keep_alive found the lockfile naming another owner, or released."""


class LockNotFound(LockError):
    """keep_alive found no lockfile at the URI."""


class InvalidLockFile(LockError):
    """The lockfile is not one we can trust (not JSON, fields missing, too large).

    It is never overwritten: inspect it, and delete it by hand if no process uses the lock.
    """


class UnsafeStore(LockError):
    """``protocol="cas"`` on a store that does not honour conditional writes: two owners
    could both acquire. Every process checks a store once before its first ``cas`` write
    (four requests on a scratch key beside the lock); the message names the check that
    failed. Use ``protocol="auto"`` (which falls back to ``lww`` there) or ``"lww"``; if
    ``blob-lock doctor --race`` finds the store safe, set the storage option
    ``blob_lock_conditional_writes="trust"``.
    """


class StoreError(LockError):
    """The store refused or failed a request; the message carries the store's own words.

    ``transient`` is True when a retry may help (5xx, timeouts), False for bad credentials,
    missing buckets or containers, and bad configuration.
    """

    def __init__(self, message: str, uri: str | None = None, transient: bool = False) -> None:
        super().__init__(message, uri)
        self.transient = transient

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.message, self.uri, self.transient))


class StoreSaturated(StoreError):
    """The store is taking all this process can send it, so a new lock was not taken: the
    renewals of the locks already held there come first. Raised by ``try_acquire`` while
    renewals wait for the store, while it asks to slow down (throttling), or while the held
    locks' renewals need 80 % or more of what it has been measured to answer (the measure
    grows as the store answers more, so locks taken earlier may be above it now). An
    acquisition that waits retries; if its timeout passes while the store is saturated, its
    ``LockTimeout`` carries this error as ``saturated`` (and ``__cause__``), and
    ``acquire()``, which returns False, keeps that ``LockTimeout`` in the lock's
    ``last_timeout``. The message gives the figures. Always ``transient``: retry later, hold
    fewer locks on the store, or raise ``expire`` (each lock then renews less often). Held
    locks are not affected.
    """

    def __init__(self, message: str, uri: str | None = None, transient: bool = True) -> None:
        super().__init__(message, uri, transient)


class CredentialsError(LockError):
    """No credentials could be had for a cloud store, or fetching them failed: nothing was
    sent to the store. The message says where they were looked for and what to do
    (``aws configure``, ``aws sso login --profile X``, ``az login``, ``gcloud auth
    application-default login``). A store that refuses the credentials it was sent raises
    ``StoreError`` instead."""
