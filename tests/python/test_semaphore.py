"""BlobSemaphore: at most N holders at once among processes, on local files, S3 on moto
and Azure on Azurite, each holder checking for itself; the number stored beside the slots;
a killed holder's slot taken after its expiry; a remote keeping a slot alive."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time

import pytest
from blob_lock import BlobSemaphore, LockTimeout, inspect, keep_alive
from blob_lock.exceptions import StoreError
from conftest import cli


def test_sixteen_processes_on_four_slots_never_exceed_four(shared_backend, workers, tmp_path):
    # Each holder holds until it has seen every slot taken (5 s at most): a semaphore that
    # cannot let 4 in at once shows as fewer.
    slots, n_proc, rounds, hold = 4, 16, 2, "fill:5"
    inside = tmp_path / "inside"
    inside.mkdir()
    prefix = shared_backend.uri()
    # The default expire (30 s): a process's first request may wait behind 15 others
    # starting at once, and the rest of the suite. Until a store has answered a process
    # once, a request without an answer within the request timeout (half a heartbeat, 5 s
    # here) fails it as unreachable: first contact fails fast.
    args = (str(inside), str(slots), str(rounds), hold, "30")
    procs = [workers("slots", prefix, shared_backend.options_json(), *args) for _ in range(n_proc)]
    for p in procs:
        assert p.line()["event"] == "ready"
    done = [p.line(timeout=300) for p in procs]
    for p in procs:
        assert p.wait() == 0
    assert all(d["event"] == "done" for d in done), done
    most = max(d["most"] for d in done)
    assert most <= slots, f"{most} holders of {slots} slots at once"
    # Contention filled every slot: the semaphore let 4 in at once, not fewer.
    assert most == slots, f"at most {most} holders at once: slots were left idle"
    assert {s for d in done for s in d["slots"]} == set(range(slots))
    # Every waiter got a slot within a generous liveness bound (the docs state the bound).
    assert max(d["longest_wait"] for d in done) < 120


def test_a_killed_holders_slot_is_taken_after_its_expiry(shared_backend, workers, tmp_path):
    prefix, expire = shared_backend.uri(), 2.0
    inside = tmp_path / "inside"
    inside.mkdir()
    # One slot, held by a process that holds for long; killed, its slot frees by expiry.
    holder = workers(
        "slots", prefix, shared_backend.options_json(), str(inside), "1", "1", "600", str(expire)
    )
    assert holder.line()["event"] == "ready"
    options = shared_backend.storage_options or None
    semaphore = BlobSemaphore(prefix, 1, expire=expire, storage_options=options)
    deadline = time.monotonic() + 30
    while not list(inside.iterdir()):
        assert time.monotonic() < deadline, "the holder never took its slot"
        time.sleep(0.05)
    assert semaphore.try_acquire() is None
    dead = inspect(f"{prefix}/slot-0", storage_options=options).token
    holder.kill()
    killed = time.monotonic()
    with semaphore.acquire(timeout=60) as slot:
        waited = time.monotonic() - killed
        assert slot.slot == 0
        assert waited >= expire * 0.9
        assert waited < expire * 5 + 5
        assert dead is not None and slot.token > dead


def test_a_remote_keeps_a_slot_alive_after_its_orchestrator_dies(tmp_path):
    prefix, expire = str(tmp_path / "quota"), 1.5
    semaphore = BlobSemaphore(prefix, 1, expire=expire)
    slot = semaphore.acquire()
    with keep_alive(slot.uri, slot.owner):
        slot._native.let_go()  # as an orchestrator that died: no renewal, no release
        time.sleep(expire * 3)
        assert semaphore.try_acquire() is None, "the remote's slot was taken"
    # The remote stopped: the slot is free again.
    again = semaphore.acquire(timeout=30)
    assert again.slot == 0
    again.release()


def test_the_stored_number_wins_and_can_be_changed(tmp_path, caplog):
    prefix = str(tmp_path / "quota")
    first = BlobSemaphore(prefix, 2)
    assert first.configuration().slots == 2
    other = BlobSemaphore(prefix, 5)
    held = [other.try_acquire(), other.try_acquire()]
    assert all(held)
    with caplog.at_level("WARNING"):
        assert other.try_acquire() is None
    assert "5 slots asked for" in caplog.text and "says 2" in caplog.text
    stored = json.loads((tmp_path / "quota" / "semaphore.json").read_text())
    assert stored["slots"] == 2
    assert other.set_slots(3).slots == 3
    third = other.try_acquire()
    assert third is not None and third.slot == 2
    for h in [*held, third]:
        h.release()


def test_a_timeout_names_the_semaphore(tmp_path):
    prefix = str(tmp_path / "quota")
    semaphore = BlobSemaphore(prefix, 1)
    with semaphore:
        with pytest.raises(LockTimeout) as info:
            semaphore.acquire(timeout=0.5)
    assert prefix in str(info.value) and "1 slot" in str(info.value)


def test_async_with_takes_and_releases_a_slot(tmp_path):
    semaphore = BlobSemaphore(str(tmp_path / "quota"), 1)

    async def use() -> None:
        async with semaphore as slot:
            assert slot.held and slot.slot == 0
            assert semaphore.try_acquire() is None
        assert not slot.held
        again = await semaphore.acquire_async(timeout=5)
        again.release()

    asyncio.run(use())


@pytest.mark.parametrize(
    ("slots", "error"), [(0, ValueError), (5000, ValueError), ("4", TypeError), (True, TypeError)]
)
def test_bad_numbers_of_slots_are_refused(tmp_path, slots, error):
    with pytest.raises(error, match="slots"):
        BlobSemaphore(str(tmp_path / "quota"), slots)


def test_run_with_slots_takes_one_slot_for_the_command(tmp_path):
    prefix = str(tmp_path / "quota")
    semaphore = BlobSemaphore(prefix, 2)
    first = semaphore.acquire()
    # One slot left: the command takes it, and sees itself holding it while it runs.
    probe = (
        "from blob_lock import BlobSemaphore; "
        f"s = BlobSemaphore({prefix!r}, 2); assert s.try_acquire() is None; print('full')"
    )
    done = cli("run", "--slots", "2", prefix, "--", sys.executable, "-c", probe)
    assert done.returncode == 0, done.stderr
    assert "full" in done.stdout
    # Released after it: the slot is free again; with both held, --no-wait exits 75.
    second = semaphore.try_acquire()
    assert second is not None
    done = cli("run", "--slots", "2", "--no-wait", prefix, "--", "true")
    assert done.returncode == 75
    assert "every slot" in done.stderr and prefix in done.stderr
    first.release()
    second.release()


def test_status_of_a_prefix_shows_the_semaphore_and_its_slots(tmp_path):
    prefix = str(tmp_path / "quota")
    semaphore = BlobSemaphore(prefix, 3, labels={"job": "train"})
    held = semaphore.acquire()
    semaphore.acquire().release()
    done = cli("status", prefix)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{prefix}: semaphore of 3 slots, 1 held"), done.stdout
    assert f"{held.uri}: held" in done.stdout and "job=train" in done.stdout
    assert len(lines) == 3, done.stdout  # the two slots ever taken
    done = cli("status", "--json", prefix)
    seen = json.loads(done.stdout)
    assert seen["semaphore"]["slots"] == 3 and seen["held"] == 1, seen
    assert [s["state"] for s in seen["slot_locks"]].count("held") == 1, seen
    assert {s["uri"] for s in seen["slot_locks"]} >= {held.uri}
    held.release()
    # A prefix without a semaphore stays a plain lock's status, and nothing is written.
    other = tmp_path / "other"
    done = cli("status", str(other))
    assert done.stdout.strip() == f"{other}: unlocked"
    assert json.loads(cli("status", "--json", str(other)).stdout)["state"] == "unlocked"
    assert not other.exists()


def test_slots_changes_the_number_every_process_uses(tmp_path):
    prefix = str(tmp_path / "quota")
    done = cli("slots", prefix, "2")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{prefix}: semaphore of 2 slots (new)"
    # A process asking for 5 uses the stored 2; raised to 3, a third slot is taken.
    semaphore = BlobSemaphore(prefix, 5)
    held = [semaphore.acquire(), semaphore.acquire()]
    assert semaphore.try_acquire() is None
    done = cli("slots", prefix, "3")
    assert done.returncode == 0, done.stderr
    assert "semaphore of 3 slots (raised from 2, set by " in done.stdout, done.stdout
    held.append(semaphore.try_acquire())
    assert held[-1] is not None and held[-1].slot == 2
    # Lowered to 1: nobody is evicted, and the command says the others drain.
    done = cli("slots", prefix, "1")
    assert "lowered from 3" in done.stdout and "keep them until they release" in done.stdout
    assert all(not h.lost for h in held)
    for h in held:
        h.release()
    assert BlobSemaphore(prefix, 9).stored().slots == 1
    done = cli("slots", prefix, "0")
    assert done.returncode == 2 and "slots must be between 1 and 4096" in done.stderr


# Takes the one slot again and again, holding it 50 ms each time, until killed; writes how
# many times it took it to the file named, after each time (atomically: a reader never sees
# half a number).
HOG = """
import os, sys, time
from blob_lock import BlobSemaphore
prefix, count = sys.argv[1], sys.argv[2]
taken = 0
while True:
    with BlobSemaphore(prefix, 1, expire=5):
        taken += 1
        with open(count + ".new", "w") as f:
            f.write(str(taken))
        os.replace(count + ".new", count)
        time.sleep(0.05)
