"""Network faults between a holder and its store, injected by tests/fault_proxy.py. The holder
runs in its own process and reaches S3 (moto) or Azure (Azurite) through the proxy; waiters
reach the store directly. Timing: expire 4 s, so a heartbeat every 1.33 s, a safety margin
of 0.4 s, and a per-request timeout of 1 s."""

from __future__ import annotations

import json
import os
import random
import threading
import time

import pytest
from blob_lock import BlobLock, ReleaseStatus

# Left out of `make test-fast` (-m "not slow"): faults injected through proxies on the stores
# over HTTP.
pytestmark = pytest.mark.slow

EXPIRE = 4.0
HEARTBEAT = EXPIRE / 3


def start_holder(workers, backend, options, env):
    uri = backend.uri()
    holder = workers("watch", uri, options, str(EXPIRE), env=env)
    first = holder.line()
    assert first["event"] == "acquired"
    return uri, holder, first


def assert_still_held(backend, uri, holder, owner) -> None:
    """Over two more expiries the holder sees no loss and no waiter gets in."""
    waiter = backend.lock(uri, expire=EXPIRE)
    assert waiter.acquire(timeout=EXPIRE * 2) is False, holder.stderr()[-3000:]
    assert holder.poll(0) is None, "the holder reported a loss"
    body = json.loads(backend.raw_get(uri))
    assert body["writer_id"] == owner and not body["released_at"]


def test_an_outage_shorter_than_the_lease_loses_nothing(proxied, workers):
    backend, proxy, options, env = proxied
    uri, holder, first = start_holder(workers, backend, options, env)
    # The partition begins at once, and the holder's first renewal (a heartbeat after its
    # acquisition; nothing else is sent meanwhile) is seen meeting it, so that it is the
    # one that hangs, times out and is retried. 0.8 s later the path heals: the request
    # timeout (1 s) then cuts the hung renewal off, and its retry must land before the
    # deadline (expire less a tenth after the acquisition's write).
    proxy.blackhole()
    deadline = time.monotonic() + HEARTBEAT * 3
    while proxy.requests_swallowed == 0:
        assert time.monotonic() < deadline, "no renewal met the outage"
        assert holder.poll(0) is None, "the holder reported a loss"
        time.sleep(0.005)
    time.sleep(0.8)
    proxy.heal()
    assert_still_held(backend, uri, holder, first["owner"])


def test_bursts_of_503_and_resets_lose_nothing(proxied, workers):
    backend, proxy, options, env = proxied
    uri, holder, first = start_holder(workers, backend, options, env)
    for _ in range(3):
        proxy.fail_http(4)  # retried by the client and by the heartbeat
        time.sleep(HEARTBEAT)
        proxy.reset()
        time.sleep(0.3)
        proxy.heal()
    assert proxy.http_failures_served > 0, "no 503 reached the holder"
    assert_still_held(backend, uri, holder, first["owner"])


def test_a_longer_outage_is_reported_as_loss_before_a_waiter_gets_in(proxied, workers):
    backend, proxy, options, env = proxied
    uri, holder, first = start_holder(workers, backend, options, env)
    proxy.blackhole()  # for good: the holder is cut off
    waiter = backend.lock(uri, expire=EXPIRE)
    assert waiter.acquire(timeout=60)
    got_in = time.time()
    lost = holder.line(timeout=30)
    assert lost["event"] == "lost", lost
    assert lost["at"] < got_in, "the waiter got in before the holder knew it had lost"
    assert waiter.token > first["token"]
    assert waiter.release() == ReleaseStatus.RELEASED


def test_a_store_whose_first_connections_are_reset_is_retried_not_refused(proxied, workers):
    """A process whose first requests to a store meet connections reset (a flaky path: the
    store is there) retries them and acquires once the path heals, rather than failing as a
    store that does not answer (a wrong endpoint fails fast: tests/python/test_bad_input.py)."""
    backend, proxy, options, env = proxied
    proxy.reset()  # every connection accepted, then reset, from before the first request
    holder = workers("watch", backend.uri(), options, str(EXPIRE), env=env)
    deadline = time.monotonic() + 60
    while proxy.accepted < 2:  # its first request and a retry of it were reset
        assert time.monotonic() < deadline, "the holder made no second request"
        assert holder.poll(0) is None, "the holder gave up"
        time.sleep(0.01)
    proxy.heal()
    first = holder.line(timeout=60)
    assert first["event"] == "acquired", first


