"""The lock's contract, on memory, file, S3 (moto) and Azure (Azurite)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid

import pytest
from blob_lock import (
    BlobLock,
    InvalidLockFile,
    LockError,
    LockLost,
    LockNotFound,
    LockStolen,
    LockTimeout,
    ReleaseStatus,
    StoreError,
    inspect,
    keep_alive,
)
from conftest import assert_first_token, micros_now


def test_two_holders_never_overlap_threads(backend):
    uri = backend.uri()
    inside, entries, errors = [], [], []
    guard = threading.Lock()

    def worker():
        try:
            for _ in range(4):
                with backend.lock(uri, expire=5) as held:
                    with guard:
                        inside.append(held.owner)
                        assert len(inside) == 1, f"two holders: {inside}"
                    entries.append(held.token)
                    time.sleep(0.01)
                    with guard:
                        inside.remove(held.owner)
        except BaseException as e:  # report in the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert len(entries) == 16
    # One acquisition per token, each larger than the one before (recorded while held).
    assert entries == sorted(set(entries)), entries


def test_tokens_grow_across_holders_and_release_statuses(backend):
    uri = backend.uri()
    a, b = backend.lock(uri), backend.lock(uri)
    assert b.release() == ReleaseStatus.NO_LOCKFILE
    since = micros_now()
    assert a.acquire(timeout=10)
    assert (a.held, a.lost) == (True, False)
    assert_first_token(a.token, since)
    first = a.token
    # b is not the owner: its release is refused and changes nothing.
    assert b.try_acquire() is False
    assert b.release() == ReleaseStatus.HELD_BY_OTHER
    assert a.held and not a.lost
    assert a.release() == ReleaseStatus.RELEASED
    assert a.release() == ReleaseStatus.ALREADY_RELEASED
    assert not a.held and a.token is None
    assert b.try_acquire()
    assert b.token > first
    second = b.token
    b.release()
    with a as held:
        assert held is a and held.token > second


def test_acquire_times_out_while_held(backend):
    uri = backend.uri()
    with backend.lock(uri, expire=2):
        other = backend.lock(uri, expire=2, timeout=0.5)
        started = time.monotonic()
        assert other.acquire() is False
        # Heartbeats keep it held past expire.
        assert other.acquire(timeout=3) is False
        with pytest.raises(LockTimeout) as info:
            with other:
                pass
        assert uri in str(info.value)
        assert time.monotonic() - started >= 3.5


def test_not_reentrant(backend):
    lock = backend.lock(backend.uri())
    with lock:
        with pytest.raises(Exception, match="not reentrant"):
            lock.acquire()


def test_keep_alive_refuses_wrong_owner_and_missing_lock(backend):
    uri = backend.uri()
    with pytest.raises(LockNotFound) as info:
        backend.keep_alive(uri, "nobody")
    assert info.value.uri and uri in info.value.uri
    with backend.lock(uri, expire=2) as held:
        with pytest.raises(LockStolen):
            backend.keep_alive(uri, "someone-else")
        with backend.keep_alive(uri, held.owner) as remote:
            assert remote.token == held.token
            # Both renew across a whole expiry (2 s) without a false steal: a few writes
            # of each, and more than the expiry gone by.
            began, first = time.monotonic(), (held.inspect().write_count or 0)
            deadline = began + 60
            while time.monotonic() - began < 2.5 or (held.inspect().write_count or 0) < first + 4:
                assert time.monotonic() < deadline, "no renewals in 60 s"
                assert not remote.lost and not held.lost
                time.sleep(0.05)
            assert not remote.lost and not held.lost
        assert held.release() == ReleaseStatus.RELEASED
    with pytest.raises(LockStolen, match="released"):
        backend.keep_alive(uri, held.owner)


def steal(backend, uri: str) -> None:
    """Takes the lock over behind its holder's back, as a waiter would after expiry."""
    if backend.raw_put is None:
        pytest.skip("no way to write memory:// from outside; cargo test covers this")
    thief = json.loads(backend.raw_get(uri))
    thief.update(writer_id="thief", token=thief["token"] + 1)
    backend.raw_put(uri, json.dumps(thief).encode())


