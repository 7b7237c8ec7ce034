"""blob_lock.joblib.Memory in one process: a joblib.Memory in every way users reach it
(decorators, call_and_shelve, call, async functions, Path locations, location None, its
repr, pickling, one warning for a result that fails to load), threads and tasks missing
one call compute it once, a hit takes no lock (it works with the lock store out of reach),
options checked as BlobLock checks them and bad ones named as written, a lock lost while
computing (taken over: not stored, LockLost or the value; lost in an outage nobody used:
stored, an async function's renewal off the event loop), a wait and a takeover logged
naming the holder, a miss with the lock store out of reach until its timeout, clear and
reduce_size keep held locks, and the joblib versions refused and worded one way.
tests/python/test_joblib_processes.py has the cases across processes."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
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


def the_lock(memory: Memory, storage_options: dict | None = None) -> str:
    """The URI of the one lock under the memory's lock root."""
    (seen,) = list(list_locks(memory.lock_root, storage_options=storage_options))
    return seen.uri


@pytest.fixture(params=["files", "s3"])
def locks(request) -> dict:
    """Where the locks live: beside the cache (local files), or on S3 (moto) through
    ``lock_prefix``; the cache is on local files either way."""
    if request.param == "files":
        return {}
    from conftest import _s3_backend

    backend = _s3_backend(request.getfixturevalue("moto_endpoint"))
    return {"lock_prefix": backend.uri("joblib-locks"), "storage_options": backend.storage_options}


def records(caplog, words: str, level: int | None = None) -> list[logging.LogRecord]:
    """The records of blob_lock.joblib whose message holds ``words``."""
    return [
        r
        for r in caplog.records
        if r.name == "blob_lock.joblib" and words in r.getMessage()
        and (level is None or r.levelno == level)
    ]  # fmt: skip


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


def test_a_cached_function_shows_as_joblibs_does(tmp_path):
    def square(x):
        return x * x

    async def fetch(x):
        return x

    ours, plain = Memory(str(tmp_path / "cache"), verbose=0), joblib.Memory(str(tmp_path / "cache"))
    for f in (square, fetch):
        assert repr(ours.cache(f)) == repr(plain.cache(f))
        assert str(ours.cache(f)) == str(plain.cache(f))
    assert repr(ours) == repr(plain)


def test_a_memory_and_its_functions_pickle_to_equals(tmp_path):
    """What joblib's own tests compare after a pickle round trip: every attribute but the
    store backend and the timestamps, and joblib's hash of the object."""
    import pickle

    memory = Memory(
        str(tmp_path / "cache"), verbose=0, compress=3, expire=40, poll=0.5,
        labels={"job": "nightly"}, lock_prefix=tmp_path / "locks",
    )  # fmt: skip
    cached = memory.cache(abs)
    for made, skipped in [(memory, {"store_backend", "timestamp"}),
                          (cached, {"store_backend", "timestamp", "_func_code_id"})]:  # fmt: skip
        loaded = pickle.loads(pickle.dumps(made))
        assert type(loaded) is type(made)
        mine, theirs = vars(made), vars(loaded)
        assert mine.keys() == theirs.keys()
        assert {k: v for k, v in mine.items() if k not in skipped} == {
            k: v for k, v in theirs.items() if k not in skipped
        }
        assert joblib.hash(made) == joblib.hash(loaded)
    assert pickle.loads(pickle.dumps(memory)).lock_root == memory.lock_root
    other = Memory(str(tmp_path / "cache"), verbose=0, compress=3, expire=41, poll=0.5,
                   labels={"job": "nightly"}, lock_prefix=tmp_path / "locks")  # fmt: skip
    assert vars(other)["_calls"] != vars(memory)["_calls"]  # the options count


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_stored_result_that_fails_to_load_is_warned_about_once(tmp_path, caplog, kind):
    """As joblib: one warning, then the call computed again and stored."""
    computed: list[int] = []

    def square(x):
        computed.append(x)
        return x * x

    async def square_async(x):
        return square(x)

    def call(memory: joblib.Memory) -> int:
        cached = memory.cache(square if kind == "sync" else square_async)
        got = cached(4)
        return asyncio.run(got) if kind == "async" else got

    for made in (joblib.Memory, Memory):  # plain joblib's count, then ours
        computed.clear()
        memory = made(str(tmp_path / made.__module__), verbose=0)
        assert call(memory) == 16
        (item,) = memory.store_backend.get_items()
        with open(os.path.join(item.path, "output.pkl"), "w") as f:
            f.write("garbage")  # a result joblib cannot load
        caplog.clear()
        assert call(memory) == 16 and computed == [4, 4]
        warned = [r for r in caplog.records if "Exception while loading results" in r.getMessage()]
        assert len(warned) == 1, (made, [r.getMessage()[:120] for r in warned])
        assert call(memory) == 16 and computed == [4, 4]


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
    with pytest.raises(TypeError, match='"lock_prefx" \\(did you mean "lock_prefix"\\?\\)'):
        Memory(str(tmp_path / "cache"), lock_prefx="s3://bucket/joblib-locks")
    with pytest.raises(ValueError, match="poll must be positive"):
        Memory(str(tmp_path / "cache"), poll=0)
    with pytest.raises(ValueError, match="lock_prefix names no folder"):
        Memory(str(tmp_path / "cache"), lock_prefix="/")
    with pytest.raises(ValueError, match='lock_prefix: invalid prefix "s3://bucket/a%20b"'):
        Memory(str(tmp_path / "cache"), lock_prefix="s3://bucket/a%20b")


