"""Coordination with mops (thds-mops's lease) on the same lockfile, on local files, the one
store mops reaches without cloud credentials."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from blob_lock import BlobLock, ReleaseStatus, keep_alive

lease = pytest.importorskip("thds.mops.pure.core.lease")


def mops_acquire(uri: str, expire: float):
    return lease.acquire(uri, expire=timedelta(seconds=expire), debug=False, block=timedelta(0))


def test_a_mops_lease_is_held_then_released(tmp_path):
    uri = str(tmp_path / "memo" / "lock")
    held = mops_acquire(uri, 88)
    assert held is not None
    ours = BlobLock(uri)
    assert ours.try_acquire() is False
    held.release()
    assert ours.try_acquire()
    assert ours.token == 1  # mops writes no token: ours starts after it
    assert ours.release() == ReleaseStatus.RELEASED


def test_an_expired_mops_lease_is_taken_over(tmp_path):
    uri = str(tmp_path / "lock")
    held = mops_acquire(uri, 1.5)  # never maintained: a crashed mops orchestrator
    assert held is not None
    ours = BlobLock(uri, expire=5)
    started = time.monotonic()
    assert ours.acquire(timeout=30)
    assert time.monotonic() - started >= 1.0  # watched for the file's expire_s first
    ours.release()


def test_mops_sees_our_lock_held_then_released(tmp_path):
    uri = str(tmp_path / "lock")
    ours = BlobLock(uri)
    with ours:
        assert mops_acquire(uri, 30) is None
        body = json.loads((tmp_path / "lock" / "lock.json").read_text())
        assert body["writer_id"] == ours.owner and body["first_acquired_at"]
    theirs = mops_acquire(uri, 30)
    assert theirs is not None
    theirs.release()


def test_a_mops_remote_co_owns_our_lock(tmp_path):
    uri = str(tmp_path / "lock")
    with BlobLock(uri, expire=2) as held:
        remote = lease.make_remote_lease_writer(uri, held.owner)
        for _ in range(4):
            remote.maintain()  # rewrites the body blindly, without our token
            time.sleep(0.3)
        assert not held.lost, held.lost_reason
        token = held.token
    after = json.loads((tmp_path / "lock" / "lock.json").read_text())
    assert after["released_at"] and after["token"] == token


def test_our_remote_keeps_a_mops_lease_alive(tmp_path):
    uri = str(tmp_path / "lock")
    held = mops_acquire(uri, 1.5)
    with keep_alive(uri, held.writer_id) as remote:
        waiter = BlobLock(uri, expire=1.5)
        assert waiter.acquire(timeout=4) is False  # alive well past mops's expire
        assert not remote.lost
    assert waiter.acquire(timeout=30)
    waiter.release()