def wait_lost(lock, within: float = 30) -> None:
    """Waits (a liveness bound) until ``lock`` knows it lost its lease."""
    deadline = time.monotonic() + within
    while not lock.lost and time.monotonic() < deadline:
        time.sleep(0.05)


def test_holder_sees_lost_when_taken(backend):
    uri = backend.uri()
    lock = backend.lock(uri, expire=1.5)
    assert lock.acquire()
    steal(backend, uri)
    wait_lost(lock)
    assert lock.lost and not lock.held
    assert "thief" in lock.lost_reason
    # Releasing a lost lock writes nothing over the new holder.
    assert lock.release() == ReleaseStatus.HELD_BY_OTHER
    assert json.loads(backend.raw_get(uri))["writer_id"] == "thief"


def test_loss_is_told_by_callback_and_by_leaving_the_block(backend):
    uri = backend.uri()
    told: list[LockLost] = []
    called = threading.Event()

    def on_lost(error: LockLost) -> None:
        told.append(error)
        called.set()

    with pytest.raises(LockLost, match="thief") as info:
        with backend.lock(uri, expire=1.5, on_lost=on_lost) as held:
            steal(backend, uri)
            assert called.wait(30), "on_lost was not called"
            assert held.lost
    assert uri in info.value.uri
    assert len(told) == 1 and "thief" in str(told[0]) and uri in told[0].uri
    assert json.loads(backend.raw_get(uri))["writer_id"] == "thief"  # left alone


def test_a_loss_found_only_at_release_is_told_too(backend):
    # Taken over between heartbeats (here the first is 10 s away): the release finds it.
    uri = backend.uri()
    told = threading.Event()
    with pytest.raises(LockLost, match="at release it was held by owner thief"):
        with backend.lock(uri, expire=30, on_lost=lambda _: told.set()):
            steal(backend, uri)
    assert told.wait(30), "on_lost was not called"
    assert json.loads(backend.raw_get(uri))["writer_id"] == "thief"


def test_a_blocklock_shared_by_threads_is_taken_in_turn_like_threading_lock(backend):
    from blob_lock import _turn

    shared = backend.lock(backend.uri(), expire=5)
    got: list[tuple[bool, int | None]] = []
    waits = threading.Event()

    def second_thread() -> None:
        # While the first thread holds it: one attempt says no, a short wait times out...
        got.append((shared.try_acquire(), None))
        got.append((shared.acquire(timeout=0.3), None))
        # ...and a wait takes it once the first thread releases it.
        waits.set()
        ok = shared.acquire(timeout=60)
        got.append((ok, shared.token))
        shared.release()

    with shared as held:
        first = held.token
        with pytest.raises(LockError, match="not reentrant"):
            shared.acquire(timeout=1)  # the thread that holds it may not take it again
        waiting_before = _turn._waiting  # threads waiting for a turn on some BlobLock
        thread = threading.Thread(target=second_thread)
        thread.start()
        assert waits.wait(30), "the second thread never got to its long wait"
        # It found the turn taken and waits for it (the 0.3 s wait has returned before
        # `waits` is set, so this count is the long wait's).
        deadline = time.monotonic() + 30
        while _turn._waiting <= waiting_before:
            assert time.monotonic() < deadline, "the second thread never waited for its turn"
            time.sleep(0.01)
        assert len(got) == 2 and thread.is_alive(), "it took the lock the first thread holds"
        assert shared.held and shared.token == first
    thread.join(60)
    assert not thread.is_alive(), "the second thread did not take the lock once released"
    assert got[:2] == [(False, None), (False, None)] and got[2][0] is True
    assert first is not None and got[2][1] is not None and got[2][1] > first
    assert not shared.held


