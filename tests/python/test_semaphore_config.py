"""A semaphore's configuration (``PREFIX/semaphore.json``) where it goes wrong: unreadable
(refused with the fix, a permanent ``StoreError``, and written over by the fix), lost behind
more than a page of other locks under the prefix (still found lost, never written again),
and first written by first-comers on a store that ignores create-if-absent (s3rver), who
wait out each other by lww's settle rule."""

from __future__ import annotations

import threading
import time

import pytest
from blob_lock import BlobSemaphore
from blob_lock.exceptions import StoreError
from conftest import cli

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


def number_used(semaphore: BlobSemaphore) -> int:
    """The number ``semaphore`` agrees on (writing it first if there is none), read again
    after a transient failure: s3rver fails a read that meets a write (500)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return semaphore.configuration().slots
        except StoreError as e:
            if not e.transient or time.monotonic() > deadline:
                raise


def test_first_comers_on_a_store_that_ignores_conditional_writes_wait_by_lwws_rule(s3rver):
    """Two first-comers on s3rver (which lands every create), asking 1 and 2 slots, each
    request 0.1 s away each way (a proxy), the second starting 0.3 s after the first: it
    reads before the first's write lands, and its write lands after the first's settle
    asked for (0.05 s). Each waits twice its own read, listing and write, as an lww write
    does, so both use the one number stored; with the settle asked for, the first used its
    own and the second overwrote it."""
    from urllib.parse import urlsplit

    from fault_proxy import FaultProxy

    where = urlsplit(s3rver.endpoint)
    proxy = FaultProxy(where.hostname or "127.0.0.1", where.port or 80)
    try:
        options = {**s3rver.options, "aws_endpoint": proxy.url}
        # This process has checked the store already, as any process that used it has:
        # the check, slow, does not stand in for the wait.
        BlobSemaphore(s3rver.uri(), 1, storage_options=options).configuration()
        prefix = s3rver.uri()
        proxy.delay(0.1)
        seen: dict[int, int] = {}
        failed: list[BaseException] = []

        def first(n: int) -> None:
            semaphore = BlobSemaphore(prefix, n, settle=0.05, storage_options=options)
            try:
                seen[n] = number_used(semaphore)
            except BaseException as e:
                failed.append(e)

        threads = [threading.Thread(target=first, args=(n,)) for n in (1, 2)]
        for t in threads:
            t.start()
            time.sleep(0.3)
        for t in threads:
            t.join(120)
        proxy.heal()
        assert not failed, failed
        stored = BlobSemaphore(prefix, 1, storage_options=options).stored()
        assert stored is not None and seen == {1: stored.slots, 2: stored.slots}, (seen, stored)
    finally:
        proxy.close()
