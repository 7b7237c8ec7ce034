"""claim_memo: launch a memoized invocation once and pick up its result (issue 15), on
every store, with threads, tasks and real processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from blob_lock import (
    BlobLock,
    BlobSemaphore,
    LockLost,
    LockState,
    LockTimeout,
    MemoClaim,
    claim_memo,
    claim_memo_async,
    inspect,
    keep_alive,
    keep_alive_async,
    write_once,
)
from conftest import Backend


def opts(backend: Backend) -> dict | None:
    return backend.storage_options or None


def test_a_memo_whose_result_exists_is_not_launched_and_nothing_is_written(backend):
    memo = backend.uri()
    with claim_memo(memo, done=lambda: True, storage_options=opts(backend)) as claim:
        assert isinstance(claim, MemoClaim)
        assert claim.launch is False and claim.owner is None and claim.token is None
    assert inspect(f"{memo}/lock", storage_options=opts(backend)).state is LockState.UNLOCKED


def test_a_free_memo_is_claimed_held_while_the_block_runs_and_released_after(backend):
    memo = backend.uri()
    with claim_memo(memo, done=lambda: False, storage_options=opts(backend)) as claim:
        assert claim.launch is True and claim.lock_uri == f"{memo}/lock"
        seen = inspect(claim.lock_uri, storage_options=opts(backend))
        assert seen.state is LockState.OURS and seen.owner == claim.owner
        assert claim.token == seen.token and not claim.lost
    assert inspect(f"{memo}/lock", storage_options=opts(backend)).state is LockState.RELEASED


def test_racing_orchestrators_launch_once_and_all_see_the_result(backend):
    memo, published, launches = backend.uri(), threading.Event(), []
    results = []

    def orchestrate() -> None:
        with claim_memo(
            memo, done=published.is_set, poll=0.05, storage_options=opts(backend)
        ) as claim:
            if claim.launch:
                launches.append(claim.owner)
                # The "remote" finishes a moment later; the claim waits for it, renewed.
                threading.Timer(0.3, published.set).start()
                assert claim.wait_done(timeout=30)
        results.append(published.is_set())

    threads = [threading.Thread(target=orchestrate) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(launches) == 1, launches
    assert results == [True, True, True]


RACER = """
import os, sys, time
from blob_lock import claim_memo, write_once
memo, result = sys.argv[1], sys.argv[2]
with claim_memo(memo, done=lambda: os.path.exists(result), poll=0.05) as claim:
    if claim.launch:
        time.sleep(0.5)                            # the remote runs
        assert write_once(result, str(os.getpid()).encode())
