"""A semaphore's configuration (``PREFIX/semaphore.json``) where it goes wrong: unreadable
(refused with the fix, a permanent ``StoreError``, and written over by the fix), lost behind
more than a page of other locks under the prefix (still found lost, never written again),
and first written by first-comers on a store that ignores create-if-absent (s3rver), who
wait out each other by lww's settle rule."""

from __future__ import annotations

import threading

import pytest
from blob_lock import BlobSemaphore
from blob_lock.exceptions import StoreError
from conftest import S3RVER_BUCKET, cli
from servers import boto3_s3

GARBAGE = b'{"semaphore": 1, "slo'


def refused_with_the_fix(prefix: str, call) -> StoreError:
    """``call()`` fails with the permanent StoreError that names the fix."""
    with pytest.raises(StoreError) as refused:
        call()
    message = str(refused.value)
    assert f"{prefix}/semaphore.json" in message, message
    assert f"`blob-lock slots {prefix} N`" in message, message
    assert not refused.value.transient
    return refused.value


def test_an_unreadable_configuration_is_refused_with_the_fix_which_writes_over_it(
    shared_backend,
):
    prefix = shared_backend.uri()
    options = shared_backend.storage_options or None
    with BlobSemaphore(prefix, 2, storage_options=options):
        pass
    assert shared_backend.raw_put_object is not None
    shared_backend.raw_put_object(f"{prefix}/semaphore.json", GARBAGE)
    semaphore = BlobSemaphore(prefix, 64, storage_options=options)
    for call in (
        lambda: semaphore.acquire(timeout=10),
        semaphore.try_acquire,
        semaphore.configuration,
        semaphore.stored,
    ):
        error = refused_with_the_fix(prefix, call)
        assert "not JSON" in str(error), error
    # Nothing was written over it: a caller asking for 64 did not make 64 the number.
    refused_with_the_fix(prefix, BlobSemaphore(prefix, 64, storage_options=options).stored)
    # status says the same; the fix the error names stores the number again over it.
    opts = [f"-o{k}={v}" for k, v in (options or {}).items()]
    done = cli("status", *opts, prefix)
    assert done.returncode == 1 and f"blob-lock slots {prefix} N" in done.stderr, done.stderr
    done = cli("slots", *opts, prefix, "3")
    assert done.returncode == 0, done.stderr
    assert "written over" in done.stdout and "could not be read" in done.stdout, done.stdout
    with BlobSemaphore(prefix, 64, storage_options=options) as slot:
        assert slot.slot < 3
    assert BlobSemaphore(prefix, 64, storage_options=options).stored().slots == 3


def test_a_lost_configuration_is_found_behind_more_than_a_page_of_other_locks(shared_backend):
    """Slots taken, 100 other locks under the prefix that list before ``slot-``, the
    configuration deleted: the next caller is still refused, and nothing is written."""
    prefix = shared_backend.uri()
    options = shared_backend.storage_options or None
    with BlobSemaphore(prefix, 8, storage_options=options):
        pass
    assert shared_backend.raw_put is not None and shared_backend.raw_delete is not None
    for i in range(100):
        shared_backend.raw_put(f"{prefix}/a-{i:03}", b"{}")
    shared_backend.raw_delete(f"{prefix}/semaphore.json")
    refused_with_the_fix(
        prefix, lambda: BlobSemaphore(prefix, 64, storage_options=options).acquire(timeout=10)
    )
    assert BlobSemaphore(prefix, 64, storage_options=options).stored() is None, "written again"


def test_first_comers_on_a_store_that_ignores_conditional_writes_wait_by_lwws_rule(s3rver):
    """Eight first-comers at once, asking 1 to 8 slots, on s3rver (which lands every
    create), with a settle shorter than their read, listing and write (100 other locks
    under the prefix to list): each waits twice what its own took, as an lww write does,
    so that all use the one number stored. With only the settle asked for, they used
    several."""
    prefix = s3rver.uri()
    client = boto3_s3(s3rver.endpoint, "S3RVER")
    key = prefix.split("/", 3)[3]
    for i in range(100):
        client.put_object(Bucket=S3RVER_BUCKET, Key=f"{key}/a-{i:03}/lock.json", Body=b"{}")
    asked = range(1, 9)
    barrier = threading.Barrier(len(asked))
    seen: dict[int, int] = {}
    failed: list[BaseException] = []

    def first(n: int) -> None:
        semaphore = BlobSemaphore(prefix, n, settle=0.01, storage_options=s3rver.options)
        barrier.wait()
        try:
            seen[n] = semaphore.configuration().slots
        except BaseException as e:
            failed.append(e)

    threads = [threading.Thread(target=first, args=(n,)) for n in asked]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failed, failed
    stored = BlobSemaphore(prefix, 1, storage_options=s3rver.options).stored()
    assert stored is not None and seen == {n: stored.slots for n in asked}, (seen, stored)
