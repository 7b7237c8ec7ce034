"""blob_lock.joblib.Memory in one process: a joblib.Memory in every way users reach it
(decorators, call_and_shelve, call, async functions, Path locations, location None),
threads and tasks missing one call compute it once, a hit takes no lock (it works with the
lock store out of reach), options checked as BlobLock checks them, a lock lost while
computing (taken over: not stored, LockLost or the value; lost in an outage nobody used:
stored), clear and reduce_size keep held locks, and the joblib versions refused.
tests/python/test_joblib_processes.py has the cases across processes."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time

import joblib
import pytest
from blob_lock import (
    BlobLock,
    LockLost,
    LockState,
    LockTimeout,
    break_lock,
    inspect,
    list_locks,
)
from blob_lock.joblib import Memory
from conftest import eventually
from joblib.memory import MemorizedFunc, MemorizedResult


class Gate:
    """What a test's cached function waits on: it notes each computation, and waits until
    ``arrivals`` callers arrived, or until ``open()``."""

    def __init__(self, arrivals: int = 0) -> None:
        self.computed: list[object] = []
        self.arrived = 0
        self.arrivals = arrivals
        self.started = threading.Event()
        self.opened = threading.Event()
        self._guard = threading.Lock()

    def arrive(self) -> None:
        with self._guard:
            self.arrived += 1

    def compute(self, x: object) -> None:
        self.computed.append(x)
        self.started.set()
        if self.arrivals:
            eventually(lambda: self.arrived >= self.arrivals, "every caller arrived")
            time.sleep(0.3)  # their calls pass joblib's look before the result is stored
        else:
            assert self.opened.wait(60), "the test never opened the gate"

    def open(self) -> None:
        self.opened.set()


def the_lock(memory: Memory) -> str:
    """The URI of the one lock under the memory's lock root."""
    (seen,) = list(list_locks(memory.lock_root))
    return seen.uri


# -- a joblib.Memory --------------------------------------------------------------------


def test_a_joblib_memory_in_every_form(tmp_path):
    memory = Memory(str(tmp_path / "cache"), verbose=0)
    assert isinstance(memory, joblib.Memory)
    assert memory.lock_root == str(tmp_path / "cache" / "joblib-locks")
    computed: list[object] = []

    @memory.cache
    def square(x):
        computed.append(x)
        return x * x

    @memory.cache(ignore=["verbose"])
    def add(x, verbose=False):
        computed.append(("add", x))
        return x + 1

    def triple(x):
        computed.append(("triple", x))
        return 3 * x

    tripled = memory.cache(triple)
    assert all(isinstance(f, MemorizedFunc) for f in (square, add, tripled))
    assert (square(3), square(3), add(1), add(1, verbose=True), tripled(2), tripled(2)) == (
        9, 9, 2, 2, 6, 6,
    )  # fmt: skip
    shelved = square.call_and_shelve(4)
    assert isinstance(shelved, MemorizedResult) and shelved.get() == 16
    assert square.call_and_shelve(4).get() == 16
    assert computed == [3, ("add", 1), ("triple", 2), 4]
    output, metadata = square.call(3)  # forced: computed again, under the call's lock
    assert output == 9 and metadata["input_args"] == {"x": "3"} and computed[-1] == 3
    assert memory.eval(triple, 2) == 6 and computed[-1] == 3
    # Each computed call left one released lock; hits took none.
    seen = list(list_locks(memory.lock_root))
    assert len(seen) == 4 and {s.state for s in seen} == {LockState.RELEASED}, seen


def test_a_path_location_keeps_its_locks_beside_the_folder_joblib_uses(tmp_path):
    """joblib uses a pathlib.Path location as its folder (a str gets /joblib added)."""
    # Locks that clear may prune a moment after their call (clock_skew + expire).
    memory = Memory(tmp_path / "cache", verbose=0, expire=1, clock_skew=0)
    assert memory.lock_root == str(tmp_path / "cache-locks")
    memory.clear(warn=False)  # before any call: no lock, no folder of locks yet
    memory.reduce_size(items_limit=0)
    assert memory.cache(abs)(-2) == 2
    assert len(list(list_locks(memory.lock_root))) == 1
    assert not list((tmp_path / "cache").rglob("lock.json"))  # joblib empties this folder
    time.sleep(1.1)
    memory.clear(warn=False)
    assert not list(list_locks(memory.lock_root))  # the free lock pruned