print("launched" if claim.launch else "waited", flush=True)
"""


def test_racing_orchestrator_processes_launch_once(tmp_path):
    memo, result = str(tmp_path / "memo"), str(tmp_path / "memo" / "result")
    cmd = [sys.executable, "-c", RACER, memo, result]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    said = sorted(p.communicate(timeout=120)[0].strip() for p in procs)
    assert said == ["launched", "waited", "waited"], said
    assert Path(result).read_text().isdigit()


def test_a_waiting_claim_sees_the_result_appear_and_never_launches(tmp_path):
    memo = str(tmp_path / "memo")
    holder = BlobLock(f"{memo}/lock", expire=30)  # an orchestrator (or its remote) at work
    holder.acquire()
    published = threading.Event()
    threading.Timer(0.5, published.set).start()
    began = time.monotonic()
    with claim_memo(memo, done=published.is_set, poll=0.05) as claim:
        assert claim.launch is False
    assert time.monotonic() - began < 20
    assert holder.held, "the waiting claim took nothing"
    holder.release()


def test_a_lock_nobody_renews_is_taken_over_after_expire(tmp_path, workers):
    memo = str(tmp_path / "memo")
    orchestrator = workers("hold", f"{memo}/lock", "null", "1.5")
    held = orchestrator.line()
    orchestrator.kill()  # SIGKILL: no release, no more renewals
    began = time.monotonic()
    with claim_memo(memo, done=lambda: False, expire=1.5, poll=0.2) as claim:
        assert claim.launch is True
        assert claim.token > held["token"]
    waited = time.monotonic() - began
    # After the 1.5 s expiry, though the wait was cut into 0.2 s slices (and well before
    # the 61.5 s a single attempt would need by the wall clock).
    assert 1.0 <= waited < 30, waited


def test_a_timeout_names_the_holder(tmp_path):
    memo = str(tmp_path / "memo")
    with BlobLock(f"{memo}/lock") as holder:
        with pytest.raises(LockTimeout, match=holder.owner):
            with claim_memo(memo, done=lambda: False, timeout=0.5, poll=0.1):
                pass


def test_wait_done_keeps_the_lock_renewed_and_reports_a_loss(tmp_path):
    memo = str(tmp_path / "memo")
    published = threading.Event()
    with claim_memo(memo, done=published.is_set, expire=1.0) as claim:
        threading.Timer(2.5, published.set).start()  # longer than the expiry
        assert claim.wait_done(poll=0.05, timeout=30) is True
        assert not claim.lost, "renewed in the background while waiting"
    assert claim.wait_done(timeout=0) is True
    with pytest.raises(LockLost, match="lost while waiting for the result"):
        with claim_memo(memo, done=lambda: False, expire=1.0, raise_on_lost=False) as claim:
            lockfile = Path(claim.lock_uri) / "lock.json"
            stolen = lockfile.with_name("stolen.json")
            stolen.write_text(lockfile.read_text().replace(claim.owner, "thief"))
            stolen.replace(lockfile)  # atomic: the heartbeat never reads half a file
            claim.wait_done(poll=0.05, timeout=30)


def test_claim_memo_async_with_an_async_done(tmp_path):
    memo = str(tmp_path / "memo")

    async def main() -> tuple[bool, bool]:
        done = asyncio.Event()

        async def exists() -> bool:
            return done.is_set()

        async with claim_memo_async(memo, done=exists, poll=0.05) as first:
            asyncio.get_running_loop().call_later(0.2, done.set)
            assert await first.wait_done_async(timeout=30)
        async with claim_memo_async(memo, done=exists) as second:
            pass
        return first.launch, second.launch

    assert asyncio.run(main()) == (True, False)
    assert inspect(f"{memo}/lock").state is LockState.RELEASED


def test_a_result_published_with_write_once_ends_the_claims(tmp_path):
    memo = str(tmp_path / "memo")
    result = f"{memo}/result"
    with claim_memo(memo, done=lambda: Path(result).exists()) as claim:
        assert claim.launch
        assert write_once(result, b"r")
    with claim_memo(memo, done=lambda: Path(result).exists()) as again:
        assert not again.launch


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"done": True}, TypeError, "done must be a callable"),
        ({"done": lambda: False, "poll": 0}, ValueError, "poll must be positive"),
        ({"done": lambda: False, "poll": "1"}, TypeError, "poll must be seconds"),
        ({"done": lambda: False, "expire": -1}, ValueError, "expire"),
        ({"done": lambda: False, "protocol": "fast"}, ValueError, "protocol"),
        ({"done": lambda: False, "colour": "red"}, TypeError, "colour"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(tmp_path, kwargs, error, match):
    memo = tmp_path / "memo"
    with pytest.raises(error, match=match):
        with claim_memo(str(memo), **kwargs):
            pass
    assert not memo.exists()


def test_an_async_done_in_a_sync_claim_is_refused(tmp_path):
    async def exists() -> bool:
        return False

    with pytest.raises(TypeError, match="claim_memo_async"):
        with claim_memo(str(tmp_path / "memo"), done=exists):  # type: ignore[arg-type]
            pass


def test_a_result_check_that_fails_after_acquiring_leaves_the_lock_released(tmp_path):
    memo = str(tmp_path / "memo")
    calls = []

    def flaky() -> bool:  # false at first; the check after acquiring fails
        calls.append(1)
        if len(calls) > 1:
            raise OSError("the result store is away")
        return False

    with pytest.raises(OSError, match="away"):
        with claim_memo(memo, done=flaky):
            pass
    assert inspect(f"{memo}/lock").state is LockState.RELEASED

    async def main() -> None:
        calls.clear()

        async def flaky_async() -> bool:
            return flaky()

        with pytest.raises(OSError, match="away"):
            async with claim_memo_async(memo, done=flaky_async):
                pass

    asyncio.run(main())
    deadline = time.monotonic() + 30  # released in the background, on blob-lock's runtime
    while inspect(f"{memo}/lock").state is not LockState.RELEASED:
        assert time.monotonic() < deadline, "the lock was left held"
        time.sleep(0.05)


# A quota: claims that also take a slot of a BlobSemaphore, released together.


def test_a_claim_with_a_quota_holds_a_slot_under_its_owner_and_releases_both(tmp_path):
    quota = BlobSemaphore(str(tmp_path / "quota"), 1)
    memo = str(tmp_path / "memo-a")
    with claim_memo(memo, done=lambda: False, quota=quota) as claim:
        assert claim.launch and claim.slot is not None
        assert claim.slot.owner == claim.owner and claim.slot.uri.endswith("quota/slot-0")
        assert quota.try_acquire() is None, "the claim's slot is the only one"
        # The remote keeps both alive with the one owner id it is handed.
        with keep_alive(claim.lock_uri, claim.owner), keep_alive(claim.slot.uri, claim.owner):
            pass
    assert inspect(f"{memo}/lock").state is LockState.RELEASED
    assert inspect(claim.slot.uri).state is LockState.RELEASED
    quota.acquire(timeout=5).release()


def test_a_claim_waits_for_the_quota_then_gives_up_naming_it_and_lets_the_memo_go(tmp_path):
    quota = BlobSemaphore(str(tmp_path / "quota"), 1)
    taken = quota.acquire()
    memo = str(tmp_path / "memo-b")
    began = time.monotonic()
    with pytest.raises(LockTimeout, match=r"every slot of the quota .*quota stayed held"):
        with claim_memo(memo, done=lambda: False, quota=quota, timeout=1, poll=0.2):
            pytest.fail("launched without a slot")
    assert time.monotonic() - began < 60
    assert inspect(f"{memo}/lock").state is LockState.RELEASED, "the memo's lock was released"
    taken.release()


def test_a_result_that_appears_while_waiting_for_the_quota_ends_the_claim(tmp_path):
    quota = BlobSemaphore(str(tmp_path / "quota"), 1)
    taken = quota.acquire()
    memo, published = str(tmp_path / "memo-c"), threading.Event()
    threading.Timer(1.0, published.set).start()
    with claim_memo(memo, done=published.is_set, quota=quota, timeout=60, poll=0.2) as claim:
        assert claim.launch is False and claim.slot is None
    assert inspect(f"{memo}/lock").state is LockState.RELEASED
    taken.release()


def test_claim_memo_async_takes_a_quota_slot_and_releases_both(tmp_path):
    quota = BlobSemaphore(str(tmp_path / "quota"), 2)

    async def main():
        async with claim_memo_async(str(tmp_path / "memo-d"), done=lambda: False, quota=quota) as c:
            assert c.launch and c.slot is not None and c.slot.owner == c.owner
            return c.slot.uri

    uri = asyncio.run(main())
    assert inspect(uri).state is LockState.RELEASED


def test_a_quota_that_is_no_semaphore_is_refused(tmp_path):
    with pytest.raises(TypeError, match="quota must be a BlobSemaphore"):
        claim_memo(str(tmp_path / "memo"), done=lambda: False, quota=3)


# The hand-over: one string that the orchestrator launches its remote with, and that the
# remote's keep_alive takes whole, keeping every lock the claim holds (issue 58).

# An orchestrator that claims a memo under a quota, prints the claim's hand-over and waits to
# be killed: then only the remote renews the memo's lock and the slot.
ORCHESTRATOR = """
import sys, time
from blob_lock import BlobSemaphore, claim_memo
memo, prefix = sys.argv[1], sys.argv[2]
quota = BlobSemaphore(prefix, 1, expire=1.5)
with claim_memo(memo, done=lambda: False, quota=quota, expire=1.5) as claim:
    print(claim.handover, flush=True)
    time.sleep(3600)
