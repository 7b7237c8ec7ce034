"""The Python surface beyond with-blocks: asyncio, inspection, the decorator, locked(),
repr and the lifecycle's state, as users meet them."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
from blob_lock import (
    BlobLock,
    BreakOutcome,
    LockState,
    LockTimeout,
    ReleaseStatus,
    _blob_lock,
    break_lock,
    inspect,
    inspect_async,
    keep_alive_async,
    locked,
    stats,
    wait_free,
    wait_free_async,
)
from conftest import assert_first_token, micros_now


def foreign_lockfile(owner: str, written_ago: float, expire: float = 30.0) -> bytes:
    """A lockfile as another machine (or mops) writes it."""
    written = (datetime.now(timezone.utc) - timedelta(seconds=written_ago)).isoformat()
    return json.dumps(
        {
            "writer_id": owner,
            "written_at": written,
            "expire_s": expire,
            "released_at": "",
            "first_written_at": written,
            "first_acquired_at": written,
            "hostname": "elsewhere",
            "pid": "4242",
            "tid": 1,
            "write_count": 1,
        }
    ).encode()


# -- asyncio ---------------------------------------------------------------------------


def test_async_with_holds_and_releases_on_every_store(backend):
    uri = backend.uri()

    async def main() -> None:
        lock = backend.lock(uri, expire=5)
        since = micros_now()
        async with lock as held:
            assert held.held
            assert_first_token(held.token, since)
            seen = await inspect_async(uri, storage_options=backend.storage_options or None)
            assert seen.state is LockState.OURS and seen.owner == held.owner
            async with await keep_alive_async(
                uri, held.owner, storage_options=backend.storage_options or None
            ) as remote:
                assert not remote.lost and remote.token == held.token
        assert not lock.held
        assert lock.inspect().state is LockState.RELEASED

    asyncio.run(main())


def test_waiting_in_asyncio_never_blocks_the_event_loop(tmp_path):
    uri = str(tmp_path / "lock")
    holder = BlobLock(uri, expire=5)
    holder.acquire()
    ticks = 0

    async def ticker() -> None:
        # Runs only while the acquisition waits (the lock is held until its 20th tick).
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1
            if ticks == 20:
                holder.release()

    async def main() -> bool:
        tick = asyncio.ensure_future(ticker())
        got = await BlobLock(uri).acquire_async(timeout=60)
        tick.cancel()
        return got

    # A wait that blocked the loop would starve the ticker, which alone releases the lock:
    # it would time out and return False, however fast or slow the machine.
    assert asyncio.run(main()), f"the event loop ran only {ticks} ticks while waiting"
    assert ticks >= 20


def test_async_timeouts_and_cancellation_leave_nothing_behind(tmp_path):
    uri = str(tmp_path / "lock")
    holder = BlobLock(uri, expire=5)
    holder.acquire()
    first = holder.token

    async def main() -> None:
        waiter = BlobLock(uri)
        assert await waiter.acquire_async(timeout=0.3) is False
        with pytest.raises(LockTimeout):
            async with BlobLock(uri, timeout=0.3):
                pass
        assert await waiter.try_acquire_async() is False
        # Cancelled while waiting (asyncio's own timeout): the waiter holds nothing after.
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(waiter.acquire_async(), 0.3)
        assert not waiter.held
        assert await holder.release_async() is ReleaseStatus.RELEASED
        # The cancelled waiter did not keep it in the background either. (Its future hears
        # of the cancellation a moment after Python does: on a busy machine it may take the
        # lock freed just now, which its cleanup then releases, before the next one.)
        await asyncio.to_thread(_blob_lock.drain, 60)
        assert inspect(uri).state is LockState.RELEASED
        assert await waiter.acquire_async(timeout=10)
        assert waiter.token is not None and first is not None and waiter.token > first
        assert await waiter.release_async() is ReleaseStatus.RELEASED

    asyncio.run(main())


def test_an_acquisition_cancelled_at_the_finish_is_released(tmp_path):
    """Cancel acquisitions of a free lock at once: whether each was dropped before or after
    it wrote, none may leave the lock held behind the caller's back."""
    uri = str(tmp_path / "lock")

    async def main() -> None:
        for _ in range(20):
            task = asyncio.ensure_future(BlobLock(uri).acquire_async())
            await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        await asyncio.to_thread(_blob_lock.drain, 60)  # the background releases have run

    asyncio.run(main())
    assert inspect(uri).state in (LockState.RELEASED, LockState.UNLOCKED)
    assert BlobLock(uri).try_acquire()