def test_without_a_location_nothing_is_cached_or_locked(tmp_path):
    memory = Memory(None, expire=5)
    assert memory.lock_root is None
    computed: list[int] = []
    twice = memory.cache(lambda x: computed.append(x) or x)
    assert (twice(1), twice(1), computed) == (1, 1, [1, 1])


def test_threads_missing_one_call_compute_it_once(tmp_path):
    memory = Memory(str(tmp_path / "cache"), verbose=0)
    gate = Gate(arrivals=4)

    @memory.cache
    def slow(x):
        gate.compute(x)
        return x * 10

    results: list[int] = []

    def caller() -> None:
        gate.arrive()
        results.append(slow(5))

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == [50] * 4 and gate.computed == [5]


def test_async_tasks_missing_one_call_compute_it_once(tmp_path):
    memory = Memory(str(tmp_path / "cache"), verbose=0)
    computed: list[int] = []
    arrived = 0

    @memory.cache
    async def fetch(x):
        computed.append(x)
        while arrived < 4:  # every task misses before the result is stored
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        return -x

    async def caller() -> int:
        nonlocal arrived
        arrived += 1
        return await fetch(2)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(caller() for _ in range(4))))

    assert asyncio.run(main()) == [-2] * 4 and computed == [2]
    shelved = asyncio.run(fetch.call_and_shelve(3))
    assert isinstance(shelved, MemorizedResult) and shelved.get() == -3
    assert asyncio.run(fetch.call(3))[0] == -3 and computed == [2, 3, 3]


def test_a_hit_takes_no_lock(tmp_path, moto_endpoint):
    """Results stored, a Memory whose lock store is out of reach (a closed port) still
    returns them: a hit makes no request. Its miss fails, naming the store."""
    from conftest import _s3_backend

    backend = _s3_backend(moto_endpoint)
    location = str(tmp_path / "cache")
    prefix, options = backend.uri(), backend.storage_options
    Memory(location, verbose=0, lock_prefix=prefix, storage_options=options).cache(pow)(2, 5)
    closed = dict(backend.storage_options, aws_endpoint="http://127.0.0.1:9")
    out_of_reach = Memory(location, verbose=0, lock_prefix=prefix, storage_options=closed)
    assert out_of_reach.cache(pow)(2, 5) == 32
    with pytest.raises(Exception, match=r"127\.0\.0\.1:9"):
        out_of_reach.cache(pow)(2, 6)


def test_a_waiter_gives_up_after_timeout_naming_the_holder(tmp_path):
    location = str(tmp_path / "cache")
    gate = Gate()
    holder = Memory(location, verbose=0, labels={"who": "the-holder"})

    def slow(x):
        gate.compute(x)
        return x

    computing = threading.Thread(target=holder.cache(slow), args=(1,))
    computing.start()
    assert gate.started.wait(60)
    waiter = Memory(location, verbose=0, timeout=0.5)
    try:
        with pytest.raises(LockTimeout, match="the-holder"):
            waiter.cache(slow)(1)
    finally:
        gate.open()
        computing.join(60)
    assert waiter.cache(slow)(1) == 1 and gate.computed == [1]


# -- options ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [{"expire": -1}, {"expire": "30"}, {"on_lost": 3}, {"timeout": -1}, {"labels": {"": "x"}}],
)
def test_lock_options_are_checked_as_blob_lock_checks_them(tmp_path, options):
    with pytest.raises((TypeError, ValueError)) as ours:
        Memory(str(tmp_path / "cache"), **options)
    with pytest.raises(type(ours.value)) as blob_lock:
        BlobLock(str(tmp_path / "lock"), **options)
    assert str(ours.value) == str(blob_lock.value)


