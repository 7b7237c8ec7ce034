"""blob_lock.stats() and its integrations as an operator scrapes them: counters and
histograms move with what the locks do (on local files and S3 over HTTP), a lock broken by
another process counts as a loss, Prometheus serves them over HTTP, OpenTelemetry's SDK
collects them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request

from blob_lock import BlobLock, stats
from conftest import BLOB_LOCK


def delta(before: dict, after: dict, *path: str):
    a, b = after, before
    for key in path:
        a, b = a[key], b[key]
    return a - b


# Run in a process of its own, whose counters nothing else moves.
SEQUENCE = """
import json, subprocess, sys, time
from blob_lock import BlobLock, stats

uri, blob_lock = sys.argv[1], sys.argv[2]
before = stats()
with BlobLock(uri, expire=3):
    deadline = time.monotonic() + 60
    while stats()["renewals"]["ok"] - before["renewals"]["ok"] < 2:  # two heartbeats
        assert time.monotonic() < deadline, "no two renewals in 60 s"
        time.sleep(0.02)
    assert not BlobLock(uri).try_acquire()
    assert not BlobLock(uri).acquire(timeout=0.1)
held = BlobLock(uri, expire=3, raise_on_lost=False)
held.acquire()
broke = subprocess.run([blob_lock, "break", uri, "--yes"], capture_output=True, timeout=120)
assert broke.returncode == 0, broke.stderr
deadline = time.monotonic() + 30
while not held.lost:
    assert time.monotonic() < deadline, "the break was never noticed"
    time.sleep(0.05)
held.release()
print(json.dumps({"before": before, "after": stats()}))
"""


def test_stats_count_acquisitions_requests_renewals_releases_and_losses(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SEQUENCE, str(tmp_path / "lock"), BLOB_LOCK],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    before, after = seen["before"], seen["after"]
    assert delta(before, after, "acquisitions", "acquired") == 2
    assert delta(before, after, "acquisitions", "busy") == 1
    assert delta(before, after, "acquisitions", "timed_out") == 1
    assert delta(before, after, "releases") == 1
    assert delta(before, after, "losses", "released_by_other") == 1
    renewals = delta(before, after, "renewals", "ok")
    assert renewals >= 2
    # How close the tightest lease came to its deadline: within its lease of 3 s, less the
    # margin.
    assert 0 < after["renewal_margin_min_seconds"] < 2.7
    assert after["queued"] == 0 and after["throttled"] == 0
    assert delta(before, after, "renewal_latency_seconds", "count") == renewals
    assert delta(before, after, "hold_seconds", "count") == 2
    assert delta(before, after, "hold_seconds", "sum") > 2.0
    assert delta(before, after, "requests", "create", "ok") == 1
    # Each renewal and the release, as conditional updates.
    assert delta(before, after, "requests", "update", "ok") > renewals
    # Buckets are cumulative and end with every observation (JSON has no infinity).
    buckets = after["acquire_wait_seconds"]["buckets"]
    assert [n for _, n in buckets] == sorted(n for _, n in buckets)
    assert buckets[-1][1] == after["acquire_wait_seconds"]["count"]


def test_stats_has_exactly_the_keys_its_type_names():
    """``Stats`` and ``Histogram`` are what type checkers hold ``stats()`` to: a key added or
    dropped on the native side without them fails here."""
    from typing import get_type_hints

    from blob_lock import Histogram, Stats, stats

    seen = stats()
    assert set(seen) == set(Stats.__annotations__)
    histograms = [k for k, t in get_type_hints(Stats).items() if t is Histogram]
    assert len(histograms) == 4
    for name in histograms:
        assert set(seen[name]) == set(Histogram.__annotations__), name


def test_requests_on_s3_are_counted(moto_endpoint):
    from conftest import _s3_backend

    backend = _s3_backend(moto_endpoint)
    uri = backend.uri()
    before = stats()
    with backend.lock(uri):
        assert not backend.lock(uri).try_acquire()
    after = stats()
    assert delta(before, after, "requests", "create", "ok") == 1
    assert delta(before, after, "requests", "read", "ok") >= 1
    assert delta(before, after, "acquisitions", "busy") == 1


def test_prometheus_serves_the_metrics_over_http(tmp_path):
    from blob_lock import prometheus
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry()
    prometheus.register(registry)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    port = server.server_port
    try:
        with BlobLock(tmp_path / "lock"):
            pass
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        text = body.decode()
        acquired = stats()["acquisitions"]["acquired"]
        assert f'blob_lock_acquisitions_total{{outcome="acquired"}} {float(acquired)}' in text
        assert 'blob_lock_requests_total{kind="create",outcome="ok"}' in text
        assert 'blob_lock_hold_seconds_bucket{le="+Inf"}' in text
        assert "blob_lock_renewal_margin_seconds_count" in text
        assert f"blob_lock_throttled_total {float(stats()['throttled'])}" in text
        assert "blob_lock_queued 0.0" in text
        # (this worker's other tests may hold slots)
        assert re.search(r"^blob_lock_slots_held \d", text, re.M)
        assert re.search(r"^blob_lock_semaphore_waiters \d", text, re.M)
    finally:
        server.shutdown()
        thread.join(10)


def test_opentelemetry_collects_the_metrics(tmp_path):
    from blob_lock import opentelemetry
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    opentelemetry.instrument(provider)
    with BlobLock(tmp_path / "lock"):
        pass
    data = reader.get_metrics_data()
    points = {
        m.name: list(m.data.data_points)
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    acquired = [
        p.value for p in points["blob_lock.acquisitions"] if p.attributes["outcome"] == "acquired"
    ]
    assert acquired == [stats()["acquisitions"]["acquired"]]
    assert points["blob_lock.hold_seconds.count"][0].value == stats()["hold_seconds"]["count"]
    assert points["blob_lock.throttled"][0].value == stats()["throttled"]
    assert points["blob_lock.queued"][0].value == 0
    assert points["blob_lock.slots_held"][0].value == stats()["slots_held"]
    assert points["blob_lock.semaphore_waiters"][0].value == stats()["semaphore_waiters"]
    les = {p.attributes["le"] for p in points["blob_lock.acquire_wait_seconds.bucket"]}
    assert "+Inf" in les and "0.001" in les
    provider.shutdown()
