"""A process for the tests: takes locks as an orchestrator or keeps them alive as a remote.
Prints one JSON line per event and flushes, so the test can follow it."""

from __future__ import annotations

import asyncio
import errno
import faulthandler
import gc
import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

from blob_lock import BlobLock, BlobSemaphore, StoreSaturated, inspect_async, keep_alive, stats


def say(**kw) -> None:
    print(json.dumps(kw), flush=True)


def open_files(limit: int | None = None) -> int:
    """Descriptors open. Counting them takes one: at the limit, that one fails (EMFILE), and
    the count is the limit (an escaping EMFILE once ended the hold loop, and the exit hook
    then released thousands of locks one by one while the test waited)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError as e:
        if e.errno == errno.EMFILE and limit is not None:
            return limit
        raise


async def patient_inspect(uri: str, options: dict | None, patience: float = 120.0):
    """inspect_async retried while admission refuses it, as the refusal asks: with thousands of
    leases renewing on a loaded host the renewals go first, and a read may wait its turn."""
    deadline = time.monotonic() + patience
    while True:
        try:
            return await inspect_async(uri, storage_options=options)
        except StoreSaturated:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)


async def many(
    uri: str, options: dict | None, n: int, hold: float, expire: float, limit: int
) -> None:
    """Acquires ``n`` locks under ``uri`` (a fresh BlobLock each, as users make them), holds
    them for ``hold`` seconds while they renew, then releases them."""
    locks = [BlobLock(f"{uri}/{i}", expire=expire, storage_options=options) for i in range(n)]
    began = time.monotonic()
    phase = "acquiring"

    async def progress() -> None:  # on stderr, for a test that has to give up on us
        while True:
            await asyncio.sleep(10)
            held = sum(lock.held for lock in locks)
            print(
                f"{time.monotonic() - began:.0f}s {phase}: {held} held, {open_files(limit)} files",
                file=sys.stderr,
                flush=True,
            )

    reporter = asyncio.create_task(progress())
    await asyncio.gather(*(lock.acquire_async(timeout=120) for lock in locks))
    say(
        event="acquired",
        held=sum(lock.held for lock in locks),
        seconds=time.monotonic() - began,
        files=open_files(limit),
    )
    most = 0
    phase = "holding"
    until = time.monotonic() + hold
    while time.monotonic() < until:
        most = max(most, open_files(limit))
        await asyncio.sleep(0.2)
    lost = [lock.lost_reason for lock in locks if lock.lost]
    phase = "sampling"
    sample = await asyncio.gather(
        *(patient_inspect(lock.uri, options) for lock in locks[:: max(1, n // 100)])
    )
    phase = "releasing"
    statuses = await asyncio.gather(*(lock.release_async() for lock in locks))
    reporter.cancel()
    say(
        event="released",
        lost=len(lost),
        first_loss=lost[0] if lost else None,
        fewest_writes=min(seen.write_count or 0 for seen in sample),
        released=sum(s == "released" for s in statuses),
        most_files=most,
    )


def main() -> None:
    faulthandler.register(signal.SIGUSR1)  # the tests ask for our stacks before giving up
    mode, uri, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]) or None
    if mode == "counter":
        # N acquisitions, each a non-atomic read-modify-write of a shared counter file.
        counter, n, expire = Path(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
        say(event="ready")
        protocols = set()
        for _ in range(n):
            with BlobLock(uri, expire=expire, storage_options=options) as held:
                value = int(counter.read_text())
                time.sleep(0.002)  # widen the window a broken lock would let others into
                counter.write_text(str(value + 1))
                assert not held.lost
                protocols.add(held.protocol)
        say(event="done", protocols=sorted(protocols))
    elif mode == "slots":
        # N acquisitions of a semaphore's slot. Each holder marks itself inside a shared
        # folder while it holds, and counts the marks: more than `slots` would be a holder
        # too many (a mark is made after acquiring and removed before releasing).
        # HOLD is seconds, or fill:S: hold until every slot was seen taken once (and at
        # least 0.3 s), S seconds at most, so that the holders show whether N can be in at
        # once whatever the polls' timing. Once, not at the moment of leaving: else each
        # holder that leaves keeps the others in until a waiter's poll fills its slot again.
        inside, slots, n, expire = (
            Path(sys.argv[4]),
            int(sys.argv[5]),
            int(sys.argv[6]),
            float(sys.argv[8]),
        )
        fill = sys.argv[7].startswith("fill:")
        hold = float(sys.argv[7].removeprefix("fill:"))
        semaphore = BlobSemaphore(uri, slots, expire=expire, storage_options=options)
        say(event="ready")
        most, waits, taken = 0, [], []
        for i in range(n):
            began = time.monotonic()
            with semaphore as slot:
                waits.append(time.monotonic() - began)
                taken.append(slot.slot)
                mark = inside / f"{os.getpid()}-{i}"
                mark.touch()
                most = max(most, len(os.listdir(inside)))
                if fill:
                    held_since, filled = time.monotonic(), False
                    while time.monotonic() - held_since < hold:
                        seen = len(os.listdir(inside))
                        most = max(most, seen)
                        filled = filled or seen >= slots
                        if filled and time.monotonic() - held_since >= 0.3:
                            break
                        time.sleep(0.02)
                else:
                    time.sleep(hold)
                most = max(most, len(os.listdir(inside)))
                assert not slot.lost
                mark.unlink()
        say(event="done", most=most, longest_wait=max(waits), slots=taken)
    elif mode == "many":
        # Holds N locks at once in one process under a file-descriptor limit, through a
        # number of heartbeats, then releases them all.
        n, hold, expire, limit = (
            int(sys.argv[4]),
            float(sys.argv[5]),
            float(sys.argv[6]),
            int(sys.argv[7]),
        )
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
        asyncio.run(many(uri, options, n, hold, expire, limit))
    elif mode == "saturate":
        # Takes N locks one after another with try_acquire, as a wide parallel map of
        # claims would, past what the store can renew; holds what it took, then releases.
        n, expire, hold = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
        held, busy, saturated, other = [], 0, [], []
        began = time.monotonic()
        for i in range(n):
            lock = BlobLock(f"{uri}/{i}", expire=expire, storage_options=options)
            try:
                if lock.try_acquire():
                    held.append(lock)
                else:
                    busy += 1
            except StoreSaturated as e:
                saturated.append(str(e))
            except Exception as e:
                other.append(f"{type(e).__name__}: {e}")
        say(
            event="acquired",
            held=len(held),
            busy=busy,
            saturated=len(saturated),
            reasons=sorted(set(r.split(" is saturated: ")[-1][:40] for r in saturated))[:5],
            example=saturated[-1] if saturated else None,
            other=other[:5],
            seconds=time.monotonic() - began,
        )
        before = stats()["renewals"]["ok"]
        time.sleep(hold)
        lost = [lock.lost_reason for lock in held if lock.lost]
        s = stats()
        say(
            event="held",
            lost=len(lost),
            first_loss=lost[0] if lost else None,
            renewals=s["renewals"]["ok"] - before,
            margin_min=s["renewal_margin_min_seconds"],
            losses=s["losses"],
        )
        statuses = [str(lock.release()) for lock in held]
        say(event="released", released=statuses.count("released"))
    elif mode == "gil":
        # Holds a lock with DEBUG logging on while the main thread holds the GIL for
        # `seconds` (a long pickle.loads, a C extension that keeps it), then says whether
        # the lock survived and how many records the heartbeat logged meanwhile.
        import ctypes
        import logging

        expire, seconds = float(sys.argv[4]), float(sys.argv[5])
        records = []

        class Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                records.append((record.threadName, record.created, record.getMessage()))

        logging.basicConfig(level=logging.DEBUG, handlers=[Keep()])
        lock = BlobLock(uri, expire=expire, storage_options=options)
        lock.acquire()
        say(event="acquired", owner=lock.owner)
        began = time.time()
        ctypes.PyDLL(None).usleep(ctypes.c_uint(int(seconds * 1e6)))  # keeps the GIL
        ended = time.time()

        def renewed() -> list[str]:
            return [m for t, c, m in records if "renewed" in m and began < c < ended]

        # The deliverer hands over what the heartbeat logged once Python runs again: waited
        # for until the three renewals the test asks for are there (it reports fewer, and the
        # test fails, only after a minute).
        deadline = time.monotonic() + 60
        while len(renewed()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        say(
            event="done",
            lost=lock.lost,
            reason=lock.lost_reason,
            renewals_logged_meanwhile=len(renewed()),
            threads=sorted({t for t, _, m in records if "renewed" in m}),
        )
        lock.release()
    elif mode == "gil_async":
        # Holds a lock while N acquire_async() on other locks are in flight and the main
        # thread holds the GIL for `seconds`: their completions wait for the GIL meanwhile,
        # and the held lock's renewals must not wait behind them.
        import ctypes

        expire, n, seconds = float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])

        async def run() -> None:
            lock = BlobLock(f"{uri}/held", expire=expire, storage_options=options)
            await lock.acquire_async()
            before = stats()["renewals"]["ok"]
            others = [BlobLock(f"{uri}/other-{i}", storage_options=options) for i in range(n)]
            in_flight = [asyncio.ensure_future(o.acquire_async(timeout=60)) for o in others]
            await asyncio.sleep(0)  # each task runs to its native await: all in flight
            ctypes.PyDLL(None).usleep(ctypes.c_uint(int(seconds * 1e6)))  # keeps the GIL
            renewed_meanwhile = stats()["renewals"]["ok"] - before
            got = await asyncio.gather(*in_flight)
            say(
                event="done",
                lost=lock.lost,
                reason=lock.lost_reason,
                renewed_meanwhile=renewed_meanwhile,
                others_acquired=sum(1 for g in got if g),
            )
            await lock.release_async()
            for o in others:
                o.release()

        asyncio.run(run())
    elif mode == "exit_many":
        # Holds N locks, then exits normally (the exit releases them) once `go` exists.
        n, expire, go = int(sys.argv[4]), float(sys.argv[5]), Path(sys.argv[6])
        locks = [BlobLock(f"{uri}/{i}", expire=expire, storage_options=options) for i in range(n)]
        for lock in locks:
            lock.acquire(timeout=60)
        say(event="acquired", held=sum(lock.held for lock in locks))
        while not go.exists():
            time.sleep(0.05)
        say(event="exiting", at=time.time())
        sys.exit(0)
    elif mode == "hold":
        expire = float(sys.argv[4])
        lock = BlobLock(uri, expire=expire, storage_options=options)
        lock.acquire()
        say(event="acquired", owner=lock.owner, token=lock.token)
        time.sleep(3600)
    elif mode == "keep":
        # The handle is dropped at once, as a careless remote would: renewal must go on.
        token = keep_alive(uri, sys.argv[4], storage_options=options).token
        gc.collect()
        say(event="alive", token=token)
        time.sleep(3600)
    elif mode == "watch":
        # Holds the lock and reports the moment it sees the lock lost.
        lock = BlobLock(uri, expire=float(sys.argv[4]), storage_options=options)
        lock.acquire()
        say(event="acquired", owner=lock.owner, token=lock.token)
        while not lock.lost:
            time.sleep(0.02)
        say(event="lost", reason=lock.lost_reason, at=time.time())
        time.sleep(3600)
    elif mode == "release_on":
        # Holds the lock in a `with` until a file appears, then says how the block ended.
        expire, go = float(sys.argv[4]), Path(sys.argv[5])
        try:
            with BlobLock(uri, expire=expire, storage_options=options) as held:
                say(event="acquired", owner=held.owner, token=held.token)
                while not go.exists():
                    time.sleep(0.01)
            say(event="released", error=None)
        except Exception as e:
            say(event="released", error=f"{type(e).__name__}: {e}")
        time.sleep(3600)
    elif mode == "exit":
        # Exits normally while holding the lock, without releasing it.
        lock = BlobLock(uri, expire=float(sys.argv[4]), storage_options=options)
        lock.acquire()
        say(event="acquired", owner=lock.owner, token=lock.token)
        sys.exit(0)
    elif mode == "fork":
        # The parent holds a lock and co-owns it with a keep-alive, then forks. The child
        # reports what it sees and exits normally (atexit handlers run, as in a careless
        # child); the parent then shows that its lock stayed held and renewed.
        expire = float(sys.argv[4])
        lock = BlobLock(uri, expire=expire, storage_options=options)
        assert lock.acquire(timeout=30)
        remote = keep_alive(uri, lock.owner, storage_options=options)
        # Held too, and never used in the child, which drops it: the parent's store client
        # must outlive the child's copy.
        untouched = BlobLock(uri + "-untouched", expire=expire, storage_options=options)
        assert untouched.acquire(timeout=30)
        say(event="acquired", owner=lock.owner, token=lock.token)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            own = BlobLock(uri + "-child", expire=expire, storage_options=options)
            seen = {
                "held": lock.held,
                "token": lock.token,
                "owner": lock.owner,
                "takes_parents_lock": lock.try_acquire(),
                "remote_lost": remote.lost,
                "takes_own_lock": own.try_acquire(),
                "own_token": own.token,
                "own_release": str(own.release()),
            }
            os.write(write, json.dumps(seen).encode())
            os.close(write)
            del untouched
            gc.collect()
            sys.exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            seen = json.loads(pipe.read() or "{}")
        _, status = os.waitpid(pid, 0)
        say(event="child", exit=os.waitstatus_to_exitcode(status), **seen)
        time.sleep(expire * 2)  # past expiry: only renewals keep it
        say(
            event="parent",
            held=lock.held and untouched.held,
            lost=lock.lost or untouched.lost,
            remote_lost=remote.lost,
        )
        untouched.release()
        remote.stop()
        say(event="released", status=str(lock.release()))
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