def test_loss_can_be_ignored_or_noted_on_the_blocks_own_error(backend):
    uri = backend.uri()
    with backend.lock(uri, expire=1.5, raise_on_lost=False) as held:
        steal(backend, uri)
        wait_lost(held)
        assert held.lost
    # A block that raises keeps its own error; the loss is added as a note.
    uri = backend.uri()
    with pytest.raises(KeyError) as info:
        with backend.lock(uri, expire=1.5) as held:
            steal(backend, uri)
            deadline = time.monotonic() + 30
            while not held.lost and time.monotonic() < deadline:
                time.sleep(0.05)
            raise KeyError("the block's own error")
    notes = getattr(info.value, "__notes__", [])
    if sys.version_info >= (3, 11):
        assert len(notes) == 1 and "was lost" in notes[0] and "thief" in notes[0], notes


@pytest.mark.parametrize(
    "body, why",
    [
        (b"{not json", "not JSON"),
        (b'{"written_at": "x"}', "writer_id"),
        (b'{"writer_id": "w"}', "expire_s"),
        (b'["a"]', "not a JSON object"),
        (b'{"writer_id": "w", "expire_s": 1, "pad": "' + b"x" * 100_000 + b'"}', "larger"),
    ],
)
def test_corrupt_lockfile_is_reported_and_left_alone(backend, body, why):
    if backend.raw_put is None:
        pytest.skip("no way to write memory:// from outside; cargo test covers this")
    uri = backend.uri()
    backend.raw_put(uri, body)
    lock = backend.lock(uri)
    with pytest.raises(InvalidLockFile, match=why) as info:
        lock.try_acquire()
    assert "lock.json" in str(info.value)
    with pytest.raises(InvalidLockFile):
        backend.keep_alive(uri, "w")
    assert backend.raw_get(uri) == body


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"expire": 0}, "expire"),
        ({"expire": -3}, "expire"),
        ({"expire": float("nan")}, "expire"),
        ({"expire": 10, "heartbeat": 5}, "heartbeat"),
        ({"expire": 10, "heartbeat": 0}, "heartbeat"),
        ({"timeout": -1}, "timeout"),
        ({"protocol": "paxos"}, "protocol"),
    ],
)
def test_nonsense_timings_are_refused(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        BlobLock(str(tmp_path), **kwargs)


@pytest.mark.parametrize(
    "uri, match",
    [
        ("", "empty"),
        ("ftp://host/x", "unknown scheme"),
        ("s3:///no-bucket", "bucket"),
        ("az://", "container"),
        ("memory:///x", "store name"),
        ("file://host/x", "three slashes"),
    ],
)
def test_bad_uris_are_refused(uri, match):
    with pytest.raises(ValueError, match=match):
        BlobLock(uri)


def test_an_unknown_scheme_lists_every_scheme_accepted():
    with pytest.raises(ValueError) as e:
        BlobLock("ftp://host/x")
    for scheme in ("s3://", "s3a://", "az://", "azure://", "abfs://", "abfss://", "adl://"):
        assert scheme in str(e.value), e.value
    for scheme in ("gs://", "file://", "memory://"):
        assert scheme in str(e.value), e.value


def test_unknown_storage_option_is_refused():
    with pytest.raises(ValueError, match="aws_no_such_thing"):
        BlobLock("s3://bucket/x", storage_options={"aws_no_such_thing": "1"})
    with pytest.raises(ValueError, match="take no object_store options"):
        BlobLock("memory://m/x", storage_options={"a": "b"})


# What a lock sends to the store for one attempt: the lockfile's read and its writes (a
# batch `post`, as a conditional delete on Azure, is not one of them).
LOCKFILE_REQUESTS = {"create", "update", "read", "overwrite"}


def counting_proxy(url: str):
    from urllib.parse import urlsplit

    from count_proxy import CountProxy

    where = urlsplit(url)
    return CountProxy(where.hostname or "127.0.0.1", where.port or 80)


def fails_once_for_good(proxy, lock: BlobLock, match: str | None = None) -> StoreError:
    """A wait of a minute, which would retry a transient error all along, meets the error
    on the first request and gives up: the error is permanent and sent once, not retried."""
    from count_proxy import breakdown

    mark = proxy.snapshot()
    started = time.monotonic()
    with pytest.raises(StoreError, match=match) as info:
        lock.acquire(timeout=60)
    took = time.monotonic() - started
    assert info.value.transient is False, info.value
    sent = [r for r in proxy.since(mark) if r.kind in LOCKFILE_REQUESTS]
    assert len(sent) == 1, f"sent {breakdown(sent)} ({breakdown(proxy.since(mark))} in all)"
    assert took < 60, f"{took:.1f} s: the error ended the wait only at its timeout"
    return info.value


def test_missing_bucket_fails_at_once(moto_endpoint):
    proxy = counting_proxy(moto_endpoint)
    try:
        opts = {
            "aws_endpoint": proxy.url,
            "aws_allow_http": "true",
            "aws_region": "us-east-1",
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
        }
        lock = BlobLock("s3://no-such-bucket-here/x", storage_options=opts)
        fails_once_for_good(proxy, lock, match="bucket")
    finally:
        proxy.close()


def test_missing_container_fails_at_once(azurite_url, monkeypatch):
    proxy = counting_proxy(azurite_url)
    try:
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", proxy.url)
        lock = BlobLock(
            "az://no-such-container/x", storage_options={"azure_storage_use_emulator": "true"}
        )
        fails_once_for_good(proxy, lock, match="container")
    finally:
        proxy.close()


def test_bad_credentials_fail_at_once_with_the_store_message(azurite_url, monkeypatch):
    from conftest import _az_backend

    backend = _az_backend(azurite_url)
    proxy = counting_proxy(azurite_url)
    try:
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", proxy.url)
        lock = BlobLock(
            backend.uri(),
            storage_options={
                "azure_storage_use_emulator": "true",
                "azure_storage_account_key": "d3Jvbmcga2V5IQ==",
            },
        )
        error = fails_once_for_good(proxy, lock)
    finally:
        proxy.close()
    assert "credentials" in str(error) or "403" in str(error), str(error)


def test_keep_alive_checks_owner_argument(tmp_path):
    with pytest.raises(ValueError, match="owner"):
        keep_alive(str(tmp_path), "")


def test_waiting_releases_the_gil(tmp_path):
    from blob_lock import stats

    def reads() -> int:
        return stats()["requests"]["read"]["ok"]

    uri = str(tmp_path / "lock")
    got: list[bool] = []
    with BlobLock(uri):
        before = reads()
        waiter = threading.Thread(target=lambda: got.append(BlobLock(uri).acquire(timeout=60)))
        waiter.start()
        # Pure-Python work in this thread goes on while the other waits in Rust: it sees the
        # waiter read the lock again and again, and not return. A wait that kept the GIL
        # would keep this thread out until it timed out (and returned False).
        deadline = time.monotonic() + 30
        while reads() < before + 2:  # no sleep: this thread asks for the GIL all the time
            assert time.monotonic() < deadline, "the waiter never read the lock twice"
        assert not got and waiter.is_alive(), f"the wait ended ({got}) while the lock was held"
    waiter.join(60)
    assert got == [True], "the waiter did not take the lock once it was released"


def test_many_held_locks_share_one_runtime():
    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    BlobLock("memory://rt/warm").try_acquire()  # starts the shared runtime
    before = threads()
    locks = [BlobLock(f"memory://rt/{i}", expire=3) for i in range(200)]
    for lock in locks:
        assert lock.try_acquire()
    # At least one heartbeat each: a lockfile's write_count is 1 at the acquisition and
    # grows by one at each renewal.
    pending, deadline = locks, time.monotonic() + 60
    while pending := [lock for lock in pending if (lock.inspect().write_count or 0) < 2]:
        assert time.monotonic() < deadline, f"{len(pending)} of the locks never renewed in 60 s"
        time.sleep(0.05)
    assert all(lock.held and not lock.lost for lock in locks)
    assert threads() - before < 8, "a thread per lock?"
    for lock in locks:
        assert lock.release() == ReleaseStatus.RELEASED


def test_polling_lost_while_losses_are_logged_does_not_deadlock(tmp_path, caplog):
    # Regression: the heartbeat thread logged a loss (logging takes the GIL) while holding
    # the mutex that `lock.lost` takes with the GIL held; a poller could hang for ever.
    import logging

    caplog.set_level(logging.WARNING, logger="blob_lock")  # restored after the test
    locks = [BlobLock(str(tmp_path / f"l{i}"), expire=1.0) for i in range(40)]
    for lock in locks:
        assert lock.try_acquire()
    for i in range(len(locks)):
        path = tmp_path / f"l{i}" / "lock.json"
        body = json.loads(path.read_text())
        body.update(writer_id="thief", token=body["token"] + 1)
        (tmp_path / "tmp.json").write_text(json.dumps(body))
        (tmp_path / "tmp.json").replace(path)  # atomic: no torn read for the heartbeat
    deadline = time.monotonic() + 60
    while not all(lock.lost for lock in locks):  # no sleep: hold the GIL as much as we can
        assert time.monotonic() < deadline, "losses not seen"
    assert all("thief" in lock.lost_reason for lock in locks)


LOGS_EACH_WITH = """
import logging, sys
from blob_lock import BlobLock
logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="%(name)s %(message)s")
logging.getLogger("blob_lock").setLevel(getattr(logging, sys.argv[2]))
for _ in range(3):
    with BlobLock(sys.argv[1], expire=30):
        pass
"""


@pytest.mark.parametrize("level", ["DEBUG", "INFO"])
def test_debug_records_follow_the_level_set_before_the_first_lock(tmp_path, level):
    # The native side remembers which records Python's logging refused (asking costs more
    # than the rest of a log call): each `with` is logged at DEBUG, none at INFO.
    for uri in [str(tmp_path / "lock"), f"memory://logs/{uuid.uuid4().hex}"]:
        done = subprocess.run(
            [sys.executable, "-c", LOGS_EACH_WITH, uri, level],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        steps = re.findall(r"blob_lock\.lifecycle .*owner \w+: (\w+) -> (\w+)", done.stdout)
        expected = [("new", "acquiring"), ("acquiring", "held"), ("held", "releasing"),
                    ("releasing", "released")] * 3  # fmt: skip
        assert steps == (expected if level == "DEBUG" else []), done.stdout


LOSES_ITS_LOCK = """
import json, logging, pathlib, sys, time
logging.basicConfig(level=logging.DEBUG, format="%(name)s %(message)s")
from blob_lock import BlobLock
uri = sys.argv[1]
lock = BlobLock(uri, expire=1.5)
assert lock.acquire(timeout=10)
path = pathlib.Path(uri) / "lock.json"
body = json.loads(path.read_text())
body.update(writer_id="thief", token=body["token"] + 1)
(path.parent / "tmp").write_text(json.dumps(body))
(path.parent / "tmp").replace(path)
while not lock.lost:
    time.sleep(0.05)
print(lock.release())
"""


def test_a_lost_lifecycle_logs_its_way_there(tmp_path):
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", LOSES_ITS_LOCK, str(tmp_path / "lock")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "held_by_other"
    steps = re.findall(r"blob_lock\.lifecycle .*owner \w+: (\w+) -> (\w+)", done.stderr)
    assert steps[:2] == [("new", "acquiring"), ("acquiring", "held")], done.stderr
    assert ("renewing", "lost") in steps, done.stderr
    # The release after the loss. (Not by position: the loss is logged by the runtime's
    # thread and the release by the caller's, and logging keeps no order across threads;
    # the lifecycle's table orders the states themselves.)
    assert ("lost", "releasing") in steps and ("releasing", "lost") in steps, done.stderr
    assert steps.index(("lost", "releasing")) < steps.index(("releasing", "lost"))
    assert ("lost", "held") not in steps and ("lost", "renewing") not in steps


WAITS_LOGGING_DEBUG = """
import logging, sys
from blob_lock import BlobLock
logging.basicConfig(level=logging.DEBUG, format="%(name)s %(message)s")
try:
    BlobLock(sys.argv[1]).acquire()
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_ends_a_wait_that_logs(tmp_path):
    """A wait runs on the calling thread; had its log records run Python's logging there,
    the KeyboardInterrupt raised inside them would be lost and the wait would go on."""
    import signal
    import subprocess

    uri = str(tmp_path / "lock")
    with BlobLock(uri) as held:
        proc = subprocess.Popen(
            [sys.executable, "-c", WAITS_LOGGING_DEBUG, uri],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for line in proc.stderr:
            if "waiting" in line:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert out.strip() == "interrupted", err
        assert proc.returncode == 0
        assert held.held and not held.lost


TAKES_AND_EXITS = """
import atexit, os, sys
# Runs after blob_lock's own exit handler (they run last registered first), then ends the
# process at once: no interpreter teardown in which the sweeper's thread could catch up.
atexit.register(os._exit, 0)
from blob_lock import BlobLock
lock = BlobLock(sys.argv[1])
for _ in range(50):
    lock.acquire()
    lock.release()
held = BlobLock(sys.argv[1] + "-held")
held.acquire()  # released at exit
"""


def test_a_process_leaves_no_replaced_lockfiles_behind(tmp_path):
    """Replaced lockfiles are removed off the caller's path, a batch every few
    milliseconds; the last batch, the exit's own releases among it, goes at exit."""
    import subprocess

    uri = str(tmp_path / "lock")
    done = subprocess.run(
        [sys.executable, "-c", TAKES_AND_EXITS, uri],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    for name in ("lock", "lock-held"):
        assert sorted(os.listdir(tmp_path / name)) == [".lock.json.guard", "lock.json"]
    assert inspect(uri + "-held").state == "released"


def test_a_file_update_gives_up_when_the_guard_stays_locked(tmp_path):
    # A process frozen in the middle of an update holds the guard beside the lockfile; the
    # others must fail (transiently) after a bounded wait, not wait for ever.
    import fcntl

    uri = str(tmp_path / "lock")
    first = BlobLock(uri, expire=3)
    assert first.try_acquire()
    token = first.token
    assert first.release() == ReleaseStatus.RELEASED  # a takeover now needs an update
    with open(tmp_path / "lock" / ".lock.json.guard", "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # the frozen process
        with pytest.raises(StoreError, match="stayed locked") as info:
            BlobLock(uri, expire=3).try_acquire()
        assert info.value.transient is True
    second = BlobLock(uri, expire=3)
    assert second.try_acquire() and second.token > token  # thawed: updates go on
    second.release()


def test_s3_configured_from_the_environment_alone(moto_endpoint, monkeypatch):
    """AWS_* variables configure the store, AWS_ALLOW_HTTP included: an earlier version
    replaced the client options read from the environment with its own timeouts."""
    from conftest import _s3_backend

    backend = _s3_backend(moto_endpoint)
    for key, value in backend.storage_options.items():
        monkeypatch.setenv(key.upper(), value)
    with BlobLock(backend.uri(), timeout=30) as held:
        assert held.held


def test_an_http_endpoint_is_allowed_unless_plain_http_is_refused(moto_endpoint):
    from conftest import _s3_backend

    backend = _s3_backend(moto_endpoint)
    opts = {k: v for k, v in backend.storage_options.items() if k != "aws_allow_http"}
    with BlobLock(backend.uri(), storage_options=opts) as held:  # http:// is the choice
        assert held.held
    # Refused explicitly: an error before any request, not a store that "never answered".
    # No timeout: a retry storm would hang here (pytest-timeout fails it).
    with pytest.raises(ValueError) as e:
        BlobLock(backend.uri(), storage_options={**opts, "aws_allow_http": "false"}).acquire()
    assert "aws_allow_http" in str(e.value) and "plain HTTP" in str(e.value)


def test_lost_and_its_reason_outlive_the_block(backend):
    uri = backend.uri()
    with backend.lock(uri, expire=1.5, raise_on_lost=False) as held:
        steal(backend, uri)
        wait_lost(held)
    # After the block: what happened to it, until the next acquisition.
    assert held.lost and "thief" in (held.lost_reason or "")
    assert not held.held and held.token is None
    # The same object's next acquisition (once the thief's lease ran out) starts clean.
    assert held.acquire(timeout=60)
    assert held.held and not held.lost and held.lost_reason is None
    held.release()
    assert not held.lost and held.lost_reason is None
    # A loss found only at release is kept too.
    uri = backend.uri()
    with backend.lock(uri, expire=30, raise_on_lost=False) as held:
        steal(backend, uri)
    assert held.lost and "at release it was held by owner thief" in (held.lost_reason or "")
    # The next acquisition starts clean.
    fresh = backend.uri()
    other = backend.lock(fresh)
    with other:
        pass
    assert not other.lost and other.lost_reason is None


def test_a_release_that_finds_a_later_acquisition_released_says_the_lock_was_taken(backend):
    if backend.raw_put is None:
        pytest.skip("no way to write memory:// from outside; cargo test covers this")
    uri = backend.uri()
    lock = backend.lock(uri, expire=30, raise_on_lost=False)
    assert lock.acquire(timeout=10)
    # Taken over and released by another owner (after our lease ran out, say): the lock
    # was taken from us, as docs/guarantees.md says, not "released by someone else".
    theirs = json.loads(backend.raw_get(uri))
    theirs.update(writer_id="next", token=theirs["token"] + 1, written_at="")
    theirs["released_at"] = "2026-01-01T00:00:00+00:00"
    backend.raw_put(uri, json.dumps(theirs).encode())
    assert lock.release() == ReleaseStatus.HELD_BY_OTHER
    assert lock.lost and "held by owner next" in lock.lost_reason, lock.lost_reason
    assert "released since" in lock.lost_reason, lock.lost_reason


def test_a_release_that_finds_its_own_acquisition_broken_says_already_released(backend):
    if backend.raw_put is None:
        pytest.skip("no way to write memory:// from outside; cargo test covers this")
    uri = backend.uri()
    lock = backend.lock(uri, expire=30, raise_on_lost=False)
    assert lock.acquire(timeout=10)
    ours = json.loads(backend.raw_get(uri))  # broken by a person: released, token kept
    ours.update(released_at="2026-01-01T00:00:00+00:00", broken_by="someone@elsewhere")
    backend.raw_put(uri, json.dumps(ours).encode())
    assert lock.release() == ReleaseStatus.ALREADY_RELEASED
    assert lock.lost and "already released by someone else" in lock.lost_reason


def test_keys_with_spaces_and_non_ascii_name_the_object_other_tools_name(shared_backend):
    # The key is the URI's text after the bucket, as boto3, the Azure SDK, mops and the
    # file system take it (raw_get reads the literal key with them).
    uri = f"{shared_backend.root}/with space/ünïcode-{uuid.uuid4().hex[:8]}"
    with shared_backend.lock(uri) as held:
        body = shared_backend.raw_get(uri)
        assert body is not None, "the lockfile is under the literal key"
        assert json.loads(body)["writer_id"] == held.owner
