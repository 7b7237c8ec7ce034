"""Where the native side's log records enter ``logging`` (src/python/logs.rs): records made
on the native threads, with the time and thread they were made on, and the levels Python's
configuration enables now, which the native side reads again at every change Python's own
cache of levels hears of (``setLevel``, ``disable``, ``basicConfig``, ``dictConfig``) and
every second besides."""

from __future__ import annotations

import logging
from typing import Callable, Optional

# (logger name, level, message, path, line, created, thread name)
Row = tuple[str, int, str, Optional[str], Optional[int], float, Optional[str]]


def _least(logger: logging.Logger) -> int:
    """The least level ``logger`` takes (``isEnabledFor`` of anything below is False)."""
    return max(logger.getEffectiveLevel(), logger.manager.disable + 1)


def thresholds(names: list[str]) -> tuple[list[int], int]:
    """The least level each named logger takes, and the least any logger under
    ``blob_lock`` takes (those not made yet take their parent's)."""
    each = [_least(logging.getLogger(n)) for n in names]
    under = [_least(logging.getLogger("blob_lock"))]
    for name, logger in list(logging.root.manager.loggerDict.items()):
        if name.startswith("blob_lock.") and isinstance(logger, logging.Logger):
            under.append(_least(logger))
    return each, min(under)


def watch(changed: Callable[[], object]) -> None:
    """Calls ``changed`` after each clearing of ``logging``'s cache of levels, which every
    change of a level or of ``logging.disable`` makes (once per process). A private method of
    ``logging`` (since Python 3.7): without it, levels are read again every second only."""
    original: Callable[[logging.Manager], None] | None = vars(logging.Manager).get("_clear_cache")
    if original is None or getattr(original, "_blob_lock_watch", False):
        return

    def _clear_cache(self: logging.Manager) -> None:
        original(self)
        changed()

    _clear_cache._blob_lock_watch = True  # type: ignore[attr-defined]
    setattr(logging.Manager, "_clear_cache", _clear_cache)  # noqa: B010 - a private name


def deliver(rows: list[Row]) -> None:
    """Hands each record to its logger, if it takes its level. The first exception raised
    meanwhile (a signal handler's, such as KeyboardInterrupt) is raised after the rest."""
    raised: BaseException | None = None
    start = getattr(logging, "_startTime", None)
    for name, level, message, path, line, created, thread in rows:
        try:
            logger = logging.getLogger(name)
            if not logger.isEnabledFor(level):
                continue
            record = logger.makeRecord(
                name, level, path or "(native)", line or 0, message, (), None
            )
            record.created = created
            record.msecs = (created - int(created)) * 1000
            if start is not None:
                record.relativeCreated = (created - start) * 1000
            if thread is not None:
                record.threadName = thread
            logger.handle(record)
        except BaseException as e:
            if raised is None:
                raised = e
    if raised is not None:
        raise raised


def _start() -> None:
    """Reads the levels now, and again at each change (the native module's logger takes
    every record until then)."""
    from blob_lock import _blob_lock

    watch(_blob_lock.logging_changed)
    _blob_lock.logging_changed()


_start()