"""


def test_a_waiter_is_not_starved_by_a_process_that_takes_the_slot_again_and_again(tmp_path):
    # Before a process that vacated a slot cooled down before taking one again, a waiter in
    # another process timed out after 15 s while the loop took the slot 388 times.
    prefix, count = str(tmp_path / "quota"), tmp_path / "taken"
    hog = subprocess.Popen([sys.executable, "-c", HOG, prefix, str(count)])

    def taken() -> int:
        return int(count.read_text()) if count.exists() else 0

    try:
        # The loop is going: it has taken the slot, released it and taken it again.
        deadline = time.monotonic() + 60
        while taken() < 3:
            assert hog.poll() is None, f"the loop exited {hog.returncode}"
            assert time.monotonic() < deadline, f"the loop took the slot {taken()} times in 60 s"
            time.sleep(0.02)
        before = taken()
        waits = []
        for _ in range(3):
            began = time.monotonic()
            slot = BlobSemaphore(prefix, 1, expire=5).acquire(timeout=60)
            waits.append(time.monotonic() - began)
            slot.release()
            time.sleep(0.6)  # past this process's own pause: a waiter again, not a re-taker
        # The loop kept taking the slot between these waits: they were waits beside it.
        assert hog.poll() is None and taken() > before, (before, taken())
        # A waiter polls at most every 0.5 s at expire 5; the loop leaves the slot that long.
        assert max(waits) < 10, waits
    finally:
        hog.kill()
        hog.wait()


# Run in a process of its own, whose counters nothing else moves.
SLOT_METRICS = """
import json, sys, threading, time
from blob_lock import BlobSemaphore, stats

