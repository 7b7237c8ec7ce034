"""blob_lock.prefect.BlobLockManager against the cases of Prefect's own lock managers
(PrefectHQ/prefect tests/test_locking.py, for the memory and file-system managers, and
src/integrations/prefect-redis/tests/test_locking.py), written anew for ours, on local
files, S3 on moto and Azure on Azurite: Prefect's ResultStore on it, every method of the
protocol sync and async, hold and acquire timeouts, threads, pickled copies, releases
after a retry. tests/python/test_prefect_processes.py has the cases across processes."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from uuid import uuid4

import cloudpickle
import pytest
from blob_lock import LockTimeout
from blob_lock.prefect import HOLDER_LABEL, BlobLockManager, _held
from conftest import _make_backend, eventually
from prefect.filesystems import LocalFileSystem
from prefect.locking.protocol import LockManager
from prefect.results import ResultStore

EXPIRE = 4.0


@pytest.fixture(params=["file", "s3", "az"])
def shared_backend(request, tmp_path):
    """Local files, S3 on moto, Azure on Azurite (conftest.py marks the last two slow)."""
    return _make_backend(request.param, request, tmp_path)


@pytest.fixture
def manager(shared_backend):
    options = shared_backend.storage_options or None
    made = BlobLockManager(shared_backend.uri(), expire=EXPIRE, storage_options=options)
    yield made
    # What a test left held, released while its store still runs.
    for held in list(_held._held.values()):
        if held.lock.uri.startswith(made.prefix + "/"):
            made.release_lock(held.key, held.holder)


@pytest.fixture
def store(manager, tmp_path) -> ResultStore:
    """Prefect's result store, its results in a local folder, its locks on the store."""
    results = LocalFileSystem(basepath=str(tmp_path / "results"))
    return ResultStore(result_storage=results, lock_manager=manager)


def key() -> str:
    return str(uuid4())


def test_it_is_prefects_lock_manager(manager):
    assert isinstance(manager, LockManager)


# -- Prefect's ResultStore on it ------------------------------------------------------------


def test_a_read_of_a_locked_key_waits_for_its_writer(store):
    k, read = key(), queue.Queue()
    assert store.acquire_lock(k, holder="holder1")
    reader = threading.Thread(target=lambda: read.put(store.read(k).result))
    reader.start()
    time.sleep(0.3)  # the reader is waiting by now: no record until the writer writes one
    assert read.empty()
    store.write(key=k, obj={"test": "value"}, holder="holder1")
    store.release_lock(k, holder="holder1")
    assert read.get(timeout=60) == {"test": "value"}
    reader.join()


def test_the_holder_writes_under_its_lock(store):
    k = key()
    assert store.acquire_lock(k)  # Prefect's default holder: host, pid and thread
    store.write(key=k, obj={"test": "value"})
    assert store.read(k).result == {"test": "value"}


def test_another_holders_write_is_refused(store):
    k = key()
    assert store.acquire_lock(k, holder="holder1")
    refused = f"Cannot write to result record with key {k} because it is locked by another holder."
    with pytest.raises(RuntimeError, match=refused):
        store.write(key=k, obj={"test": "value"}, holder="holder2")


# -- the protocol -----------------------------------------------------------------------------


def test_acquire_and_release(manager):
    k = key()
    assert manager.acquire_lock(k, holder="holder1")
    assert manager.is_locked(k)
    manager.release_lock(k, holder="holder1")
    assert not manager.is_locked(k)


def test_acquire_and_release_in_asyncio(manager):
    k = key()

    async def main() -> None:
        assert await manager.aacquire_lock(k, holder="holder1")
        assert manager.is_locked(k)
        assert not await manager.aacquire_lock(k, holder="holder2", acquire_timeout=0.1)
        manager.release_lock(k, holder="holder1")
        assert not manager.is_locked(k)

    asyncio.run(main())


def test_the_same_holder_acquires_again(manager):
    k = key()
    assert manager.acquire_lock(k, holder="holder1")
    assert manager.acquire_lock(k, holder="holder1")
    assert manager.acquire_lock(k, holder="holder1", acquire_timeout=0)
    assert manager.is_locked(k)
    manager.release_lock(k, holder="holder1")
    assert not manager.is_locked(k)


def test_the_holder_is_written_into_the_lockfile(manager, shared_backend):
    from blob_lock import inspect

    k, options = key(), shared_backend.storage_options or None
    assert manager.acquire_lock(k, holder="holder1")
    seen = inspect(f"{manager.prefix}/{k}", storage_options=options)
    assert seen.labels == {HOLDER_LABEL: "holder1"}
    assert seen.expire_s == EXPIRE
    manager.release_lock(k, holder="holder1")