def test_processes_count_exactly_through_a_faulty_network(proxied, workers, tmp_path):
    """N processes x M acquisitions, each a non-atomic read-modify-write of a shared
    counter, every request through the proxy while faults come and go: 503 bursts, resets
    (a write that landed may come back as an error) and delays. Exact count, no overlap.
    A long soak: SOAK_PROCS=8 SOAK_ROUNDS=500 pytest tests/python/test_faults.py -k count."""
    backend, proxy, options, env = proxied
    n_proc = int(os.environ.get("SOAK_PROCS", "4"))
    n_each = int(os.environ.get("SOAK_ROUNDS", "6"))
    uri, counter = backend.uri(), tmp_path / "counter"
    counter.write_text("0")
    stop = threading.Event()

    def chaos() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            fault = rng.choice(["503", "reset", "delay", "none"])
            if fault == "503":
                proxy.fail_http(rng.randint(1, 4))
            elif fault == "reset":
                proxy.reset()
            elif fault == "delay":
                proxy.delay(rng.uniform(0.01, 0.1))
            stop.wait(rng.uniform(0.05, 0.3))
            proxy.heal()
            stop.wait(rng.uniform(0.1, 0.5))

    procs = [
        workers("counter", uri, options, str(counter), str(n_each), str(EXPIRE), env=env)
        for _ in range(n_proc)
    ]
    for p in procs:
        assert p.line()["event"] == "ready"
    chaos_thread = threading.Thread(target=chaos, daemon=True)
    chaos_thread.start()
    try:
        for p in procs:
            assert p.line(timeout=60 + n_each * 10)["event"] == "done"
            assert p.wait() == 0
    finally:
        stop.set()
        chaos_thread.join(5)
        proxy.heal()
    assert int(counter.read_text()) == n_proc * n_each


def test_a_release_that_landed_is_not_reported_lost_when_its_answer_is_lost(
    proxied, workers, tmp_path
):
    """The holder's release lands but its answer is lost; before the holder's client sends
    it again, a waiter takes the lock. The resent release is refused (the lockfile changed),
    and the holder must not be told that it lost the lock: its block ran under it, and its
    own release is what let the waiter in."""
    backend, proxy, options, env = proxied
    uri, go = backend.uri(), tmp_path / "go"
    holder = workers("release_on", uri, options, str(EXPIRE), str(go), env=env)
    first = holder.line()
    assert first["event"] == "acquired", first
    waiter = backend.lock(uri, expire=EXPIRE)
    taken = threading.Thread(target=lambda: waiter.acquire(timeout=60))
    taken.start()
    proxy.lose_answer(b'"released_at":"2')  # the release's body; acquisitions' are ""
    go.touch()
    taken.join(70)
    try:
        assert waiter.held, "the waiter never got the lock after the release landed"
        assert proxy.answers_lost == 1
        assert waiter.token > first["token"]
    finally:
        proxy.let_through()
    ended = holder.line()
    assert ended == {"event": "released", "error": None}, ended
    assert waiter.release() == ReleaseStatus.RELEASED


def test_a_prune_whose_delete_landed_but_lost_its_answer_says_deleted(moto_endpoint):
    """prune's conditional delete lands and its answer is lost; the client sends it again,
    and the store answers that there is nothing at that version (it is gone). The lockfile
    was deleted by that prune: it must say so, not that the lock changed under it."""
    from urllib.parse import urlsplit

    from blob_lock import PruneOutcome, prune_locks
    from conftest import _s3_backend
    from fault_proxy import FaultProxy

    backend = _s3_backend(moto_endpoint)
    where = urlsplit(moto_endpoint)
    proxy = FaultProxy(where.hostname, where.port)
    try:
        opts = {**backend.storage_options, "aws_endpoint": proxy.url}
        uri = f"{backend.root}/pruned/one"
        with BlobLock(uri, expire=1, storage_options=opts):
            pass
        time.sleep(1.1)  # prune keeps it until no create of it can be on its way
        bucket = urlsplit(backend.root).netloc
        proxy.lose_answer(f"DELETE /{bucket}/pruned/one/lock.json".encode())
        found: list = []
        pruning = threading.Thread(
            target=lambda: found.extend(
                prune_locks(
                    f"{backend.root}/pruned", older_than=0, storage_options=opts, clock_skew=0
                )
            )
        )
        pruning.start()
        deadline = time.monotonic() + 60
        while proxy.answers_lost == 0 and pruning.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proxy.answers_lost == 1, found
        proxy.let_through()
        pruning.join(60)
        assert not pruning.is_alive()
        assert [(p.uri, p.outcome) for p in found] == [(uri, PruneOutcome.DELETED)], found
        assert backend.raw_get(uri) is None
    finally:
        proxy.close()