@pytest.mark.parametrize(
    "arguments",
    [{"lock_prefix": "s3:/bucket/locks"}, {"lock_prefix": "ftp://host/locks"}, {"expire": -1}],
)
def test_a_bad_argument_is_named_as_written_without_an_unrelated_error(tmp_path, arguments):
    """With a dict among the options (storage_options here): no chained TypeError from the
    way the options were read, no lock path the user never wrote."""
    import traceback

    with pytest.raises(ValueError) as raised:
        Memory(str(tmp_path / "cache"), storage_options={"aws_region": "eu-west-1"}, **arguments)
    message = str(raised.value)
    shown = "".join(traceback.format_exception(raised.type, raised.value, raised.tb))
    assert "TypeError" not in shown and "/check" not in message, shown
    if "lock_prefix" in arguments:
        assert f'"{arguments["lock_prefix"]}"' in message, message


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


SUPPORTED = "joblib>=1.4.2,<1.7"


def test_joblib_outside_the_tested_range_is_refused_naming_both(tmp_path):
    for version in ("1.3.2", "1.4.1", "1.7.0"):
        code = f"import joblib; joblib.__version__ = {version!r}; import blob_lock.joblib"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 1
        last = done.stderr.strip().splitlines()[-1]
        assert f"joblib {version} is installed" in last and SUPPORTED in last, last


def test_the_supported_joblib_versions_are_worded_one_way():
    """The extra, the module, its refusal and the page say the same range the same way."""
    import blob_lock.joblib
    from conftest import ROOT

    texts = {
        "pyproject.toml": (ROOT / "pyproject.toml").read_text(),
        "blob_lock.joblib": blob_lock.joblib.__doc__ + blob_lock.joblib.Memory.__doc__,
        "docs/joblib.md": (ROOT / "docs" / "joblib.md").read_text(),
    }
    for name, text in texts.items():
        assert SUPPORTED in text, name
        others = re.findall(r"(?:joblib )?1\.4\.2,? (?:up )?to 1\.[67]\b|1\.4\.2 up to", text)
        assert not others, (name, others)


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
    # The adapter's WARNING comes on a notice thread of its own, in no order with on_lost.
    args_id = uri.split("/")[-2]
    said = f"slow/{args_id}: its lock was lost while held"
    eventually(lambda: said in caplog.text, "the adapter's WARNING of the loss")
    other = BlobLock(uri)  # another process takes the call meanwhile
    assert other.acquire(timeout=30)
    gate.open()
    computing.join(60)
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


@pytest.fixture
def proxied(moto_endpoint):
    """A bucket on moto and a fault proxy in front of it: (backend, proxy, storage options
    through the proxy)."""
    from urllib.parse import urlsplit

    from conftest import _s3_backend
    from fault_proxy import FaultProxy

    backend = _s3_backend(moto_endpoint)
    where = urlsplit(moto_endpoint)
    proxy = FaultProxy(where.hostname or "127.0.0.1", where.port or 80)
    try:
        yield backend, proxy, dict(backend.storage_options, aws_endpoint=proxy.url)
    finally:
        proxy.close()


def test_an_async_call_renews_a_lost_lease_off_the_event_loop(tmp_path, caplog, proxied):
    """The lease lost in an outage nobody used, as above, for an async function: the renewal
    before joblib's write is awaited, the event loop runs on while it is in flight (the
    proxy slows it), and the result is stored."""
    caplog.set_level(logging.WARNING, logger="blob_lock.joblib")
    backend, proxy, options = proxied
    lost: list[LockLost] = []
    memory = Memory(
        str(tmp_path / "cache"), verbose=0, expire=3, on_lost=lost.append,
        lock_prefix=backend.uri("locks"), storage_options=options,
    )  # fmt: skip

    def stored() -> bool:
        return any((tmp_path / "cache").rglob("output.pkl"))

    async def main() -> tuple[int, bool]:
        started, opened = asyncio.Event(), asyncio.Event()

        @memory.cache
        async def slow(x):
            started.set()
            await opened.wait()
            return x + 300

        task = asyncio.ensure_future(slow(3))
        await asyncio.wait_for(started.wait(), 60)
        proxy.reset()
        began = time.monotonic()
        while not lost:
            assert time.monotonic() - began < 60, "the loss never reported"
            await asyncio.sleep(0.02)
        proxy.heal()
        proxy.delay(0.1)  # each chunk of the renewal, each way
        before = proxy.accepted
        opened.set()
        in_flight_seen = False  # a connection of the renewal open, the result not written
        while not task.done():
            in_flight_seen = in_flight_seen or (proxy.accepted > before and not stored())
            await asyncio.sleep(0.01)
        return await task, in_flight_seen

    assert asyncio.run(main()) == (303, True)
    assert stored()
    assert "its lease was renewed and the result stored" in caplog.text