semaphore = BlobSemaphore(sys.argv[1], 1)
seen = {"idle": stats()}
held = semaphore.acquire()
seen["held"] = stats()
waiter = threading.Thread(target=lambda: semaphore.acquire(timeout=60).release())
waiter.start()
deadline = time.monotonic() + 60
while stats()["semaphore_waiters"] < 1:
    assert time.monotonic() < deadline, "the waiter was never counted"
    time.sleep(0.01)
seen["waiting"] = stats()
held.release()
waiter.join(60)
seen["done"] = stats()
print(json.dumps({k: [v["slots_held"], v["semaphore_waiters"]] for k, v in seen.items()}))
"""


def test_stats_count_the_slots_held_and_the_waiters(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", SLOT_METRICS, str(tmp_path / "quota")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "idle": [0, 0],
        "held": [1, 0],
        "waiting": [1, 1],
        "done": [0, 0],
    }


# S3 only: in the test's own process Azure's requests did not pass the proxy (no 503 was
# served); test_faults reaches Azurite through it from holder processes' environment.
@pytest.mark.parametrize("proxied", ["s3"], indirect=True)
def test_an_acquisition_waits_out_a_burst_of_503s(proxied):
    backend, proxy, options, _ = proxied
    semaphore = BlobSemaphore(backend.uri(), 1, storage_options=json.loads(options))
    assert semaphore.configuration().slots == 1  # the store has answered this process
    # More 503s than one request's own tries (3): the configuration read that starts the
    # acquisition fails, transiently, and is read again within the timeout, as a lock's
    # attempts are.
    proxy.fail_http(8)
    with semaphore.acquire(timeout=60) as slot:
        assert slot.slot == 0 and slot.held
    assert proxy.http_failures_served == 8


def test_set_slots_gives_up_on_a_store_that_refuses_every_update(proxied, monkeypatch):
    """A store (or a proxy before it) that answers every update-if-match with 412, as one that
    rewrites ETags does: ``set_slots`` tries a few times, a pause apart, then says so and
    what to check, instead of writing again without end or pause."""
    backend, proxy, options, _ = proxied
    if backend.name == "az":
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", proxy.url)  # this process's client
    semaphore = BlobSemaphore(backend.uri(), 2, storage_options=json.loads(options))
    assert semaphore.configuration().slots == 2  # written by a create, which is not refused
    proxy.refuse_updates()
    done: list[BaseException | object] = []
    setting = threading.Thread(target=lambda: done.append(_outcome(semaphore.set_slots, 1)))
    setting.start()
    setting.join(60)  # a liveness bound: 8 tries take seconds
    assert not setting.is_alive(), f"set_slots still writing after 60 s ({proxy.updates_refused})"
    (error,) = done
    assert isinstance(error, StoreError), error
    assert "refuses every update-if-match" in str(error) and "doctor" in str(error), error
    assert proxy.updates_refused == 8, proxy.updates_refused
    proxy.heal()
    assert semaphore.configuration().slots == 2


def _outcome(call, *args):
    try:
        return call(*args)
    except BaseException as e:  # returned to the test's thread
        return e


# Waits for a slot in a process of its own; says when it counts as a waiter (its first round
# found every slot held), then which slot it got.
WAITER = """
import json, sys, threading, time
from blob_lock import BlobSemaphore, stats