"""


def orchestrator_with_a_quota(tmp_path: Path) -> tuple[subprocess.Popen, str, str, str]:
    """The orchestrator's process, its hand-over, the memo's lock URI and the slot's."""
    memo, prefix = str(tmp_path / "memo"), str(tmp_path / "quota")
    proc = subprocess.Popen(
        [sys.executable, "-c", ORCHESTRATOR, memo, prefix], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    handover = proc.stdout.readline().strip()
    if not handover:
        proc.kill()
        pytest.fail(f"the orchestrator printed no hand-over (exit {proc.wait()})")
    return proc, handover, f"{memo}/lock", f"{prefix}/slot-0"


def test_the_claims_handover_keeps_the_lock_and_the_slot_after_the_orchestrator_dies(tmp_path):
    orchestrator, handover, lock_uri, slot_uri = orchestrator_with_a_quota(tmp_path)
    try:
        with keep_alive(handover) as kept:  # the remote, launched with one string
            orchestrator.kill()  # SIGKILL: no release, no more renewals from it
            orchestrator.wait()
            assert kept.uris == (lock_uri, slot_uri) and kept.uri == lock_uri
            time.sleep(1.5 * 3)  # three lifetimes of both leases: only the remote renews
            assert not kept.lost, kept.lost_reason
            # A restarted orchestrator finds both held: the memo is not launched again, and
            # the slot is not given to another invocation.
            with pytest.raises(LockTimeout):
                with claim_memo(str(tmp_path / "memo"), done=lambda: False, timeout=3):
                    pytest.fail("launched again while the remote keeps the lock")
            with pytest.raises(LockTimeout):
                BlobSemaphore(str(tmp_path / "quota"), 1, expire=1.5).acquire(timeout=3)
            assert not kept.lost, kept.lost_reason
        assert kept.lost is False  # stopped, not lost; nothing was released
        assert inspect(lock_uri).state is not LockState.RELEASED
    finally:
        orchestrator.kill()
        orchestrator.wait()


def test_a_handover_with_a_lock_no_longer_ours_is_refused_and_keeps_nothing(tmp_path):
    from blob_lock import LockStolen, break_lock

    orchestrator, handover, lock_uri, slot_uri = orchestrator_with_a_quota(tmp_path)
    orchestrator.kill()
    orchestrator.wait()
    break_lock(slot_uri)  # the slot is not this owner's any more
    with pytest.raises(LockStolen, match="slot-0"):
        keep_alive(handover)

    async def started() -> None:
        async with keep_alive_async(handover):
            pytest.fail("kept alive a hand-over whose slot is gone")

    with pytest.raises(LockStolen, match="slot-0"):
        asyncio.run(started())
    # The memo's lock, kept first (one write each time), was let go again: nobody renews it.
    writes = inspect(lock_uri).write_count
    time.sleep(1.5)  # three of its heartbeats (expire 1.5 s)
    assert inspect(lock_uri).write_count == writes


@pytest.mark.parametrize("which", ["lock", "slot"])
def test_a_handover_keep_alive_reports_the_loss_of_either_lock_once(tmp_path, which):
    from blob_lock import break_lock

    quota = BlobSemaphore(str(tmp_path / "quota"), 1, expire=1.5, raise_on_lost=False)
    memo, losses = str(tmp_path / "memo"), []
    with claim_memo(
        memo, done=lambda: False, quota=quota, expire=1.5, raise_on_lost=False
    ) as claim:
        assert claim.slot is not None and claim.handover is not None
        with keep_alive(claim.handover, on_lost=losses.append) as kept:
            assert kept.uris == (claim.lock_uri, claim.slot.uri) and kept.owner == claim.owner
            assert not kept.lost and kept.lost_reason is None
            gone, other = (claim.lock_uri, claim.slot.uri)[:: 1 if which == "lock" else -1]
            break_lock(gone)
            deadline = time.monotonic() + 60
            while not (kept.lost and losses):
                assert time.monotonic() < deadline, "the loss was never reported"
                time.sleep(0.05)
            assert kept.lost_reason is not None and gone in kept.lost_reason
            assert len(losses) == 1 and isinstance(losses[0], LockLost)
            assert losses[0].uri is not None and losses[0].uri.startswith(gone), losses
            assert "lost" in repr(kept)
            break_lock(other)  # the other one lost too: still the first loss, told once
            time.sleep(1.5)  # three heartbeats: the other's loss is seen
            assert kept.lost_reason is not None and gone in kept.lost_reason
            assert len(losses) == 1 and losses[0].uri.startswith(gone), losses


def test_keep_alive_async_takes_the_handover(tmp_path):
    quota = BlobSemaphore(str(tmp_path / "quota"), 2)

    async def main() -> None:
        async with claim_memo_async(str(tmp_path / "memo"), done=lambda: False, quota=quota) as c:
            assert c.handover is not None and c.slot is not None
            async with keep_alive_async(c.handover) as kept:
                assert kept.uris == (c.lock_uri, c.slot.uri) and not kept.lost
            started = await keep_alive_async(c.handover)  # the other spelling
            assert started.uris == kept.uris and not started.lost
            await started.stop_async()

    asyncio.run(main())


AWKWARD = ["a,b", "c#d", "e f", "g'h\"i", "j;k&l", "ü", "m%2Cn", "o?p=q"]


def test_a_handover_is_one_shell_safe_word_whatever_the_uris_hold(tmp_path):
    import shlex

    quota = BlobSemaphore(str(tmp_path / ",".join(AWKWARD) / "quota"), 1)
    memo = str(tmp_path / "#".join(AWKWARD) / "memo")
    with claim_memo(memo, done=lambda: False, quota=quota) as claim:
        assert claim.handover is not None and claim.slot is not None
        # Passed on a command line, in an environment variable or a Kubernetes job's args
        # as it is: no quoting, no splitting.
        assert shlex.quote(claim.handover) == claim.handover
        assert shlex.split(f"remote --handover {claim.handover}")[-1] == claim.handover
        with keep_alive(claim.handover) as kept:
            assert kept.uris == (claim.lock_uri, claim.slot.uri)
            assert kept.owner == claim.owner
    with claim_memo(str(tmp_path / "plain"), done=lambda: False) as plain:
        assert plain.handover is not None
        with keep_alive(plain.handover) as kept:  # no quota: the memo's lock alone
            assert kept.uris == (plain.lock_uri,)
    with claim_memo(str(tmp_path / "plain"), done=lambda: True) as nothing:
        assert nothing.handover is None  # nothing held, nothing to hand over


def test_a_handover_is_not_mistaken_for_a_uri_nor_a_uri_for_a_handover(tmp_path):
    with claim_memo(str(tmp_path / "memo"), done=lambda: False) as claim:
        assert claim.handover is not None and claim.owner is not None
        with pytest.raises(TypeError, match="carries its owner"):
            keep_alive(claim.handover, claim.owner)
        with pytest.raises(TypeError, match=r"keep_alive\(uri, owner\).*handover"):
            keep_alive(claim.lock_uri)
        with pytest.raises(TypeError, match=r"keep_alive\(uri, owner\).*handover"):
            keep_alive_async(claim.lock_uri)
        for mangled in (claim.handover[:-5], claim.handover + "x!", claim.handover[:25]):
            with pytest.raises(ValueError, match="hand-over"):
                keep_alive(mangled)
            with pytest.raises(ValueError, match="hand-over"):
                keep_alive_async(mangled)