def test_hold_timeout_frees_the_lock_and_says_so(manager, caplog):
    k, hold = key(), 1.0
    caplog.set_level(logging.WARNING, logger="blob_lock.prefect")
    began = time.monotonic()
    assert manager.acquire_lock(k, holder="holder1", hold_timeout=hold)
    assert manager.is_locked(k)
    eventually(lambda: not manager.is_locked(k), "freed after its hold_timeout")
    assert time.monotonic() - began >= hold  # not before
    assert not manager.is_lock_holder(k, holder="holder1")
    assert f"Prefect lock {k!r}: holder holder1 still held it at its hold_timeout" in caplog.text


def test_the_same_holder_acquiring_again_restarts_its_hold_timeout(manager):
    """Prefect's file-system manager's rule: a holder's acquisition again counts its
    hold_timeout from then (a timer never fires early: the bounds below are safe)."""
    k, hold = key(), 1.5
    assert manager.acquire_lock(k, holder="holder1", hold_timeout=hold)
    time.sleep(hold / 2)
    again = time.monotonic()
    assert manager.acquire_lock(k, holder="holder1", hold_timeout=hold)
    eventually(lambda: not manager.is_locked(k), "freed after its hold_timeout")
    assert time.monotonic() - again >= hold  # from the second acquisition, not the first


def test_the_same_holder_acquiring_again_without_hold_timeout_holds_until_released(manager):
    k, hold = key(), 0.5
    assert manager.acquire_lock(k, holder="holder1", hold_timeout=hold)
    assert manager.acquire_lock(k, holder="holder1")  # no hold_timeout now: until released
    time.sleep(hold * 3)
    assert manager.is_lock_holder(k, holder="holder1")
    manager.release_lock(k, holder="holder1")
    assert not manager.is_locked(k)


def test_acquire_timeout(manager):
    k = key()
    assert manager.acquire_lock(k, holder="holder1")
    began = time.monotonic()
    assert not manager.acquire_lock(k, holder="holder2", acquire_timeout=0.1)
    assert time.monotonic() - began >= 0.1
    assert not manager.acquire_lock(k, holder="holder2", acquire_timeout=0)  # one attempt
    manager.release_lock(k, holder="holder1")
    assert not manager.is_locked(k)


def test_the_next_holder_takes_it_when_a_hold_timeout_ends(manager):
    k = key()
    assert manager.acquire_lock(k, holder="holder1", hold_timeout=0.5)
    assert manager.is_locked(k)
    assert manager.acquire_lock(k, holder="holder2")  # waits for the hold_timeout
    assert manager.is_lock_holder(k, holder="holder2")
    manager.release_lock(k, holder="holder2")
    assert not manager.is_locked(k)


def test_a_release_by_another_holder_raises_naming_both(manager):
    k = key()
    assert manager.acquire_lock(k, holder="holder1")
    with pytest.raises(ValueError, match=f"No lock held by holder2 for transaction with key {k}"):
        manager.release_lock(k, holder="holder2")
    with pytest.raises(ValueError, match="holder1 holds it"):
        manager.release_lock(k, holder="holder2")
    assert manager.is_lock_holder(k, holder="holder1")


def test_is_lock_holder(manager):
    k = key()
    assert not manager.is_lock_holder(k, holder="holder1")
    assert manager.acquire_lock(k, holder="holder1")
    assert manager.is_lock_holder(k, holder="holder1")
    assert not manager.is_lock_holder(k, holder="holder2")


def test_wait_for_lock(manager):
    k = key()
    assert manager.wait_for_lock(k)  # never locked
    assert manager.acquire_lock(k, holder="holder1", hold_timeout=1)
    assert manager.wait_for_lock(k)
    assert not manager.is_locked(k)
    assert manager.acquire_lock(k, holder="holder1")
    assert not manager.wait_for_lock(k, timeout=0.1)
    assert not manager.wait_for_lock(k, timeout=0)
    assert manager.is_locked(k)
    manager.release_lock(k, holder="holder1")
    assert not manager.is_locked(k)


def test_wait_for_lock_in_asyncio(manager):
    k = key()

    async def main() -> None:
        assert await manager.await_for_lock(k)  # never locked
        assert await manager.aacquire_lock(k, holder="holder1")
        assert not await manager.await_for_lock(k, timeout=0.1)
        assert manager.is_locked(k)
        manager.release_lock(k, holder="holder1")
        assert not manager.is_locked(k)
        assert await manager.aacquire_lock(k, holder="holder1", hold_timeout=1)
        assert await manager.await_for_lock(k)
        assert not manager.is_locked(k)

    asyncio.run(main())


