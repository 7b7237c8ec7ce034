"""Loss callbacks (``on_lost``) run on threads of blob-lock's own, apart from those that hand
asyncio results to their event loops and those that fetch credentials: callbacks that block
hold up neither. Each lock's callback is called once, however many locks are lost at once,
with at most four running at a time and the rest waiting in order (docs/usage.md, "When a
lock is lost"). The storm of 2,000 short callbacks is test_load.py's."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from blob_lock import BlobLock, LockLost, break_lock

# At most this many callbacks run at once (docs/usage.md says so).
CALLBACK_THREADS = 4
# A liveness bound: each wait below ends within a few seconds when the code works, and the
# blocked callbacks hold for 120 s unless let go.
BOUND = 30.0


class Blocking:
    """An ``on_lost`` callback that blocks until ``go`` is set, noting who got in and out."""

    def __init__(self) -> None:
        self.go = threading.Event()
        self.guard = threading.Lock()
        self.started: list[str] = []
        self.finished: list[str] = []
        self.inside = 0
        self.most_inside = 0

    def __call__(self, e: LockLost) -> None:
        with self.guard:
            self.started.append(e.uri)
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        self.go.wait(120)
        with self.guard:
            self.inside -= 1
            self.finished.append(e.uri)


def wait_until(done: Callable[[], bool], what: Callable[[], str]) -> None:
    deadline = time.monotonic() + BOUND
    while not done():
        assert time.monotonic() < deadline, what()
        time.sleep(0.01)


def take(n: int, callback: Blocking) -> list[BlobLock]:
    prefix = f"memory://callbacks-{uuid.uuid4().hex}"
    locks = [BlobLock(f"{prefix}/{i}", expire=3, on_lost=callback) for i in range(n)]
    for lock in locks:
        assert lock.try_acquire()
    return locks


def lose(locks: list[BlobLock]) -> None:
    """The next renewal of each finds it released by someone else: its callback is called."""
    for lock in locks:
        break_lock(lock.uri)


@contextmanager
def blocked_callbacks(n: int) -> Iterator[Blocking]:
    """``n`` locks lost whose callbacks block; inside, four (or ``n``) are blocked. On
    leaving, four must have been running at once and no more, and once let go each of the
    ``n`` must have run once."""
    callback = Blocking()
    locks = take(n, callback)
    lose(locks)
    running = min(n, CALLBACK_THREADS)
    try:
        wait_until(
            lambda: all(lock.lost for lock in locks) and callback.started != [],
            lambda: f"{sum(lock.lost for lock in locks)} of {n} lost, no callback started",
        )
        # The rest start at once; if they do not, the body runs all the same and the count
        # is asserted on leaving (so that the body's own failure shows first).
        started = time.monotonic()
        while len(callback.started) < running and time.monotonic() - started < 5:
            time.sleep(0.01)
        yield callback
        wait_until(
            lambda: len(callback.started) >= running,
            lambda: f"{len(callback.started)} callbacks running at once ({running} promised)",
        )
        assert len(callback.started) == running, callback.started
    finally:
        callback.go.set()
    wait_until(
        lambda: len(callback.finished) >= n,
        lambda: f"{len(callback.finished)} of {n} blocked callbacks ran once let go",
    )
    assert sorted(callback.finished) == lockfiles(locks)


def lockfiles(locks: list[BlobLock]) -> list[str]:
    """What each lock's ``LockLost.uri`` names: its lockfile."""
    return sorted(f"{lock.uri}/lock.json" for lock in locks)


def test_blocked_callbacks_hold_up_no_asyncio_result():
    """Eight callbacks block (four running, four waiting): asyncio acquisitions and
    releases in the same process still complete, each result handed to its event loop."""

    async def take_and_release(prefix: str) -> int:
        done = 0
        for i in range(20):
            lock = BlobLock(f"{prefix}/{i}")
            assert await lock.acquire_async(timeout=10)
            assert lock.held
            await lock.release_async()
            done += 1
        async with BlobLock(f"{prefix}/with") as held:
            assert held.held
        return done + 1

    with blocked_callbacks(8) as callback:
        prefix = f"memory://async-{uuid.uuid4().hex}"
        began = time.monotonic()
        try:
            done = asyncio.run(asyncio.wait_for(take_and_release(prefix), BOUND))
        except asyncio.TimeoutError:
            pytest.fail(f"asyncio results held up {BOUND:g} s behind blocked callbacks")
        took = time.monotonic() - began
        assert done == 21
        assert callback.finished == [], "the callbacks were still blocked meanwhile"
    print(f"21 asyncio acquisitions and releases in {took:.2f} s beside 8 blocked callbacks")


