"""Prometheus metrics of blob-lock: ``blob_lock.prometheus.register()`` adds a collector that
reads ``blob_lock.stats()`` at each scrape. Needs ``prometheus_client``
(``pip install 'blob-lock[prometheus]'``).

Metrics: ``blob_lock_requests_total{kind, outcome}``,
``blob_lock_acquisitions_total{outcome}``, ``blob_lock_releases_total``,
``blob_lock_renewals_total{outcome}``, ``blob_lock_losses_total{cause}``,
``blob_lock_throttled_total``, the gauges ``blob_lock_queued``,
``blob_lock_slots_held``, ``blob_lock_semaphore_waiters`` and
``blob_lock_renewal_margin_min_seconds`` (absent while no renewal landed in the last
minutes), and the histograms ``blob_lock_acquire_wait_seconds``, ``blob_lock_hold_seconds``,
``blob_lock_renewal_latency_seconds`` and ``blob_lock_renewal_margin_seconds``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

try:
    from prometheus_client.core import (  # type: ignore[import-not-found,unused-ignore]  # an extra
        REGISTRY,
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
        Metric,
    )
    from prometheus_client.registry import Collector, CollectorRegistry  # type: ignore[import-not-found,unused-ignore]  # an extra
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "blob_lock.prometheus needs prometheus_client: pip install 'blob-lock[prometheus]'"
    ) from e

from blob_lock._stats import stats

__all__ = ["BlobLockCollector", "register"]

_HISTOGRAMS = {
    "acquire_wait_seconds": "Seconds each acquisition waited (not single attempts found held).",
    "hold_seconds": "Seconds from each acquisition to its release or loss.",
    "renewal_latency_seconds": "Seconds each successful renewal took.",
    "renewal_margin_seconds": "Seconds left before the lease deadline when each renewal succeeded.",
}


class BlobLockCollector(Collector):
    """Reads ``blob_lock.stats()`` at each collection."""

    def collect(self) -> Iterator[Metric]:
        s: Mapping[str, Any] = stats()
        requests = CounterMetricFamily(
            "blob_lock_requests",
            "Store requests made by the lock protocol, by kind and outcome.",
            labels=["kind", "outcome"],
        )
        for kind, outcomes in s["requests"].items():
            for outcome, n in outcomes.items():
                requests.add_metric([kind, outcome], n)
        yield requests
        yield _by("acquisitions", "Acquisitions, by how they ended.", "outcome", s)
        releases = CounterMetricFamily("blob_lock_releases", "Leases ended by their release.")
        releases.add_metric([], s["releases"])
        yield releases
        yield _by("renewals", "Renewals: ok, or failed and tried again.", "outcome", s)
        yield _by("losses", "Leases lost, by cause.", "cause", s)
        throttled = CounterMetricFamily(
            "blob_lock_throttled", "Store answers asking this process to slow down."
        )
        throttled.add_metric([], s["throttled"])
        yield throttled
        yield GaugeMetricFamily(
            "blob_lock_queued",
            "Store requests waiting now for a pass of their store's load.",
            value=s["queued"],
        )
        yield GaugeMetricFamily(
            "blob_lock_slots_held", "Semaphore slots held now.", value=s["slots_held"]
        )
        yield GaugeMetricFamily(
            "blob_lock_semaphore_waiters",
            "Semaphore acquisitions waiting now, every slot they read being held.",
            value=s["semaphore_waiters"],
        )
        if s["renewal_margin_min_seconds"] is not None:
            yield GaugeMetricFamily(
                "blob_lock_renewal_margin_min_seconds",
                "The least margin a renewal left before its deadline in the last minutes.",
                value=s["renewal_margin_min_seconds"],
            )
        for name, doc in _HISTOGRAMS.items():
            h = s[name]
            buckets = [("+Inf" if math.isinf(le) else repr(le), n) for le, n in h["buckets"]]
            yield HistogramMetricFamily(
                f"blob_lock_{name}", doc, buckets=buckets, sum_value=h["sum"]
            )


def _by(name: str, doc: str, label: str, s: Mapping[str, Any]) -> CounterMetricFamily:
    family = CounterMetricFamily(f"blob_lock_{name}", doc, labels=[label])
    for value, n in s[name].items():
        family.add_metric([value], n)
    return family


def register(registry: CollectorRegistry = REGISTRY) -> BlobLockCollector:
    """Registers a ``BlobLockCollector`` with ``registry`` (the default one unless given)
    and returns it; call once per registry."""
    collector = BlobLockCollector()
    registry.register(collector)
    return collector
