"""The typing of the lock's keyword arguments, written by ``make options``
(``_make_option_types.py``) from their one definition in ``src/lease/settings.rs``: do not
edit; tests/python/test_options.py fails until it is current."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:
    from blob_lock._args import Seconds
    from blob_lock._credentials import CredentialProvider
    from blob_lock.exceptions import LockLost

__all__ = ["KeepAliveOptions", "LockOptions"]


class LockOptions(TypedDict, total=False):
    """The keyword arguments of ``BlobLock``, ``locked`` and ``claim_memo``."""

    expire: Seconds
    """Seconds after its last write at which a lock nobody renews expires (0.5 s to 7 days).
    Default ``30.0``.
    """
    heartbeat: Seconds | None
    """Seconds between renewals; default ``expire / 3``, below ``expire / 2``."""
    timeout: Seconds | None
    """Seconds a ``with`` block or ``acquire`` waits for the lock before ``LockTimeout``; None
    waits for ever.
    """
    protocol: Literal["auto", "cas", "lww"]
    """``"cas"`` (conditional writes: mutual exclusion), ``"lww"`` (last writer wins after a settle
    wait: best effort, for stores without conditional writes) or ``"auto"`` (``cas`` where the
    store honours conditional writes, else ``lww`` with a warning). Default ``'auto'``.
    """
    storage_options: Mapping[str, str] | None
    """object_store configuration keys (``aws_endpoint``, ``azure_storage_account_name``, ...) on
    top of the environment, and ``blob_lock_conditional_writes="trust"``.
    """
    credential_provider: CredentialProvider | object | None
    """Where credentials come from (a callable returning them, a boto3 session, an azure-identity
    credential, google-auth credentials); None: ``set_credentials``, else the cloud's own chain.
    """
    settle: Seconds | None
    """lww only: seconds a writer waits after writing before reading back; default ``expire / 20``
    within 0.05 to 0.5 s.
    """
    clock_skew: Seconds | None
    """How far machines' wall clocks may disagree, in seconds: a lock last written more than
    ``expire + clock_skew`` ago is taken at once; None switches that off. Default ``60.0``.
    """
    on_lost: Callable[[LockLost], object] | None
    """Called once, on one of blob-lock's callback threads, with the ``LockLost`` error when a held
    lock is lost.
    """
    raise_on_lost: bool
    """Whether leaving a ``with`` block after a loss raises ``LockLost``. Default ``True``."""
    labels: Mapping[str, str] | None
    """Written into the lockfile by every acquisition: who holds the lock and why (at most 32; keys
    of 1 to 63 ASCII letters, digits, ``_-.``; values up to 1,024 characters).
    """


class KeepAliveOptions(TypedDict, total=False):
    """The keyword arguments of ``keep_alive``: the timing is the orchestrator's."""

    protocol: Literal["auto", "cas", "lww"]
    """``"cas"`` (conditional writes: mutual exclusion), ``"lww"`` (last writer wins after a settle
    wait: best effort, for stores without conditional writes) or ``"auto"`` (``cas`` where the
    store honours conditional writes, else ``lww`` with a warning). Default ``'auto'``.
    """
    storage_options: Mapping[str, str] | None
    """object_store configuration keys (``aws_endpoint``, ``azure_storage_account_name``, ...) on
    top of the environment, and ``blob_lock_conditional_writes="trust"``.
    """
    credential_provider: CredentialProvider | object | None
    """Where credentials come from (a callable returning them, a boto3 session, an azure-identity
    credential, google-auth credentials); None: ``set_credentials``, else the cloud's own chain.
    """
    on_lost: Callable[[LockLost], object] | None
    """Called once, on one of blob-lock's callback threads, with the ``LockLost`` error when a held
    lock is lost.
    """