def test_blocked_callbacks_hold_up_no_credential_refresh(moto_endpoint):
    """A lock on S3 whose provider's credentials last 4 s (fetched again at half that) stays
    held while eight callbacks block: its credentials are fetched again meanwhile."""
    from conftest import _s3_backend

    backend = _s3_backend(moto_endpoint)
    options = {k: v for k, v in backend.storage_options.items() if "_key" not in k}
    fetched: list[float] = []

    def provider() -> dict:
        fetched.append(time.monotonic())
        return {
            "access_key_id": "testing",
            "secret_access_key": "testing",
            "token": None,
            "expires_at": datetime.now(timezone.utc) + timedelta(seconds=4),
        }

    lock = BlobLock(backend.uri(), expire=3, storage_options=options, credential_provider=provider)
    with lock as held:
        with blocked_callbacks(8) as callback:
            before = len(fetched)
            wait_until(
                lambda: len(fetched) >= before + 2,
                lambda: (
                    f"credentials fetched {len(fetched) - before} times in {BOUND:g} s "
                    "behind blocked callbacks (2 asked)"
                ),
            )
            assert held.held and not held.lost
            assert callback.finished == []


def threads_now() -> int:
    return len(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="counts threads in /proc")
def test_a_burst_of_losses_behind_blocked_callbacks_calls_each_once_on_four_threads():
    """1,000 locks lost at once while the callbacks block: four run, the rest wait (no
    thread each, none dropped); once let go, every lock's callback has run once."""
    n = 1000
    callback = Blocking()
    locks = take(n, callback)
    baseline = threads_now()
    lose(locks)
    most = baseline
    try:
        deadline = time.monotonic() + BOUND
        while not (all(lock.lost for lock in locks) and len(callback.started) >= 4):
            most = max(most, threads_now())
            assert time.monotonic() < deadline, f"{sum(lock.lost for lock in locks)} lost"
            time.sleep(0.01)
        assert len(callback.started) == CALLBACK_THREADS, callback.started
    finally:
        callback.go.set()
    deadline = time.monotonic() + BOUND
    while len(callback.finished) < n:
        most = max(most, threads_now())
        assert time.monotonic() < deadline, f"{len(callback.finished)} of {n} callbacks ran"
        time.sleep(0.01)
    time.sleep(0.5)  # a callback called twice would show now
    assert sorted(callback.finished) == lockfiles(locks)
    assert callback.most_inside == CALLBACK_THREADS
    # The callbacks' threads, at most four, and nothing per loss (the lockfiles are in
    # memory: no credential or asyncio threads either).
    assert most <= baseline + CALLBACK_THREADS, (baseline, most)


EXITS_WITH_BLOCKED_CALLBACKS = """
import logging, sys, threading, time, uuid
from blob_lock import BlobLock, break_lock
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s %(message)s")
started = []

def blocks(error):
    started.append(error.uri)
    threading.Event().wait()  # for ever

prefix = f"memory://exit-{uuid.uuid4().hex}"
locks = [BlobLock(f"{prefix}/{i}", expire=1, on_lost=blocks) for i in range(6)]
for lock in locks:
    assert lock.try_acquire()
    break_lock(lock.uri)
deadline = time.monotonic() + 30
while not (all(lock.lost for lock in locks) and len(started) >= 4):
    assert time.monotonic() < deadline, "losses not seen"
    time.sleep(0.01)
print("exiting", flush=True)
sys.exit(0)
"""


def test_exit_never_hangs_on_loss_callbacks_that_block(tmp_path):
    """Six locks lost, each ``on_lost`` blocking for ever (four running, two queued): the
    process still exits, after a bounded wait, with one WARNING that says what was left."""
    import subprocess
    import sys

    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", EXITS_WITH_BLOCKED_CALLBACKS],
        capture_output=True, text=True, timeout=BOUND * 2,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "exiting" in done.stdout
    assert time.monotonic() - began < BOUND * 2
    left = [line for line in done.stderr.splitlines() if "loss callback(s)" in line]
    assert len(left) == 1, done.stderr[-3000:]
    assert "4 loss callback(s) (on_lost) still running and 2 not yet started" in left[0], left


def test_an_adapters_loss_notices_never_wait_behind_a_users_blocked_callbacks(tmp_path):
    """Prefect's manager logs each loss itself, then calls the user's ``on_lost``: with six
    keys lost and the user's callbacks blocked on all four callback threads, every one of
    the six WARNINGs is logged all the same."""
    import logging

    from blob_lock.prefect import BlobLockManager

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("blob_lock.prefect")
    handler = Keep(logging.WARNING)
    logger.addHandler(handler)
    callback = Blocking()
    try:
        manager = BlobLockManager(str(tmp_path / "keys"), expire=1, on_lost=callback)
        keys = [f"key-{i}" for i in range(6)]
        for k in keys:
            assert manager.acquire_lock(k, f"holder-{k}", acquire_timeout=10)
            break_lock(str(tmp_path / "keys" / k))
        losses = lambda: [r for r in records if "was lost while held" in r.getMessage()]  # noqa: E731
        wait_until(lambda: len(losses()) == 6, lambda: f"{len(losses())} of 6 losses logged")
        wait_until(lambda: len(callback.started) == 4, lambda: f"{callback.started}")
    finally:
        callback.go.set()
        logger.removeHandler(handler)
