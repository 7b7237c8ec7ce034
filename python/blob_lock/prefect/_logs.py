"""What ``blob_lock.prefect`` logs, and where: each record goes to the run logger of the
Prefect flow or task run that acquired the key (so that it reaches Prefect's API and UI
beside the run's own logs, as ``get_run_logger()`` records do), or, with no run active, to
the module's logger ``blob_lock.prefect``; to one of the two, never both. Imported by
``blob_lock.prefect`` only, with Prefect installed.

A waiter says once, at INFO, who holds the key it waits for; a takeover of a key whose
holder stopped renewing it (a process that died) and a loss are WARNINGs. The loss and a
``hold_timeout``'s end come on other threads (blob-lock's callback threads, a timer),
where no run is active: they use the logger of the run that acquired.
"""

from __future__ import annotations

import logging
from typing import Union

from blob_lock._inspect import Inspection
from blob_lock.prefect._held import HOLDER_LABEL

__all__ = [
    "MODULE",
    "Logger",
    "hold_ended",
    "lost",
    "release_unanswered",
    "run_logger",
    "took_over",
    "waits",
]

Logger = Union[logging.Logger, logging.LoggerAdapter]  # type: ignore[type-arg,unused-ignore]

MODULE: logging.Logger = logging.getLogger("blob_lock.prefect")


def run_logger() -> Logger:
    """The current run's logger (``get_run_logger()``) while a flow or task run is active in
    this thread or task, else the module's. Looked up first, as ``get_run_logger`` itself
    does (``TaskRunContext.get()``, ``FlowRunContext.get()``): outside a run it raises, or,
    with Prefect's run loggers disabled, returns a logger that drops everything."""
    # An extra's, installed where blob_lock.prefect is imported.
    from prefect.context import (  # type: ignore[import-not-found,unused-ignore]
        FlowRunContext,
        TaskRunContext,
    )
    from prefect.exceptions import MissingContextError  # type: ignore[import-not-found,unused-ignore]
    from prefect.logging import get_run_logger  # type: ignore[import-not-found,unused-ignore]

    if TaskRunContext.get() is None and FlowRunContext.get() is None:
        return MODULE
    try:
        return get_run_logger()
    except MissingContextError:  # pragma: no cover - a context that ended meanwhile
        return MODULE


def _holder_of(seen: Inspection) -> str:
    """Who the lockfile names: the Prefect holder, the owner, and where it runs."""
    where = " ".join(
        [f"owner {seen.owner}"]
        + ([f"on {seen.hostname}"] if seen.hostname else [])
        + ([f"pid {seen.pid}"] if seen.pid else [])
    )
    holder = seen.labels.get(HOLDER_LABEL)
    return f"holder {holder} ({where})" if holder else where


def waits(log: Logger, key: str, holder: str, by: str | Inspection) -> None:
    """``holder`` waits for ``key``, held by ``by``: another holder of this process, or
    what a read of the lockfile showed."""
    if isinstance(by, Inspection):
        if by.free:
            return  # released meanwhile: the wait ends at once
        left = by.expires_in
        by = _holder_of(by)
        if left is not None:
            by += f", its lease running {max(left, 0.0):.0f}s more unless renewed"
    log.info("Prefect lock %r: holder %s waits; held by %s", key, holder, by)


def took_over(log: Logger, key: str, holder: str, previous: str) -> None:
    """``holder`` took ``key`` over from ``previous`` (a lockfile described), whose lease
    had expired."""
    log.warning(
        "Prefect lock %r: holder %s took it over from %s, whose lease had expired (it "
        "stopped renewing: its process died or lost the store); its task may have left "
        "partial work",
        key,
        holder,
        previous,
    )


def lost(log: Logger, key: str, holder: str, why: str) -> None:
    """``holder``'s lock of ``key`` was lost while held, for ``why`` (the LockLost's
    message, which says the cause)."""
    log.warning(
        "Prefect lock %r of holder %s was lost while held: %s; Prefect will refuse this "
        "holder's write of the key's result",
        key,
        holder,
        why,
    )


def release_unanswered(log: Logger, key: str, holder: str, what: str, lost: bool) -> None:
    """The release (the task's work done) was not answered in time: it goes on in the
    background, and the lock frees itself at its expiry. At WARNING, once; after a loss
    (logged already, with its cause) DEBUG only."""
    log.log(
        logging.DEBUG if lost else logging.WARNING,
        "Prefect lock %r: holder %s's release: %s",
        key,
        holder,
        what,
    )


def hold_ended(log: Logger, key: str, holder: str) -> None:
    """``hold_timeout`` ended while ``holder`` still held ``key``."""
    log.warning(
        "Prefect lock %r: holder %s still held it at its hold_timeout; released, and the "
        "next holder may take it (Prefect's hold_timeout)",
        key,
        holder,
    )