def test_a_cancelled_task_never_releases_what_the_next_task_on_the_object_took(tmp_path):
    """Two tasks share one BlobLock (one owner id). The first is cancelled while it waits;
    the cleanup of what it may have written must not release the second's acquisition,
    which the same owner id would match."""
    uri = str(tmp_path / "lock")
    holder = BlobLock(uri, expire=5)
    holder.acquire()

    async def main() -> None:
        shared = BlobLock(uri, expire=5)
        reads = stats()["requests"].get("read", {}).get("ok", 0)
        first = asyncio.ensure_future(shared.acquire_async())
        deadline = time.monotonic() + 60
        while stats()["requests"].get("read", {}).get("ok", 0) == reads:  # it saw the holder
            assert time.monotonic() < deadline, "the first acquisition never read the lock"
            await asyncio.sleep(0.01)
        assert not first.done()
        second = asyncio.ensure_future(shared.acquire_async(timeout=60))
        await asyncio.sleep(0)  # its first step: it waits for its turn on the object
        assert not second.done()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        assert await holder.release_async() is ReleaseStatus.RELEASED
        assert await second
        await asyncio.to_thread(_blob_lock.drain, 60)  # any release of the first has run
        assert shared.held and not shared.lost
        assert inspect(uri, owner=shared.owner).state is LockState.OURS
        assert await shared.release_async() is ReleaseStatus.RELEASED

    asyncio.run(main())


def test_an_acquisition_right_after_a_cancelled_one_on_the_same_object_keeps_the_lock(
    tmp_path,
):
    """Cancel an acquisition of a free lock at once, then acquire through the same object
    (the same owner id) straight away: whenever the cancellation struck, its cleanup runs
    before the new acquisition and never releases it."""
    uri = str(tmp_path / "lock")

    async def main() -> None:
        shared = BlobLock(uri, expire=5)
        for round in range(20):
            task = asyncio.ensure_future(shared.acquire_async())
            for _ in range(round % 4):  # cancelled at different points
                await asyncio.sleep(0)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            if task.cancelled() or not shared.held:
                assert await shared.acquire_async(timeout=30)
            # Every cleanup has run (drain waits for them): one that released the new
            # acquisition would show in the lockfile now, however slow the machine.
            await asyncio.to_thread(_blob_lock.drain, 60)
            assert shared.held and not shared.lost
            assert inspect(uri, owner=shared.owner).state is LockState.OURS
            assert await shared.release_async() is ReleaseStatus.RELEASED

    asyncio.run(main())


def test_a_forked_child_tries_the_lock_as_an_owner_of_its_own(tmp_path):
    import os
    import warnings

    uri = str(tmp_path / "lock")
    held = BlobLock(uri, expire=30)
    assert held.acquire()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads running
        pid = os.fork()
    if pid == 0:
        code = 3
        try:
            mine = held.try_acquire()  # the parent holds it: not ours to take
            # A fresh lock like the parent's (made in the child, not from the parent's).
            fresh = BlobLock(uri, expire=30)
            theirs = fresh.try_acquire() is False and fresh.owner != held.owner
            other = BlobLock(str(tmp_path / "other"))
            freed = other.try_acquire() and other.release() is ReleaseStatus.RELEASED
            code = 0 if mine is False and theirs and freed else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert held.held and inspect(uri, owner=held.owner).state is LockState.OURS
    assert held.release() is ReleaseStatus.RELEASED


# -- inspect ---------------------------------------------------------------------------


