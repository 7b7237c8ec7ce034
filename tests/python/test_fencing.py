"""Fencing tokens only grow, across a deleted lockfile too, and a release that finds a later
acquisition than its own says so at once (docs/protocol.md, "Fencing")."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

from blob_lock import ReleaseStatus
from conftest import Backend


def delete_lockfile(backend: Backend, uri: str) -> None:
    """A person (or a lifecycle rule) deleting the lockfile, outside the lock."""
    assert backend.raw_delete is not None
    backend.raw_delete(f"{uri}/lock.json")


def test_tokens_grow_across_a_lockfile_deleted_by_hand(shared_backend):
    uri = shared_backend.uri()
    seen = []
    for _ in range(3):
        with shared_backend.lock(uri) as held:
            seen.append(held.token)
        delete_lockfile(shared_backend, uri)
    with shared_backend.lock(uri) as held:
        seen.append(held.token)
    # A resource that refuses tokens below the highest it saw accepts every next holder.
    assert seen == sorted(seen) and len(set(seen)) == len(seen), seen


def test_a_release_after_a_delete_and_a_later_acquisition_says_so_at_once(shared_backend):
    """The holder still thinks it holds (its heartbeat has not run since); the lockfile was
    deleted and taken by another. Its release answers at once, the loss reported: it must
    not wait out its lease taking the later acquisition for a read that has not caught up."""
    uri = shared_backend.uri()
    for _ in range(3):  # a few acquisitions first: the holder's token is not the first
        with shared_backend.lock(uri):
            pass
    holder = shared_backend.lock(uri, expire=30, raise_on_lost=False)
    assert holder.acquire(timeout=10)
    delete_lockfile(shared_backend, uri)
    with shared_backend.lock(uri) as later:
        assert later.token > holder.token
        began = time.monotonic()
        assert holder.release() == ReleaseStatus.HELD_BY_OTHER
        took = time.monotonic() - began
        assert holder.lost
    # Generous: the lease it would have waited out is 27 s.
    assert took < 10, f"the release took {took:.1f}s"


def test_a_release_finding_a_smaller_token_written_after_its_acquisition_says_so_at_once(
    shared_backend,
):
    """An older version of blob-lock (or a delete sooner than clock_skew allows) made the
    lockfile again below our token. Written more than clock_skew after our acquisition, it
    cannot be a read the store has not caught up on: another owner has the lock."""
    uri = shared_backend.uri()
    holder = shared_backend.lock(uri, expire=30, clock_skew=1, raise_on_lost=False)
    assert holder.acquire(timeout=10)
    time.sleep(1.5)
    now = datetime.now(timezone.utc).isoformat()
    assert shared_backend.raw_put is not None
    shared_backend.raw_put(
        uri,
        json.dumps(
            {
                "writer_id": "an-older-version",
                "written_at": now,
                "expire_s": 30.0,
                "released_at": "",
                "first_written_at": now,
                "first_acquired_at": now,
                "hostname": "elsewhere",
                "pid": "1",
                "tid": 1,
                "write_count": 1,
                "token": 1,
            }
        ).encode(),
    )
    began = time.monotonic()
    assert holder.release() == ReleaseStatus.HELD_BY_OTHER
    assert time.monotonic() - began < 10
    assert holder.lost