prefix, options, asked = sys.argv[1], json.loads(sys.argv[2]) or None, int(sys.argv[3])
got = {}
def wait():
    semaphore = BlobSemaphore(prefix, asked, expire=3, storage_options=options)
    slot = semaphore.acquire(timeout=120)
    got["slot"] = slot.slot
    slot.release()
waiter = threading.Thread(target=wait)
waiter.start()
while stats()["semaphore_waiters"] < 1 and waiter.is_alive():
    time.sleep(0.01)
print("waiting", flush=True)
waiter.join()
print(json.dumps(got), flush=True)
"""


def start_waiter(prefix: str, options_json: str, asked: int) -> subprocess.Popen:
    waiter = subprocess.Popen(
        [sys.executable, "-c", WAITER, prefix, options_json, str(asked)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert waiter.stdout is not None and waiter.stdout.readline().strip() == "waiting"
    return waiter


def test_a_waiter_through_a_lowering_never_takes_a_slot_at_or_above_the_new_number(
    shared_backend,
):
    """All 8 slots held, a waiter in another process; the number is lowered to 1, then
    slots 1 to 7 are released: the waiter never takes them (it did, when it read the number
    only once every 8 polls), and takes slot 0 once that is free."""
    prefix = shared_backend.uri()
    options = shared_backend.storage_options or None
    held = {}
    semaphore = BlobSemaphore(prefix, 8, expire=3, storage_options=options)
    for _ in range(8):
        slot = semaphore.acquire(timeout=60)
        held[slot.slot] = slot
    assert sorted(held) == list(range(8))
    waiter = start_waiter(prefix, shared_backend.options_json(), 8)
    try:
        # Past its first polls (at most 0.3 s apart at expire 3), into its steady reading.
        time.sleep(1)
        assert semaphore.set_slots(1).slots == 1
        for i in range(7, 0, -1):
            held.pop(i).release()
        # Slots 1 to 7 stay free while the waiter polls, reading the number each time:
        # looked at for 3 s, then slot 0 is released.
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            for i in range(1, 8):
                seen = inspect(f"{prefix}/slot-{i}", storage_options=options)
                assert seen.state == "released", f"slot {i} taken after the lowering to 1: {seen}"
        held.pop(0).release()
        assert waiter.stdout is not None
        got = json.loads(waiter.stdout.readline())
        assert got == {"slot": 0}, got
        assert waiter.wait(60) == 0
    finally:
        waiter.kill()
        waiter.wait()
        for slot in held.values():
            slot.release()


def test_a_raised_number_lets_a_waiter_in_within_a_poll(tmp_path):
    prefix = str(tmp_path / "quota")
    semaphore = BlobSemaphore(prefix, 1, expire=3)
    held = semaphore.acquire(timeout=10)
    waiter = start_waiter(prefix, "null", 1)
    try:
        semaphore.set_slots(2)
        # Slot 1 is new: the waiter takes it at its next poll, while slot 0 stays held.
        assert waiter.stdout is not None
        got = json.loads(waiter.stdout.readline())
        assert got == {"slot": 1}, got
        assert not held.lost
    finally:
        waiter.kill()
        waiter.wait()
        held.release()


def test_a_lost_configuration_is_refused_never_written_again(shared_backend):
    """semaphore.json deleted (by hand, by a lifecycle rule) after slots were taken: the next
    caller is refused with the fix, not given the number it asks for, and the number stored
    again with `blob-lock slots` serves every caller."""
    prefix = shared_backend.uri()
    options = shared_backend.storage_options or None
    BlobSemaphore(prefix, 64, storage_options=options).set_slots(8)
    with BlobSemaphore(prefix, 8, storage_options=options):
        pass
    assert shared_backend.raw_delete is not None
    shared_backend.raw_delete(f"{prefix}/semaphore.json")
    with pytest.raises(StoreError) as refused:
        BlobSemaphore(prefix, 64, storage_options=options).acquire(timeout=10)
    message = str(refused.value)
    assert "semaphore.json" in message and f"blob-lock slots {prefix} N" in message, message
    assert not refused.value.transient
    assert BlobSemaphore(prefix, 64, storage_options=options).stored() is None, "written again"
    done = cli("slots", prefix, "8", *[f"-o{k}={v}" for k, v in (options or {}).items()])
    assert done.returncode == 0, done.stderr
    with BlobSemaphore(prefix, 64, storage_options=options) as slot:
        assert slot.slot < 8
    assert BlobSemaphore(prefix, 64, storage_options=options).stored().slots == 8


def test_a_new_semaphore_is_written_by_its_first_caller(tmp_path):
    # No slot was ever taken there: nothing was lost, the first caller's number is stored.
    prefix = str(tmp_path / "never-used")
    with BlobSemaphore(prefix, 5) as slot:
        assert slot.slot < 5
    assert BlobSemaphore(prefix, 9).stored().slots == 5


def first_comers_agree(prefix: str, options: dict | None) -> None:
    """Eight first-comers on a new semaphore at once, asking 1 to 8 slots, each taking a
    slot: one number is stored, each of them uses it, and none is refused."""
    import threading

    asked = range(1, 9)
    barrier = threading.Barrier(len(asked))
    seen: dict[int, int] = {}

    def first(n: int) -> None:
        semaphore = BlobSemaphore(prefix, n, storage_options=options)
        barrier.wait()
        # Taking a slot at once: a first-comer that found no configuration, then another's
        # slot, must read the configuration written meanwhile, not call it lost.
        with semaphore.acquire(timeout=60):
            seen[n] = semaphore.configuration().slots

    threads = [threading.Thread(target=first, args=(n,)) for n in asked]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    stored = BlobSemaphore(prefix, 1, storage_options=options).stored()
    assert len(seen) == len(asked), f"{len(asked) - len(seen)} first-comers failed: {seen}"
    assert stored is not None and set(seen.values()) == {stored.slots}, (seen, stored)


def test_first_comers_asking_different_numbers_agree_on_one(shared_backend):
    first_comers_agree(shared_backend.uri(), shared_backend.storage_options or None)


def test_first_comers_agree_on_a_store_that_ignores_conditional_writes(s3rver):
    # s3rver lands every create: each first-comer waits out the others and takes what is
    # there then.
    first_comers_agree(s3rver.uri(), s3rver.options)
