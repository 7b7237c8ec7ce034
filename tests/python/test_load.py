"""Load: what a process holds stays held when the store falls behind, answers slowly or asks
to slow down, when a thread holds the GIL for seconds, when an outage loses thousands of
locks at once, and when the process exits during an outage. Past the store's capacity,
new acquisitions are refused (``StoreSaturated``, with the figures), never held locks lost.
The figures of how far each store goes are `make bench`'s (bench/load.py)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from blob_lock import BlobLock, LockTimeout, StoreSaturated, break_lock, inspect, stats
from conftest import _az_backend

# -- past the store's capacity ----------------------------------------------------------


def take_past_capacity(
    workers, backend, env, n: int, expire: float, hold: float, floor: int
) -> dict:
    """Runs tests/processes/worker.py's ``saturate``: ``n`` try_acquire in a loop, a hold of
    ``hold`` seconds, then the releases. Checks what a user relies on: at least ``floor``
    locks are taken (an admission that refused everything would keep every other promise
    here), every lock taken stays held and renews; every lock not taken was refused as
    saturated, saying why."""
    proc = workers(
        "saturate", backend.uri(), backend.options_json(), str(n), str(expire), str(hold), env=env
    )
    took = proc.line(timeout=600)
    assert took["other"] == [] and took["busy"] == 0, took
    assert took["held"] + took["saturated"] == n, took
    assert took["held"] >= floor, f"only {took['held']} of {n} taken (at least {floor}): {took}"
    if took["saturated"]:
        example = took["example"]
        assert "is saturated" in example and "renewals" in example, example
    held = proc.line(timeout=hold + 600)
    assert held["lost"] == 0, held
    assert sum(held["losses"].values()) == 0, held
    assert held["renewals"] >= took["held"], held  # each renewed at least once while held
    released = proc.line(timeout=600)
    assert released["released"] == took["held"], released
    assert proc.wait(120) == 0
    print(f"{backend.name} expire {expire:g}: {took} {held}")  # shown with -s
    return took


# The floors on the locks taken: about a quarter of what `make bench` held on this 2-core VM
# with an Azurite of its own, in two runs on 2026-11-27: 1,377 and 1,441 at expire 6, 3,135
# and 3,203 at expire 30 (the last run's: BENCHMARKS.md, "Past the store's capacity"). A
# quarter leaves room for the heavy test beside this one in `make test-python` (the other
# lane takes the other core from Azurite's one Node.js thread) and for a slower run, and is
# still hundreds of locks: an admission that refuses everything, or all but a few, fails here.
FLOOR_EXPIRE_6 = 350
FLOOR_EXPIRE_30 = 800


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_2000_locks_at_expire_6_on_azurite_lose_none_of_those_taken(own_azurite, workers):
    backend = _az_backend(own_azurite)
    env = {"AZURITE_BLOB_STORAGE_URL": own_azurite}
    take_past_capacity(workers, backend, env, 2000, 6.0, 20.0, floor=FLOOR_EXPIRE_6)


@pytest.mark.heavy
@pytest.mark.timeout(900)
def test_5000_locks_at_the_default_expire_on_azurite_lose_none_of_those_taken(own_azurite, workers):
    backend = _az_backend(own_azurite)
    env = {"AZURITE_BLOB_STORAGE_URL": own_azurite}
    take_past_capacity(workers, backend, env, 5000, 30.0, 35.0, floor=FLOOR_EXPIRE_30)


# -- a store that answers slowly, or asks to slow down ------------------------------------

EXPIRE = 6.0  # a heartbeat every 2 s, each request given at least 1 s


def test_a_store_slower_than_the_request_timeout_keeps_the_lock(proxied, workers):
    """Every answer takes longer than the lock's request timeout (1 s at expire 6): a fixed
    timeout would cut each renewal off and lose the lock; the timeout follows the store."""
    backend, proxy, options, env = proxied
    uri = backend.uri()
    holder = workers("watch", uri, options, str(EXPIRE), env=env)
    first = holder.line()
    assert first["event"] == "acquired", first
    proxy.delay(0.7)  # each way: 1.4 s and more a round trip
    waiter = backend.lock(uri, expire=EXPIRE)
    assert waiter.acquire(timeout=EXPIRE * 3) is False
    assert holder.poll(0) is None, "the holder reported a loss"
    proxy.delay(0)
    body = json.loads(backend.raw_get(uri))
    assert body["writer_id"] == first["owner"] and not body["released_at"]


@pytest.mark.heavy
def test_a_store_that_falls_behind_the_held_locks_keeps_every_one(moto_endpoint):
    """150 locks at expire 6 are taken; then the store answers only 45 requests a second,
    fewer than their heartbeats ask (75): each renewal now waits to be called. A lease counted
    from when its renewal left (not from when it began to wait) gains a whole lease at each
    renewal, so the renewals space out to what the store answers and every lock stays held.
    Counted from before the wait, every lease would gain less than a heartbeat each time and
    all would run out together."""
    from urllib.parse import urlsplit

    from conftest import _s3_backend
    from fault_proxy import FaultProxy

    N = 150
    backend = _s3_backend(moto_endpoint)
    where = urlsplit(moto_endpoint)
    proxy = FaultProxy(where.hostname, where.port)
    try:
        options = dict(backend.storage_options, aws_endpoint=proxy.url)
        # 75 renewals a second: moto keeps up with them on a busy machine too (it answered
        # 139 a second beside the other heavy tests; 250 locks, 125 a second, were refused
        # as saturated there, rightly). A wait, not a try: a moment's saturation passes.
        locks = [BlobLock(backend.uri(), expire=EXPIRE, storage_options=options) for _ in range(N)]
        for lock in locks:
            assert lock.acquire(timeout=60)
        before = stats()["renewals"]["ok"]
        # Fewer than the 75 asked, with room for a loaded machine's pauses: each lease is
        # renewed every 3.3 s of its 5.4 s. At 36 a second (every 4.2 s) this VM's pauses
        # cost 4 to 12 of the 150 in each run (BENCHMARKS.md, "Where it gives").
        proxy.throughput(45)
        # Four lifetimes of every lease at least, and until the leases were renewed twice
        # over (however slowly the renewals come): only renewals keep them. A loss ends it.
        began = time.monotonic()
        deadline = began + 120
        while True:
            lost = [lock.lost_reason for lock in locks if lock.lost]
            assert lost == [], f"{len(lost)} of {N} lost, the first: {lost[0]}"
            renewed = stats()["renewals"]["ok"] - before
            if renewed >= N * 2 and time.monotonic() - began >= EXPIRE * 4:
                break  # each renewed, though later than its heartbeat
            assert time.monotonic() < deadline, f"{renewed} renewals in two minutes"
            time.sleep(0.2)
        proxy.heal()
        for lock in locks:
            lock.release()
    finally:
        proxy.close()


@pytest.mark.parametrize("store", ["s3", "az"])
def test_a_throttling_store_refuses_new_locks_and_keeps_the_held_one(
    store, request, tmp_path, monkeypatch
):
    """503 SlowDown / ServerBusy: held locks keep renewing (retried with backoff), new
    acquisitions are refused at once as saturated for a moment, and taken again after."""
    from urllib.parse import urlsplit

    from conftest import _make_backend
    from fault_proxy import FaultProxy

    if store == "s3":
        backend = _make_backend("s3", request, tmp_path)
        server = backend.storage_options["aws_endpoint"]
    else:
        server = request.getfixturevalue("own_azurite")
        backend = _az_backend(server)
    where = urlsplit(server)
    proxy = FaultProxy(where.hostname, where.port)
    try:
        if store == "s3":
            options = dict(backend.storage_options, aws_endpoint=proxy.url)
        else:
            options = backend.storage_options
            monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", proxy.url)
        held = BlobLock(backend.uri(), expire=EXPIRE, storage_options=options)
        assert held.acquire(timeout=30)
        before = stats()
        proxy.fail_http(10_000)  # every request answered 503 until healed
        with pytest.raises(Exception):  # noqa: B017 - a read that meets the 503
            inspect(backend.uri(), storage_options=options)
        other = BlobLock(backend.uri(), expire=EXPIRE, storage_options=options)
        with pytest.raises(StoreSaturated) as refused:
            other.try_acquire()
        assert "slow down" in str(refused.value) and refused.value.transient
        # A wait that ends while the store is saturated says so, not that someone held it:
        # the bool API keeps the reason, the with form raises it.
        assert other.acquire(timeout=2) is False
        why = other.last_timeout
        assert why is not None and why.saturated is not None, why
        assert "slow down" in str(why.saturated) and "saturated" in str(why), why
        assert "held by" not in str(why), why
        with pytest.raises(LockTimeout) as waited:
            with BlobLock(backend.uri(), expire=EXPIRE, timeout=2, storage_options=options):
                pass
        assert waited.value.saturated is not None, waited.value
        # The held lock's next renewal meets the 503s and is retried.
        deadline = time.monotonic() + 60
        while stats()["renewals"]["retried"] == before["renewals"]["retried"]:
            assert not held.lost, held.lost_reason
            assert time.monotonic() < deadline, "no renewal retried in a minute of 503s"
            time.sleep(0.05)
        proxy.heal()
        healed = time.monotonic()
        after = stats()
        assert after["renewals"]["retried"] > before["renewals"]["retried"]
        assert after["throttled"] > before["throttled"]
        assert after["acquisitions"]["saturated"] > before["acquisitions"]["saturated"]
        # Taken again once the store has not throttled for a moment.
        fresh = BlobLock(backend.uri() + "-after", expire=EXPIRE, storage_options=options)
        deadline = time.monotonic() + 60
        while True:
            try:
                assert fresh.try_acquire()
                break
            except StoreSaturated:
                assert time.monotonic() < deadline, "still refused a minute after the 503s"
                time.sleep(0.2)
        # Past the lease it had at the heal, and its lockfile rewritten since (a lockfile's
        # write_count grows by one at each renewal): only renewals keep it. A loss ends it.
        writes = held.inspect().write_count or 0
        deadline = time.monotonic() + 60
        while True:
            assert held.held and not held.lost, held.lost_reason
            now = held.inspect().write_count or 0
            if now > writes and time.monotonic() - healed >= EXPIRE:
                break
            assert time.monotonic() < deadline, f"write_count {now} a minute after the heal"
            time.sleep(0.1)
        assert held.held and not held.lost, held.lost_reason
        assert held.release().name == "RELEASED"
        fresh.release()
    finally:
        proxy.close()


# -- the GIL ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["file", "s3"])
def test_a_thread_holding_the_gil_for_several_lifetimes_loses_nothing_with_debug_logs(
    name, request, tmp_path, workers
):
    """With DEBUG logging on, the main thread holds the GIL for 10 s (a C extension that
    keeps it), more than three lifetimes of a lock of expire 3: the heartbeat renews all the
    while, and its records reach logging afterwards, with the time they were made at."""
    from conftest import _make_backend

    backend = _make_backend(name, request, tmp_path)
    proc = workers("gil", backend.uri(), backend.options_json(), "3", "10")
    assert proc.line()["event"] == "acquired"
    done = proc.line(timeout=120)
    assert done["lost"] is False, done
    # About five renewals in 10 s, logged by the runtime's threads while Python was held.
    assert done["renewals_logged_meanwhile"] >= 3, done
    assert done["threads"] == ["blob-lock"], done


def test_asyncio_completions_waiting_for_the_gil_do_not_hold_back_renewals_on_files(
    tmp_path, workers
):
    """300 acquire_async() on local files complete while the main thread holds the GIL for
    6 s: each completion waits for the GIL to reach its event loop. A held file lock of
    expire 2 renews all the while (its renewals are file calls on threads of their own)."""
    proc = workers("gil_async", str(tmp_path), "null", "2", "300", "6")
    done = proc.line(timeout=180)
    assert done["lost"] is False, done
    # A renewal every 2/3 s, and the counter is read before the GIL is let go: some must
    # have landed in 6 s for the lock to be held, and the count shows they did.
    assert done["renewed_meanwhile"] >= 3, done
    assert done["others_acquired"] == 300, done
    assert proc.wait(60) == 0


# -- logging follows Python's configuration ----------------------------------------------


def test_a_level_set_after_the_first_lock_is_honoured(tmp_path):
    import logging

    logger = logging.getLogger("blob_lock")
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep()
    logger.addHandler(handler)
    old = logger.level
    try:
        logger.setLevel(logging.INFO)
        with BlobLock(str(tmp_path / "a")):
            pass
        assert not [m for m in seen if " -> " in m], seen
        logger.setLevel(logging.DEBUG)  # while investigating
        with BlobLock(str(tmp_path / "a")):
            pass
        steps = [m for m in seen if " -> " in m]
        assert len(steps) == 4, seen  # new, acquiring, held, releasing, released
        logger.setLevel(logging.WARNING)
        with BlobLock(str(tmp_path / "a")):
            pass
        assert [m for m in seen if " -> " in m] == steps, "no more once turned down"
    finally:
        logger.setLevel(old)
        logger.removeHandler(handler)


# -- a storm of losses -------------------------------------------------------------------


def threads_now() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.heavy
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads in /proc")
def test_thousands_of_losses_at_once_run_every_callback_on_a_few_threads():
    n = 2000
    calls = []
    done = threading.Event()

    def on_lost(e: Exception) -> None:
        time.sleep(0.02)  # a callback that does some work (a thread per loss: dozens at once)
        calls.append(e.uri)
        if len(calls) == n:
            done.set()

    locks = [BlobLock(f"memory://storm/{i}", expire=3, on_lost=on_lost) for i in range(n)]
    for lock in locks:
        assert lock.try_acquire()
    baseline = threads_now()
    for lock in locks:
        break_lock(lock.uri)  # the next renewal of each finds it released by someone else
    most = baseline
    deadline = time.monotonic() + 120
    while not done.is_set():
        most = max(most, threads_now())
        assert time.monotonic() < deadline, f"{len(calls)} of {n} callbacks ran"
        time.sleep(0.01)
    assert len(set(calls)) == n and all(lock.lost for lock in locks)
    # The callbacks' threads, at most four, and nothing per loss.
    assert most <= baseline + 4, (baseline, most)


# -- leaving during an outage --------------------------------------------------------------


def test_an_exit_in_an_outage_releases_every_lock_at_once(proxied, workers, tmp_path):
    """Hundreds of locks held, the store cut off, the interpreter exits: the releases run
    together under one deadline, not one after another for a heartbeat each."""
    backend, proxy, options, env = proxied
    go = tmp_path / "go"
    proc = workers("exit_many", backend.uri(), options, "300", "30", str(go), env=env)
    assert proc.line(timeout=300)["held"] == 300
    proxy.blackhole()
    go.touch()
    exiting = proc.line()
    assert exiting["event"] == "exiting"
    # Each release would wait up to its lease's deadline (27 s at expire 30) in turn;
    # together they wait one heartbeat (10 s). A generous bound, not a measurement.
    assert proc.wait(120) == 0
    took = time.time() - exiting["at"]
    assert took < 60, f"the exit took {took:.0f}s"


# -- found in review --------------------------------------------------------------------------


def test_many_threads_making_locks_on_many_local_uris_never_fail(tmp_path):
    """More local URIs than templates are kept, from many threads at once: evicting a
    template another thread evicted first must not fail (it raised KeyError)."""
    failures: list[BaseException] = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:

        def make(k: int) -> None:
            try:
                for i in range(300):
                    BlobLock(f"memory://templates-{k % 2}/{i}")
            except BaseException as e:
                failures.append(e)

        threads = [threading.Thread(target=make, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert failures == []
    # Threads inserting at once may overshoot the bound for a moment; the next lock made
    # brings it back (an overshoot kept for good failed a later test, 2026-11-27).
    from blob_lock import _templates

    BlobLock("memory://templates-after/last")
    assert len(_templates._TEMPLATES) <= _templates._MAX