def test_bad_arguments_name_the_fix(tmp_path):
    with pytest.raises(TypeError, match=r'unknown argument "expires" \(did you mean "expire"\?\)'):
        Memory(str(tmp_path / "cache"), expires=60)
    with pytest.raises(TypeError, match='did you mean "mmap_mode"'):
        Memory(str(tmp_path / "cache"), mmap_mod="r")
    with pytest.raises(ValueError, match="poll must be positive"):
        Memory(str(tmp_path / "cache"), poll=0)
    with pytest.raises(ValueError, match="lock_prefix names no folder"):
        Memory(str(tmp_path / "cache"), lock_prefix="/")
    with pytest.raises(ValueError, match="invalid lock URI"):
        Memory(str(tmp_path / "cache"), lock_prefix="s3://bucket/a%20b")


def test_a_store_backend_other_than_local_files_needs_lock_prefix(tmp_path):
    from joblib._store_backends import FileSystemStoreBackend, StoreBackendBase, StoreBackendMixin
    from joblib.memory import register_store_backend

    class Elsewhere(StoreBackendBase, StoreBackendMixin):  # a folder, as a remote store would be
        _open_item = staticmethod(open)
        _item_exists = staticmethod(os.path.exists)
        _move_item = staticmethod(FileSystemStoreBackend._move_item)
        create_location = FileSystemStoreBackend.create_location
        clear_location = FileSystemStoreBackend.clear_location
        get_items = FileSystemStoreBackend.get_items
        configure = FileSystemStoreBackend.configure

    register_store_backend("elsewhere", Elsewhere)
    with pytest.raises(ValueError, match="give lock_prefix"):
        Memory(str(tmp_path / "cache"), backend="elsewhere")
    memory = Memory(
        str(tmp_path / "cache"), backend="elsewhere", verbose=0, lock_prefix=tmp_path / "locks"
    )
    assert memory.cache(abs)(-3) == 3
    assert [s.state for s in list_locks(tmp_path / "locks")] == [LockState.RELEASED]


def test_joblib_outside_the_tested_range_is_refused_naming_both(tmp_path):
    for version in ("1.3.2", "1.4.1", "1.7.0"):
        code = f"import joblib; joblib.__version__ = {version!r}; import blob_lock.joblib"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 1
        last = done.stderr.strip().splitlines()[-1]
        assert f"joblib {version} is installed" in last and "1.4.2 up to 1.7" in last, last


# -- a lock lost while computing --------------------------------------------------------


@pytest.mark.parametrize("raise_on_lost", [True, False])
def test_a_call_taken_over_while_computing_is_not_stored(tmp_path, caplog, raise_on_lost):
    caplog.set_level(logging.WARNING, logger="blob_lock.joblib")
    lost: list[LockLost] = []
    memory = Memory(
        str(tmp_path / "cache"), verbose=0, expire=2, on_lost=lost.append,
        raise_on_lost=raise_on_lost,
    )  # fmt: skip
    gate = Gate()

    @memory.cache
    def slow(x):
        gate.compute(x)
        return x + 100

    got: dict[str, object] = {}

    def call() -> None:
        try:
            got["value"] = slow(1)
        except Exception as e:
            got["error"] = e

    computing = threading.Thread(target=call)
    computing.start()
    assert gate.started.wait(60)
    uri = the_lock(memory)
    break_lock(uri)  # by hand: the holder learns it at its next renewal
    eventually(lambda: lost, "the loss reported to on_lost")
    other = BlobLock(uri)  # another process takes the call meanwhile
    assert other.acquire(timeout=30)
    gate.open()
    computing.join(60)
    args_id = uri.split("/")[-2]
    assert f"slow/{args_id}: its lock was lost while held" in caplog.text
    assert "broken" in caplog.text or "released" in caplog.text, caplog.text
    if raise_on_lost:
        error = got["error"]
        assert isinstance(error, LockLost) and "its result was not stored" in str(error)
    else:
        assert got == {"value": 101}
    assert "its result was not stored" in caplog.text
    assert not slow.check_call_in_cache(1)
    other.release()
    assert slow(1) == 101 and gate.computed == [1, 1]


