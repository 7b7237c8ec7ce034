"""Coordination with mops (thds-mops's lease) on the same lockfile, on local files, the one
store mops reaches without cloud credentials."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from blob_lock import BlobLock, ReleaseStatus, inspect, keep_alive
from conftest import assert_first_token, micros_now

# Left out of `make test-fast` (-m "not slow"): real mops pipelines
pytestmark = pytest.mark.slow

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
    since = micros_now()
    assert ours.try_acquire()
    # mops writes no token: ours starts from a fresh lockfile's floor, the wall clock.
    assert_first_token(ours.token, since)
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
        for i in range(4):
            remote.maintain()  # rewrites the body blindly, without our token
            # Our next renewal comes over it: its write (our token, no writer_name) is
            # there, and the lock is not lost for meeting mops's body.
            deadline = time.monotonic() + 60
            while True:
                assert not held.lost, held.lost_reason
                seen = inspect(uri)
                if seen.token == held.token and seen.writer_name is None:
                    break
                assert time.monotonic() < deadline, f"no renewal of ours after mops's {i + 1}"
                time.sleep(0.05)
        assert not held.lost, held.lost_reason
        token = held.token
    after = json.loads((tmp_path / "lock" / "lock.json").read_text())
    assert after["released_at"] and after["token"] == token


def test_our_remote_keeps_a_mops_lease_alive(tmp_path):
    uri = str(tmp_path / "lock")
    expire = 1.5
    started = time.monotonic()
    held = mops_acquire(uri, expire)
    with keep_alive(uri, held.writer_id) as remote:
        # Well past mops's expire, then renewed once more: mops's lease lives on our
        # renewals (however late they come, unless the keep-alive says it lost it).
        while time.monotonic() - started < 3 * expire:
            assert not remote.lost, remote.lost_reason
            time.sleep(0.05)
        mark = inspect(uri)
        deadline = time.monotonic() + 60
        while (seen := inspect(uri)).written_at == mark.written_at:
            assert not remote.lost, remote.lost_reason
            assert time.monotonic() < deadline, f"not renewed in a minute: {seen.describe()}"
            time.sleep(0.05)
        assert seen.owner == held.writer_id and not seen.free, seen.describe()
        # So a waiter finds it held, not expired, by mops's owner.
        waiter = BlobLock(uri, expire=expire)
        assert waiter.try_acquire() is False, "a waiter took the lease our remote keeps"
        assert not remote.lost, remote.lost_reason
    assert waiter.acquire(timeout=30)
    waiter.release()