def test_inspect_tells_held_expired_ours_and_never_writes(shared_backend):
    uri = shared_backend.uri()
    opts = shared_backend.storage_options or None
    assert inspect(uri, storage_options=opts).state is LockState.UNLOCKED
    shared_backend.raw_put(uri, foreign_lockfile("someone-else", written_ago=5))
    before = shared_backend.raw_get(uri)
    seen = inspect(uri, storage_options=opts)
    assert seen.state is LockState.HELD and not seen.free
    assert (seen.owner, seen.hostname, seen.pid) == ("someone-else", "elsewhere", "4242")
    assert seen.expire_s == 30.0 and 20 < seen.expires_in < 26
    assert isinstance(seen.written_at, datetime) and seen.written_at.tzinfo is not None
    assert 4 < seen.held_for() < 60
    assert inspect(uri, owner="someone-else", storage_options=opts).state is LockState.OURS
    assert shared_backend.raw_get(uri) == before, "inspect wrote to the lockfile"
    shared_backend.raw_put(uri, foreign_lockfile("someone-else", written_ago=40))
    seen = inspect(uri, storage_options=opts)
    assert seen.state is LockState.EXPIRED and seen.free and seen.expires_in < -9
    assert "expired" in seen.describe()


def _attributes(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_the_native_results_and_the_public_ones_have_the_same_fields():
    """What the native layer returns and what users get are one list of fields: a field
    added or renamed on one side only fails here (and the type check, as each public object
    is built field by field)."""
    from dataclasses import fields

    from blob_lock import DoctorReport, Inspection, Probe, RaceReport

    def names(cls: type) -> set[str]:
        return {f.name for f in fields(cls)}  # type: ignore[arg-type]

    native = _attributes(_blob_lock.NativeInspection) - {"lockfile"}
    native |= _attributes(_blob_lock.NativeLockfileFacts)
    assert native == names(Inspection) - {"uri", "problem"}
    assert _attributes(_blob_lock.NativeProbe) == names(Probe)
    assert _attributes(_blob_lock.NativeRaceReport) == names(RaceReport)
    assert _attributes(_blob_lock.NativeDoctorReport) == names(DoctorReport) - {"credentials"}
    assert _attributes(_blob_lock.NativeEntry) == {
        "uri", "inspection", "problem", "prune", "prune_detail"
    }  # fmt: skip


def test_every_field_the_native_layer_reads_reaches_the_inspection(tmp_path):
    """Each value of a held lock's native inspection arrives in the Inspection."""
    uri = str(tmp_path / "lock")
    with BlobLock(uri, labels={"run": "r1"}) as held:
        held.hand_off(grace=600)
        native = held._native.inspect()
        seen = held.inspect()
    assert native.lockfile is not None
    given = [
        name
        for source in (native, native.lockfile)
        for name in _attributes(type(source)) - {"state", "lockfile"}
        if getattr(source, name) is not None
    ]
    assert len(given) >= 14, given
    for name in given:
        assert getattr(seen, name) is not None, f"{name} did not reach the Inspection"
    assert seen.labels == {"run": "r1"} and seen.state is LockState.OURS
    assert seen.grace_until is not None and seen.grace_until.tzinfo is not None
    assert (seen.token, seen.owner) == (native.lockfile.token, native.lockfile.owner)


def test_inspect_reports_a_corrupt_lockfile(tmp_path):
    from blob_lock import InvalidLockFile

    (tmp_path / "lock").mkdir()
    (tmp_path / "lock" / "lock.json").write_text("{not json")
    with pytest.raises(InvalidLockFile):
        inspect(str(tmp_path / "lock"))


def test_wait_free_waits_for_a_release_takes_nothing_and_times_out_naming_the_holder(tmp_path):
    uri = str(tmp_path / "lock")
    assert wait_free(uri).state is LockState.UNLOCKED
    holder = BlobLock(uri, expire=30)
    holder.acquire()
    with pytest.raises(LockTimeout, match=holder.owner):
        wait_free(uri, timeout=timedelta(seconds=0.3))
    threading.Timer(0.3, holder.release).start()
    seen = wait_free(uri, timeout=30)
    assert seen.state is LockState.RELEASED and seen.owner == holder.owner
    assert inspect(uri).state is LockState.RELEASED, "wait_free took the lock"
    with BlobLock(uri) as again:
        with pytest.raises(LockTimeout):
            asyncio.run(wait_free_async(uri, timeout=0.2))
    assert asyncio.run(wait_free_async(uri, timeout=5)).owner == again.owner


def test_wait_free_sees_an_unrenewed_lock_expire(tmp_path):
    uri = str(tmp_path / "lock")
    (tmp_path / "lock").mkdir()
    (tmp_path / "lock" / "lock.json").write_bytes(foreign_lockfile("gone", 0, expire=0.5))
    assert wait_free(uri, timeout=30).owner == "gone"
    assert inspect(uri).state is LockState.EXPIRED


def test_break_lock_breaks_the_named_acquisition_only_and_its_holder_learns(tmp_path):
    uri = str(tmp_path / "lock")
    assert break_lock(uri).outcome is BreakOutcome.NO_LOCKFILE
    holder = BlobLock(uri, expire=3, heartbeat=0.2, raise_on_lost=False)
    holder.acquire()
    token = holder.token
    # A stale view of the lock (another token) breaks nothing.
    stale = break_lock(uri, owner=holder.owner, token=holder.token + 1)
    assert stale.outcome is BreakOutcome.CHANGED and stale.found.owner == holder.owner
    assert holder.held
    broken = break_lock(uri, owner=holder.owner, token=holder.token)
    assert broken.outcome == "broken" and broken.found.token == holder.token
    # As found: held, by this process.
    assert broken.found.state is LockState.OURS and stale.found.state is LockState.OURS
    seen = inspect(uri)
    assert seen.state is LockState.RELEASED and seen.broken_by is not None
    assert seen.token == token, "a break keeps the fencing token"
    deadline = time.monotonic() + 30
    while not holder.lost and time.monotonic() < deadline:
        time.sleep(0.05)
    assert holder.lost, "the holder never learnt its lock was broken"
    holder.release()
    assert break_lock(uri).outcome is BreakOutcome.ALREADY_RELEASED
    with BlobLock(uri) as next_holder:
        assert next_holder.token > token, "and the next holder's is larger"


def test_break_lock_refuses_an_owner_without_its_token(tmp_path):
    uri = str(tmp_path / "lock")
    with BlobLock(uri) as held:
        with pytest.raises(ValueError, match="both owner and token"):
            break_lock(uri, owner=held.owner)
        with pytest.raises(TypeError, match="token must be an int"):
            break_lock(uri, owner=held.owner, token="1")  # type: ignore[arg-type]
        assert held.held and not held.lost


# -- conveniences ----------------------------------------------------------------------


def test_a_lock_decorates_sync_and_async_functions(tmp_path):
    uri = str(tmp_path / "lock")
    guard = BlobLock(uri, expire=5, timeout=60)
    inside = 0
    overlaps = 0

    @guard
    def work(n: int) -> int:
        """Doubles n."""
        nonlocal inside, overlaps
        inside += 1
        overlaps += inside > 1
        assert inspect(uri).state is LockState.OURS
        time.sleep(0.05)
        inside -= 1
        return 2 * n

    assert work.__name__ == "work" and work.__doc__ == "Doubles n."
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert overlaps == 0
    assert work(21) == 42
    assert inspect(uri).state is LockState.RELEASED

    @guard
    async def work_async(n: int) -> int:
        assert inspect(uri).state is LockState.OURS
        await asyncio.sleep(0.01)
        return n + 1

    async def main() -> list[int]:
        return list(await asyncio.gather(*(work_async(i) for i in range(3))))

    assert asyncio.run(main()) == [1, 2, 3]


def test_locked_is_a_one_line_context_manager(tmp_path):
    uri = str(tmp_path / "lock")
    with locked(uri, expire=timedelta(seconds=6), timeout=timedelta(seconds=5)) as held:
        assert held.held and held.expire == 6.0
        assert inspect(uri).state is LockState.OURS
    assert inspect(uri).state is LockState.RELEASED


def test_repr_and_state_say_what_a_lock_is(tmp_path):
    uri = str(tmp_path / "lock")
    lock = BlobLock(uri, expire=9)
    assert lock.state == "unheld"
    text = repr(lock)
    assert uri in text and "not held" in text and lock.owner in text and "expire=9s" in text
    with lock:
        assert lock.state == "held"
        text = repr(lock)
        assert "held" in text and "not held" not in text
        # The acquisition's own token (its writer's wall clock in microseconds, or more).
        assert lock.token == inspect(uri).token and f" token={lock.token} " in text
    assert lock.state == "unheld"
    assert "not held" in repr(lock)


def test_every_public_name_has_a_docstring():
    import inspect as pyinspect

    import blob_lock

    missing = []
    for name in blob_lock.__all__:
        obj = getattr(blob_lock, name)
        if isinstance(obj, str):
            continue  # __version__
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if pyinspect.isclass(obj) and not issubclass(obj, BaseException):
            for member, value in vars(obj).items():
                if member.startswith("_") or member in getattr(obj, "__dataclass_fields__", {}):
                    continue
                if isinstance(value, (str, int, float)) or pyinspect.isclass(value):
                    continue
                if not (getattr(value, "__doc__", None) or "").strip():
                    missing.append(f"{name}.{member}")
    assert not missing, f"public names without a docstring: {missing}"


def test_async_with_raises_lock_lost_when_taken_over_meanwhile(tmp_path):
    from blob_lock import LockLost

    uri = str(tmp_path / "lock")

    async def main() -> None:
        async with BlobLock(uri, expire=30):
            # Someone overwrites the lockfile behind the holder's back, between heartbeats.
            (tmp_path / "lock" / "lock.json").write_bytes(foreign_lockfile("thief", 0))

    with pytest.raises(LockLost, match="at release it was held by owner thief"):
        asyncio.run(main())


def test_store_kind_reads_every_scheme_as_the_lock_does(tmp_path, monkeypatch):
    """One table of schemes (src/store/config/schemes.rs): what ``store_kind`` says is what the lock
    and the credential chains act on, aliases and any case included."""
    from blob_lock import StoreKind, credential_source, store_kind

    monkeypatch.setenv("AWS_METADATA_ENDPOINT", "http://127.0.0.1:9")
    kinds = {
        "s3://bucket/k": StoreKind.S3,
        "S3A://bucket/k": StoreKind.S3,
        "az://container/k": StoreKind.AZURE,
        "ABFSS://container@account.dfs.core.windows.net/k": StoreKind.AZURE,
        "adl://container/k": StoreKind.AZURE,
        "gs://bucket/k": StoreKind.GCS,
        "memory://m/k": StoreKind.MEMORY,
        f"file://{tmp_path}/k": StoreKind.FILE,
        str(tmp_path / "k"): StoreKind.FILE,
        "relative/k": StoreKind.FILE,
        "ftp://host/k": None,
    }
    assert {uri: store_kind(uri) for uri in kinds} == kinds
    assert store_kind(tmp_path) is StoreKind.FILE and store_kind("gs://b") == "gcs"
    # A cloud alias in capitals still goes through its cloud's credentials.
    keys = {"aws_access_key_id": "AKIAEXAMPLE", "aws_secret_access_key": "not-a-secret"}
    assert credential_source("S3A://bucket/k", keys) == "AWS keys from the storage options"
    assert credential_source("memory://m/k") == "none needed"
    with pytest.raises(TypeError, match="credential_provider for Azure must be a callable"):
        BlobLock("ABFS://container/k", credential_provider=42)
    # Locks on local stores are made from a template (one URI, one engine), but not on a
    # relative path: it names another folder once the working folder changes; nor on `~`,
    # once HOME does.
    for where in ("a", "b"):
        (tmp_path / where).mkdir()
        monkeypatch.chdir(tmp_path / where)
        monkeypatch.setenv("HOME", str(tmp_path / where))
        for uri in ("rel/k", "file://~/home/k"):
            since = micros_now()
            with BlobLock(uri) as held:  # a lockfile of its own: a fresh lockfile's token
                assert_first_token(held.token, since)
        assert (tmp_path / where / "rel" / "k" / "lock.json").exists()
        assert (tmp_path / where / "home" / "k" / "lock.json").exists()