def test_locking_works_across_threads(manager):
    k, took = key(), threading.Event()
    assert manager.acquire_lock(k, holder="holder1")

    def get_lock() -> None:
        assert manager.acquire_lock(k, holder="holder2")
        took.set()

    thread = threading.Thread(target=get_lock)
    thread.start()
    time.sleep(0.2)
    assert not took.is_set()
    manager.release_lock(k, holder="holder1")
    thread.join(60)
    assert took.is_set() and manager.is_lock_holder(k, holder="holder2")


def test_releasing_a_lock_nobody_holds_does_nothing(store, manager):
    # prefect-redis's issue 17676: a task retried after its transaction's rollback releases
    # its first holder's lock again, after the retry's holder took it.
    k = key()
    assert store.acquire_lock(k, holder="transaction1")
    store.release_lock(k, holder="transaction1")
    store.release_lock(k, holder="transaction1")  # again: nothing
    assert store.acquire_lock(k, holder="transaction2")
    with pytest.raises(ValueError, match="No lock held by transaction1"):
        store.release_lock(k, holder="transaction1")
    store.release_lock(k, holder="transaction2")
    store.release_lock(k, holder="transaction1")  # nobody holds it: nothing
    manager.release_lock(key(), holder="never")  # never taken: nothing
    assert not manager.is_locked(k)


# -- copies -------------------------------------------------------------------------------------


def test_a_copy_unpickled_here_sees_the_locks_and_takes_its_own(manager):
    k = key()
    assert manager.acquire_lock(k, holder="holder1")
    copy = cloudpickle.loads(cloudpickle.dumps(manager))
    assert copy is not manager and copy.prefix == manager.prefix
    assert copy.is_locked(k) and copy.is_lock_holder(k, holder="holder1")
    assert not copy.is_lock_holder(k, holder="holder2")
    copy.release_lock(k, holder="holder1")  # the original's lock, released through the copy
    assert not manager.is_locked(k)

    async def main() -> None:
        k2, hold = key(), 0.5
        assert await copy.aacquire_lock(k2, holder="a", acquire_timeout=1, hold_timeout=hold)
        assert await copy.aacquire_lock(k2, holder="a", acquire_timeout=1, hold_timeout=hold)
        await asyncio.sleep(hold + 0.1)
        assert await copy.aacquire_lock(k2, holder="b", acquire_timeout=10, hold_timeout=hold)
        copy.release_lock(k2, holder="b")

    asyncio.run(main())


def test_options_are_checked_when_the_manager_is_made(tmp_path):
    import inspect as python_inspect

    from blob_lock import LOCK_OPTIONS, inspect

    shown = python_inspect.signature(BlobLockManager).parameters
    assert list(shown) == ["prefix", *(o.name for o in LOCK_OPTIONS)]
    with pytest.raises(ValueError, match="expire"):
        BlobLockManager(tmp_path, expire=0.1)
    with pytest.raises(TypeError, match='did you mean "expire"'):
        BlobLockManager(tmp_path, expirre=3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=HOLDER_LABEL):
        BlobLockManager(tmp_path, labels={HOLDER_LABEL: "me"})
    manager = BlobLockManager(tmp_path, labels={"team": "ml"}, timeout=0.2)
    k = key()
    assert manager.acquire_lock(k, holder="holder1")
    seen = inspect(f"{manager.prefix}/{k}")
    assert seen.labels == {"team": "ml", HOLDER_LABEL: "holder1"}
    # The manager's timeout bounds the waits Prefect leaves unbounded, which ignore a False.
    with pytest.raises(LockTimeout, match=f"Prefect lock {k!r}: holder holder2 waited 0.2s"):
        manager.acquire_lock(k, holder="holder2")
    assert not manager.acquire_lock(k, holder="holder2", acquire_timeout=0.1)
    for bad in ["", "/abs", "a//b", "../up", "a/./b"]:
        with pytest.raises(ValueError, match="path segments"):
            manager.is_locked(bad)
    with pytest.raises(ValueError, match="acquire_timeout"):
        manager.acquire_lock(key(), holder="h", acquire_timeout=-1)
    long_holder = "h" * 300
    assert manager.acquire_lock(k + "-long", holder=long_holder)
    assert manager.is_lock_holder(k + "-long", holder=long_holder)
    assert not manager.is_lock_holder(k + "-long", holder="h" * 299)