def test_a_lock_lost_in_an_outage_nobody_used_still_stores(tmp_path, caplog, moto_endpoint):
    """The store out of reach past the lease, then back before anyone took the call: the
    holder renews its own acquisition (nobody's write came between) and stores."""
    from urllib.parse import urlsplit

    from conftest import _s3_backend
    from fault_proxy import FaultProxy

    caplog.set_level(logging.WARNING, logger="blob_lock.joblib")
    backend = _s3_backend(moto_endpoint)
    where = urlsplit(moto_endpoint)
    proxy = FaultProxy(where.hostname or "127.0.0.1", where.port or 80)
    try:
        lost: list[LockLost] = []
        options = dict(backend.storage_options, aws_endpoint=proxy.url)
        memory = Memory(
            str(tmp_path / "cache"), verbose=0, expire=2, on_lost=lost.append,
            lock_prefix=backend.uri("locks"), storage_options=options,
        )  # fmt: skip
        gate = Gate()

        @memory.cache
        def slow(x):
            gate.compute(x)
            return x + 200

        got: list[int] = []
        computing = threading.Thread(target=lambda: got.append(slow(2)))
        computing.start()
        assert gate.started.wait(60)
        proxy.reset()
        eventually(lambda: lost, "the loss reported")
        proxy.heal()
        gate.open()
        computing.join(60)
        assert got == [202]
        assert "nobody had taken the call since: its lease was renewed and the result stored" in (
            caplog.text
        )
        assert slow.check_call_in_cache(2)
        (seen,) = list(list_locks(memory.lock_root, storage_options=options))
        assert seen.state is LockState.RELEASED, seen
    finally:
        proxy.close()


# -- clear and reduce_size --------------------------------------------------------------


@pytest.mark.parametrize("how", ["clear", "reduce_size", "function_clear"])
def test_clearing_keeps_a_held_lock_and_prunes_the_free_ones(tmp_path, how):
    """A cached function's own clear (which joblib also calls inside a call whose function
    changed) prunes nothing: the Memory's clear and reduce_size do (a lock once no create
    of it can be on its way: its expire, here 1 s, with clock_skew 0)."""
    memory = Memory(str(tmp_path / "cache"), verbose=0, expire=1, clock_skew=0)
    gate = Gate()

    @memory.cache
    def slow(x):
        if x == 0:
            gate.compute(x)
        return x

    assert [slow(1), slow(2)] == [1, 2]
    computing = threading.Thread(target=slow, args=(0,))
    computing.start()
    assert gate.started.wait(60)
    held = [s.uri for s in list_locks(memory.lock_root) if s.state is LockState.OURS]
    free = [s.uri for s in list_locks(memory.lock_root) if s.state is LockState.RELEASED]
    assert len(held) == 1 and len(free) == 2
    time.sleep(1.1)
    if how == "clear":
        memory.clear(warn=False)
    elif how == "reduce_size":
        memory.reduce_size(items_limit=0)
    else:
        slow.clear(warn=False)
    left = sorted((s.state.value, s.uri) for s in list_locks(memory.lock_root))
    kept = free if how == "function_clear" else []
    assert left == sorted([("ours", held[0]), *(("released", u) for u in kept)]), left
    assert not slow.check_call_in_cache(1)
    gate.open()
    computing.join(60)
    assert slow.check_call_in_cache(0)
    assert inspect(held[0]).state is LockState.RELEASED


def test_calls_of_odd_names_get_lock_uris_every_store_takes():
    from blob_lock._joblib_calls import Calls

    calls = Calls("s3://bucket/locks", {}, None)
    uri = calls.uri("__main__--tmp-100%-#1?/f", "0123abcd")
    assert uri == "s3://bucket/locks/__main__--tmp-100_-_1_/f/0123abcd"
    BlobLock(uri)  # accepted
