"""The shape of ``stats()``, declared once for type checkers and for the native module's
stub: a leaf, which imports nothing of the package."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["Histogram", "Stats"]


class Histogram(TypedDict):
    """Observations in seconds: how many, their sum, and cumulative counts by upper bound."""

    count: int
    sum: float
    buckets: list[tuple[float, int]]
    """``(upper bound in seconds, observations at most that)``, the last bound ``inf``."""


class Stats(TypedDict):
    """What ``stats()`` returns (each key is described there)."""

    requests: dict[str, dict[str, int]]
    acquisitions: dict[str, int]
    releases: int
    renewals: dict[str, int]
    losses: dict[str, int]
    acquire_wait_seconds: Histogram
    hold_seconds: Histogram
    renewal_latency_seconds: Histogram
    renewal_margin_seconds: Histogram
    renewal_margin_min_seconds: float | None
    throttled: int
    queued: int
    slots_held: int
    semaphore_waiters: int
