"""Separate processes on shared stores (file, S3 on moto, Azure on Azurite), killed with
real signals."""

from __future__ import annotations

import json
import signal
import time

import pytest
from blob_lock import ReleaseStatus
from conftest import assert_first_token, count_in_processes, micros_now

# Left out of `make test-fast` (-m "not slow"): many processes, killed with real signals
pytestmark = pytest.mark.slow


def test_processes_count_exactly_under_the_lock(shared_backend, workers, tmp_path):
    n_proc, n_each = 4, 8
    count, _, _ = count_in_processes(
        workers, shared_backend.uri(), shared_backend.options_json(), tmp_path, n_proc, n_each, 5
    )
    assert count == n_proc * n_each


def test_sigkilled_holder_is_taken_over_after_expire(shared_backend, workers):
    uri, expire = shared_backend.uri(), 2.0
    holder = workers("hold", uri, shared_backend.options_json(), str(expire))
    first = holder.line()
    assert first["event"] == "acquired"
    holder.kill()
    killed = time.monotonic()
    waiter = shared_backend.lock(uri, expire=expire)
    assert waiter.acquire(timeout=60)
    waited = time.monotonic() - killed
    # Not before the lock could have expired (the waiter watches it for `expire`)...
    assert waited >= expire * 0.9
    # ...and within a generous liveness bound after.
    assert waited < expire * 5 + 5
    assert waiter.token > first["token"]
    assert waiter.release() == ReleaseStatus.RELEASED


def test_single_attempts_polled_with_fresh_locks_take_over_after_expire(shared_backend, workers):
    # As mops's lease waiter polls: one attempt at a time, a fresh lock object each. The
    # process remembers since when it has seen the lockfile unchanged, so the takeover
    # comes after `expire`, not after `expire + clock_skew` (62 s) by the wall clock.
    uri, expire = shared_backend.uri(), 2.0
    holder = workers("hold", uri, shared_backend.options_json(), str(expire))
    acquired = holder.line()
    assert acquired["event"] == "acquired"
    holder.kill()
    killed = time.monotonic()
    while not (lock := shared_backend.lock(uri, expire=expire)).try_acquire():
        assert time.monotonic() - killed < 30, "single attempts never took the lock over"
        time.sleep(0.1)
    assert time.monotonic() - killed >= expire * 0.8  # the watch is not shortened either
    assert lock.token > acquired["token"]
    lock.release()


def test_remote_keeps_lock_after_orchestrator_is_killed(shared_backend, workers):
    uri, expire = shared_backend.uri(), 2.0
    opts = shared_backend.options_json()
    orchestrator = workers("hold", uri, opts, str(expire))
    held = orchestrator.line()
    remote = workers("keep", uri, opts, held["owner"])
    assert remote.line()["event"] == "alive"
    orchestrator.kill()
    # A restarted orchestrator sees the lock held well past expire...
    restarted = shared_backend.lock(uri, expire=expire)
    assert restarted.acquire(timeout=expire * 3) is False
    # ...until the remote stops; then it expires and can be taken.
    remote.kill()
    assert restarted.acquire(timeout=60)
    assert restarted.token > held["token"]
    restarted.release()


def test_a_forked_child_neither_holds_nor_releases_the_parents_lock(shared_backend, workers):
    # expire 3 s: at 1.5 s a renewal waiting for the CPU of a machine loaded by a whole
    # `make test` (load 10 on 2 cores) once lost one of the parent's two leases.
    uri, expire = shared_backend.uri(), 3.0
    since = micros_now()
    proc = workers("fork", uri, shared_backend.options_json(), str(expire))
    parent = proc.line()
    assert parent["event"] == "acquired"
    child = proc.line()
    assert child["exit"] == 0, child
    # The inherited lock is not held in the child and has an owner id of its own...
    assert (child["held"], child["token"]) == (False, None)
    assert child["owner"] != parent["owner"]
    assert child["takes_parents_lock"] is False
    assert child["remote_lost"] is True  # the keep-alive renews in the parent, not here
    # ...and the child can take locks of its own.
    assert child["takes_own_lock"]
    assert_first_token(child["own_token"], since)
    assert child["own_release"] == "released"
    # The child's exit released nothing (the parent sleeps 2 x expire after it)...
    body = json.loads(shared_backend.raw_get(uri))
    assert body["writer_id"] == parent["owner"] and not body["released_at"]
    # ...and the parent's heartbeats went on past expiry.
    after = proc.line()
    assert after == {"event": "parent", "held": True, "lost": False, "remote_lost": False}
    assert proc.line()["status"] == "released"
    assert proc.wait() == 0


def test_a_stopped_holder_is_overtaken_and_reports_loss_when_resumed(shared_backend, workers):
    uri, expire = shared_backend.uri(), 2.0
    holder = workers("watch", uri, shared_backend.options_json(), str(expire))
    first = holder.line()
    holder.kill(signal.SIGSTOP)  # a GC or VM pause, longer than expire
    try:
        waiter = shared_backend.lock(uri, expire=expire)
        assert waiter.acquire(timeout=60)
        assert waiter.token > first["token"]
    finally:
        holder.kill(signal.SIGCONT)
    # At once on waking: its own deadline passed while it was stopped.
    lost = holder.line(timeout=30)
    assert lost["event"] == "lost", lost
    assert waiter.held and not waiter.lost
    assert waiter.release() == ReleaseStatus.RELEASED


def test_process_exit_releases_held_locks(shared_backend, workers):
    uri = shared_backend.uri()
    proc = workers("exit", uri, shared_backend.options_json(), "30")
    held = proc.line()
    assert proc.wait() == 0
    body = json.loads(shared_backend.raw_get(uri))
    assert body["writer_id"] == held["owner"] and body["released_at"]
    # The next one takes it at once, not after the 30 s expiry.
    lock = shared_backend.lock(uri)
    assert lock.try_acquire() and lock.token > held["token"]
    lock.release()
