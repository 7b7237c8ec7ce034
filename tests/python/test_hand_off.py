"""hand_off as a user calls it (issue 15): what it writes and shows, how a block that fails
after it ends, and the bad input it refuses. The launch gap itself, with real processes on
three stores, is in test_launch_gap.py."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from blob_lock import (
    BlobLock,
    LockError,
    LockLost,
    LockState,
    break_lock,
    claim_memo,
    inspect,
    keep_alive,
)
from conftest import BLOB_LOCK


def lockfile(lock_uri: str) -> dict:
    return json.loads((Path(lock_uri) / "lock.json").read_text())


def test_hand_off_renews_now_with_the_grace_and_inspect_shows_it(tmp_path):
    uri = str(tmp_path / "lock")
    with BlobLock(uri, expire=30) as held:
        writes = lockfile(uri)["write_count"]
        held.hand_off(timedelta(minutes=10))
        assert held.handed_off
        body = lockfile(uri)
        # Counted from the call: what is left of it when the write starts, to the millisecond.
        assert body["write_count"] == writes + 1 and 599 < body["grace_s"] <= 600
        seen = inspect(uri)
        assert seen.state is LockState.OURS and seen.handed_off
        assert seen.grace_s == body["grace_s"]
        written = datetime.fromisoformat(body["written_at"])
        assert seen.grace_until == written + timedelta(seconds=body["grace_s"])
        # Expiry as readers of this lockfile see it: after the grace, not after 30 s.
        assert 590 < seen.expires_in <= 600
        assert "handed off, grace until" in seen.describe()
        assert seen.to_json()["grace_s"] == body["grace_s"]

        # The remote's first write ends the grace.
        with keep_alive(uri, held.owner):
            after = inspect(uri)
            assert after.grace_s is None and not after.handed_off
            assert after.writer_name == "remote" and after.expires_in <= 30
    assert inspect(uri).state is LockState.RELEASED  # left normally: released as always


@pytest.mark.parametrize("protocol", ["cas", "lww"])
def test_on_every_store_the_grace_is_written_and_the_remote_ends_it(backend, protocol):
    uri = backend.uri()
    opts = backend.storage_options or None
    with backend.lock(uri, expire=30, protocol=protocol) as held:
        held.hand_off(90)
        seen = inspect(uri, storage_options=opts)
        assert seen.handed_off and 89 < seen.grace_s <= 90 and seen.protocol == protocol
        assert 80 < seen.expires_in <= 90
        with backend.keep_alive(uri, held.owner):
            after = inspect(uri, storage_options=opts)
            assert not after.handed_off and after.writer_name == "remote"
    assert inspect(uri, storage_options=opts).state is LockState.RELEASED


def test_status_on_the_command_line_says_handed_off(tmp_path):
    import subprocess

    uri = str(tmp_path / "lock")
    with BlobLock(uri) as held:
        held.hand_off(120)
        out = subprocess.run(
            [BLOB_LOCK, "status", uri], capture_output=True, text=True, timeout=60
        ).stdout
        assert "handed off, grace until" in out, out


def test_a_block_that_fails_after_the_hand_off_leaves_the_lock_to_the_remote(tmp_path):
    uri = str(tmp_path / "lock")
    lock = BlobLock(uri, expire=30)
    with pytest.raises(KeyboardInterrupt):
        with lock:
            lock.hand_off(300)
            raise KeyboardInterrupt  # the orchestrator is stopped while the remote queues
    assert not lock.held
    seen = inspect(uri)
    assert seen.state is LockState.HELD, "released under the remote's feet"
    assert seen.owner == lock.owner and seen.handed_off
    # The remote starts later and keeps it alive; nobody else can take it meanwhile.
    with keep_alive(uri, lock.owner) as remote:
        assert remote.token == seen.token
        assert not BlobLock(uri).try_acquire()


def test_a_failing_block_without_a_hand_off_still_releases(tmp_path):
    uri = str(tmp_path / "lock")
    with pytest.raises(RuntimeError):
        with BlobLock(uri):
            raise RuntimeError("boom")
    assert inspect(uri).state is LockState.RELEASED


def test_a_claim_hands_off_and_a_failing_wait_leaves_it_to_the_remote(tmp_path):
    memo = str(tmp_path / "memo")
    with pytest.raises(TimeoutError):
        with claim_memo(memo, done=lambda: False) as claim:
            assert claim.launch
            claim.hand_off(60)
            raise TimeoutError("the orchestrator gives up waiting")
    seen = inspect(f"{memo}/lock")
    assert seen.state is LockState.HELD and seen.owner == claim.owner and seen.handed_off

    with claim_memo(str(tmp_path / "done"), done=lambda: True) as finished:
        with pytest.raises(LockError, match="holds nothing"):
            finished.hand_off(60)


def test_hand_off_async(tmp_path):
    uri = str(tmp_path / "lock")

    async def main() -> None:
        async with BlobLock(uri) as held:
            await held.hand_off_async(45.5)
            assert 44.5 < lockfile(uri)["grace_s"] <= 45.5

    asyncio.run(main())


@pytest.mark.parametrize(
    ("grace", "error", "match"),
    [
        (0, ValueError, "grace must be a positive"),
        (-1, ValueError, "grace must be a positive"),
        (float("nan"), ValueError, "grace"),
        (8 * 24 * 3600, ValueError, "grace must be at most 604800"),
        ("60", TypeError, "grace must be seconds"),
        (None, TypeError, "grace must be seconds"),
    ],
)
def test_bad_grace_is_refused_and_nothing_is_written(tmp_path, grace, error, match):
    uri = str(tmp_path / "lock")
    with BlobLock(uri) as held:
        before = lockfile(uri)
        with pytest.raises(error, match=match):
            held.hand_off(grace)
        assert lockfile(uri) == before
        assert not held.handed_off


def test_hand_off_needs_a_held_lock(tmp_path):
    uri = str(tmp_path / "lock")
    lock = BlobLock(uri)
    with pytest.raises(LockError, match="nothing is held"):
        lock.hand_off(60)
    assert not (tmp_path / "lock").exists()
    with lock:
        pass
    before = lockfile(uri)
    with pytest.raises(LockError, match="hand_off needs a held lock"):
        lock.hand_off(60)
    assert lockfile(uri) == before


def test_hand_off_on_a_lost_lock_raises_lock_lost(tmp_path):
    uri = str(tmp_path / "lock")
    lock = BlobLock(uri, expire=30, raise_on_lost=False)
    with lock:
        # Someone breaks it and takes it: the hand-off finds that out and says so.
        break_lock(uri, owner=lock.owner, token=lock.token)
        other = BlobLock(uri)
        assert other.acquire(timeout=10)
        with pytest.raises(LockLost):
            lock.hand_off(60)
        assert lock.lost
        other.release()
