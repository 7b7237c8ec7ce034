"""OpenTelemetry metrics of blob-lock: ``blob_lock.opentelemetry.instrument()`` creates
observable instruments that read ``blob_lock.stats()`` whenever the meter provider collects.
Needs ``opentelemetry-api`` (``pip install 'blob-lock[opentelemetry]'``) and, to export,
an SDK meter provider.

Counters: ``blob_lock.requests{kind, outcome}``, ``blob_lock.acquisitions{outcome}``,
``blob_lock.releases``, ``blob_lock.renewals{outcome}``, ``blob_lock.losses{cause}``,
``blob_lock.throttled``; gauges: ``blob_lock.queued``, ``blob_lock.slots_held``,
``blob_lock.semaphore_waiters``, ``blob_lock.renewal_margin_min``
(seconds; no observation while no renewal landed in the last minutes).
OpenTelemetry has no asynchronous histogram, so each histogram of ``stats()`` (for instance
``acquire_wait_seconds``) is exported as three observable counters:
``blob_lock.acquire_wait_seconds.count``, ``.sum`` (seconds) and ``.bucket{le}`` (the
cumulative count at or below each bound, as Prometheus has it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

try:
    from opentelemetry import metrics  # type: ignore[import-not-found,unused-ignore]  # an extra
    from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation  # type: ignore[import-not-found,unused-ignore]  # an extra
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "blob_lock.opentelemetry needs opentelemetry-api: pip install 'blob-lock[opentelemetry]'"
    ) from e

from blob_lock import __version__
from blob_lock._stats import stats

__all__ = ["instrument"]

_HISTOGRAMS = (
    "acquire_wait_seconds",
    "hold_seconds",
    "renewal_latency_seconds",
    "renewal_margin_seconds",
)

Read = Callable[[Mapping[str, Any]], Iterable[Observation]]


def _callback(read: Read) -> Callable[[CallbackOptions], Iterable[Observation]]:
    return lambda _options: list(read(stats()))


def _requests(s: Mapping[str, Any]) -> Iterable[Observation]:
    for kind, outcomes in s["requests"].items():
        for outcome, n in outcomes.items():
            yield Observation(n, {"kind": kind, "outcome": outcome})


def _by(name: str, label: str) -> Read:
    return lambda s: [Observation(n, {label: value}) for value, n in s[name].items()]


def _field(name: str, field: str) -> Read:
    return lambda s: [Observation(s[name][field])]


def _bucket(name: str) -> Read:
    def read(s: Mapping[str, Any]) -> Iterable[Observation]:
        for le, n in s[name]["buckets"]:
            yield Observation(n, {"le": "+Inf" if math.isinf(le) else repr(le)})

    return read


def instrument(meter_provider: MeterProvider | None = None) -> None:
    """Creates blob-lock's observable instruments on a meter of ``meter_provider`` (the
    global one unless given). Call once per provider."""
    meter = metrics.get_meter("blob_lock", __version__, meter_provider=meter_provider)
    counters: list[tuple[str, str, str, Read]] = [
        ("requests", "Store requests made by the lock protocol.", "1", _requests),
        ("acquisitions", "Acquisitions, by how they ended.", "1", _by("acquisitions", "outcome")),
        ("releases", "Leases ended by their release.", "1",
         lambda s: [Observation(s["releases"])]),
        ("renewals", "Renewals: ok, or failed and tried again.", "1",
         _by("renewals", "outcome")),
        ("losses", "Leases lost, by cause.", "1", _by("losses", "cause")),
        ("throttled", "Store answers asking this process to slow down.", "1",
         lambda s: [Observation(s["throttled"])]),
    ]  # fmt: skip
    for name in _HISTOGRAMS:
        counters += [
            (f"{name}.count", f"Observations of {name}.", "1", _field(name, "count")),
            (f"{name}.sum", f"Sum of {name}.", "s", _field(name, "sum")),
            (f"{name}.bucket", f"Cumulative observations of {name} at or below `le`.", "1",
             _bucket(name)),
        ]  # fmt: skip
    for name, description, unit, read in counters:
        meter.create_observable_counter(
            f"blob_lock.{name}", callbacks=[_callback(read)], unit=unit, description=description
        )
    gauges: list[tuple[str, str, str, Read]] = [
        ("queued", "Store requests waiting now for a pass of their store's load.", "1",
         lambda s: [Observation(s["queued"])]),
        ("slots_held", "Semaphore slots held now.", "1",
         lambda s: [Observation(s["slots_held"])]),
        ("semaphore_waiters", "Semaphore acquisitions waiting now.", "1",
         lambda s: [Observation(s["semaphore_waiters"])]),
        ("renewal_margin_min", "The least margin a renewal left before its deadline.", "s",
         lambda s: [] if s["renewal_margin_min_seconds"] is None
         else [Observation(s["renewal_margin_min_seconds"])]),
    ]  # fmt: skip
    for name, description, unit, read in gauges:
        meter.create_observable_gauge(
            f"blob_lock.{name}", callbacks=[_callback(read)], unit=unit, description=description
        )
