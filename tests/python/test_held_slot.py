"""A released ``HeldSlot`` taken again (``with slot:``, ``acquire``, ``try_acquire``, their
asyncio forms, the slot as a decorator) goes through its semaphore: a slot below the stored
number, after the process's cooldown, never the plain lock on the slot it had; threads
sharing one slot object take it one at a time; pickling it is refused."""

from __future__ import annotations

import asyncio
import pickle
import subprocess
import sys
import threading
import time

import pytest
from blob_lock import BlobSemaphore, LockTimeout, inspect


def four_then_two(prefix: str, options: dict | None, **kw) -> tuple[BlobSemaphore, dict]:
    """A semaphore whose 4 slots were each held once, released, then lowered to 2: the
    released slot objects by index."""
    semaphore = BlobSemaphore(prefix, 4, storage_options=options, **kw)
    held = {}
    for _ in range(4):
        slot = semaphore.acquire(timeout=30)
        held[slot.slot] = slot
    assert sorted(held) == [0, 1, 2, 3]
    for slot in held.values():
        slot.release()
    assert semaphore.set_slots(2).slots == 2
    return semaphore, held


def test_a_released_slot_taken_again_is_a_slot_below_the_stored_number(shared_backend):
    prefix, options = shared_backend.uri(), shared_backend.storage_options or None
    semaphore, held = four_then_two(prefix, options)
    three = held[3]

    def state(i: int) -> str:
        return inspect(f"{prefix}/slot-{i}", storage_options=options).state

    with three:
        assert three.held and three.slot < 2, three.slot
        assert three.uri == f"{prefix}/slot-{three.slot}"
        assert inspect(three.uri, storage_options=options).owner == three.owner
    assert not three.held and state(3) == "released"
    # Both slots below the number held by others: it waits, and is refused, like any
    # acquisition of the semaphore; slot 3 stays free.
    others = [semaphore.acquire(timeout=30), semaphore.acquire(timeout=30)]
    assert three.try_acquire() is False
    assert three.acquire(timeout=1) is False
    assert three.last_timeout is not None and prefix in str(three.last_timeout)
    with pytest.raises(LockTimeout):
        three._acquire(0.5, raise_timeout=True)
    assert state(3) == "released" and not three.held
    freed = others[0].slot
    others[0].release()
    assert three.acquire(timeout=30) and three.held and three.slot == freed
    three.release()
    others[1].release()
    assert state(3) == "released"


def test_a_released_slot_taken_again_in_asyncio_goes_through_the_semaphore(tmp_path):
    prefix = str(tmp_path / "quota")
    semaphore, held = four_then_two(prefix, None)
    three = held[2]

    async def use() -> None:
        async with three:
            assert three.held and three.slot < 2
        blocking = [await semaphore.acquire_async(timeout=30) for _ in range(2)]
        assert await three.try_acquire_async() is False
        assert await three.acquire_async(timeout=1) is False
        blocking[0].release()
        assert await three.try_acquire_async() is True and three.slot == blocking[0].slot
        await three.release_async()
        blocking[1].release()

    asyncio.run(use())
    for i in (2, 3):
        assert inspect(f"{prefix}/slot-{i}").state == "released"


def test_a_released_slot_as_a_decorator_takes_a_slot_of_the_semaphore(tmp_path):
    prefix = str(tmp_path / "quota")
    _, held = four_then_two(prefix, None, timeout=1)
    three = held[3]

    @three
    def run() -> list[int]:
        """The slots this process holds while it runs."""
        return [i for i in range(4) if inspect(f"{prefix}/slot-{i}").state == "ours"]

    assert run() in ([0], [1])
    blockers = [held[0], held[1]]
    for b in blockers:
        assert b.acquire(timeout=10)  # taken again: the two slots below the number
    with pytest.raises(LockTimeout):
        run()
    assert inspect(f"{prefix}/slot-3").state == "released"
    for b in blockers:
        b.release()


def test_threads_sharing_a_released_slot_take_it_one_at_a_time(tmp_path):
    prefix = str(tmp_path / "quota")
    semaphore = BlobSemaphore(prefix, 3)
    slot = semaphore.acquire(timeout=10)
    slot.release()
    inside, most, errors = [0], [0], []
    guard = threading.Lock()

    def work() -> None:
        try:
            for _ in range(5):
                with slot:
                    with guard:
                        inside[0] += 1
                        most[0] = max(most[0], inside[0])
                    assert slot.held
                    seen = inspect(slot.uri)
                    assert seen.state == "ours" and seen.owner == slot.owner, seen
                    time.sleep(0.01)
                    with guard:
                        inside[0] -= 1
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread never got its turn"
    assert not errors, errors
    assert most[0] == 1
    assert not slot.held
    assert all(inspect(f"{prefix}/slot-{i}").state != "held" for i in range(3))


def test_pickling_a_slot_is_refused_naming_the_semaphore(tmp_path):
    prefix = str(tmp_path / "quota")
    slot = BlobSemaphore(prefix, 2).acquire(timeout=10)
    slot.release()
    with pytest.raises(TypeError, match="taken through its semaphore") as refused:
        pickle.dumps(slot)
    assert prefix in str(refused.value)


# Holds a slot object of a 1-slot semaphore again and again, 50 ms each time (`with slot:`
# on the same object), until killed; writes how many times to the file named, after each.
AGAIN = """
import json, os, sys, time
from blob_lock import BlobSemaphore
prefix, count, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]) or None
slot = BlobSemaphore(prefix, 1, expire=5, storage_options=options).acquire()
slot.release()
taken = 0
while True:
    with slot:
        taken += 1
        with open(count + ".new", "w") as f:
            f.write(str(taken))
        os.replace(count + ".new", count)
        time.sleep(0.05)
"""


def test_a_slot_taken_again_and_again_leaves_it_to_a_waiter_elsewhere(shared_backend, tmp_path):
    """The cooldown holds for a slot object taken again: before, its `with slot:` was a
    plain lock's, which took the slot back at once after each release, and a waiter in
    another process never got it."""
    prefix, count = shared_backend.uri(), tmp_path / "taken"
    options = shared_backend.storage_options or None
    loop = subprocess.Popen(
        [sys.executable, "-c", AGAIN, prefix, str(count), shared_backend.options_json()]
    )

    def taken() -> int:
        return int(count.read_text()) if count.exists() else 0

    try:
        deadline = time.monotonic() + 60
        while taken() < 3:
            assert loop.poll() is None, f"the loop exited {loop.returncode}"
            assert time.monotonic() < deadline, f"the loop took the slot {taken()} times in 60 s"
            time.sleep(0.02)
        before = taken()
        for _ in range(3):
            semaphore = BlobSemaphore(prefix, 1, expire=5, storage_options=options)
            semaphore.acquire(timeout=20).release()
            time.sleep(0.6)  # past this process's own cooldown: a waiter again
        assert loop.poll() is None and taken() > before, (before, taken())
    finally:
        loop.kill()
        loop.wait()