def hold_and_die(uri: str, locks: dict) -> None:
    """A process that takes the lock at ``uri`` (expire 1 s, labelled) and dies holding it."""
    code = (
        "import json, os, sys\n"
        "from blob_lock import BlobLock\n"
        "options = json.loads(sys.argv[2])\n"
        "lock = BlobLock(sys.argv[1], expire=1, labels={'who': 'the-dead'}, **options)\n"
        "assert lock.acquire(timeout=60)\n"
        "os._exit(0)\n"
    )
    options = {k: v for k, v in locks.items() if k == "storage_options"}
    subprocess.run([sys.executable, "-c", code, uri, json.dumps(options)], check=True, timeout=120)


def test_a_wait_is_logged_once_at_info_naming_the_holder(tmp_path, caplog, locks):
    caplog.set_level(logging.INFO, logger="blob_lock.joblib")
    location = str(tmp_path / "cache")
    gate = Gate()
    holder = Memory(location, verbose=0, labels={"who": "the-holder"}, **locks)

    def slow(x):
        gate.compute(x)
        return x

    computing = threading.Thread(target=holder.cache(slow), args=(1,))
    computing.start()
    assert gate.started.wait(60)
    waiter = Memory(location, verbose=0, poll=0.05, **locks)
    got: list[int] = []
    waiting = threading.Thread(target=lambda: got.append(waiter.cache(slow)(1)))
    waiting.start()
    eventually(lambda: records(caplog, "waits"), "the wait logged")
    time.sleep(0.5)  # it looks for the result every 0.05 s meanwhile: nothing more logged
    gate.open()
    computing.join(60)
    waiting.join(60)
    assert got == [1] and gate.computed == [1]
    (waits,) = records(caplog, "waits")
    assert waits.levelno == logging.INFO and "the-holder" in waits.getMessage(), waits
    assert not records(caplog, "took it over")


def test_a_takeover_is_logged_naming_the_holder_that_died(tmp_path, caplog, locks):
    caplog.set_level(logging.INFO, logger="blob_lock.joblib")
    memory = Memory(str(tmp_path / "cache"), verbose=0, poll=0.1, **locks)
    computed: list[int] = []

    def square(x):
        computed.append(x)
        return x * x

    cached = memory.cache(square)
    assert cached(3) == 9
    uri = the_lock(memory, locks.get("storage_options"))
    cached.clear(warn=False)  # the result gone; its lock stays
    hold_and_die(uri, locks)
    assert cached(3) == 9 and computed == [3, 3]
    (waits,) = records(caplog, "waits")
    assert waits.levelno == logging.INFO and "the-dead" in waits.getMessage(), waits
    (took,) = records(caplog, "took it over")
    assert took.levelno == logging.WARNING and "the-dead" in took.getMessage(), took


def test_a_miss_while_the_lock_store_is_out_of_reach_says_so_until_timeout(
    tmp_path, caplog, proxied
):
    """It waits for the store (for ever under the default timeout=None, docs/joblib.md);
    the wait says why, and ``timeout`` ends it."""
    caplog.set_level(logging.INFO, logger="blob_lock.joblib")
    backend, proxy, options = proxied
    memory = Memory(
        str(tmp_path / "cache"), verbose=0, timeout=2, poll=0.2,
        lock_prefix=backend.uri("locks"), storage_options=options,
    )  # fmt: skip
    assert memory.cache(pow)(2, 5) == 32  # the store has answered this process
    proxy.reset()
    with pytest.raises(LockTimeout):
        memory.cache(pow)(2, 6)
    (waits,) = records(caplog, "cannot read who holds it")
    assert waits.levelno == logging.INFO and "timeout" in waits.getMessage(), waits


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
    from blob_lock.joblib._calls import Calls

    calls = Calls("s3://bucket/locks", {}, None)
    uri = calls.uri("__main__--tmp-100%-#1?/f", "0123abcd")
    assert uri == "s3://bucket/locks/__main__--tmp-100_-_1_/f/0123abcd"
    BlobLock(uri)  # accepted
