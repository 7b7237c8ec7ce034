"""The benchmark's measuring processes; bench/run.py starts them, one measurement each, so
that no measurement shares a process (its threads, its memory) with another. Each prints
JSON lines on stdout; the last one is its result.

    worker.py uncontended KIND WHERE N [STORAGE_OPTIONS_JSON]
    worker.py latency PROTOCOL URI_PREFIX N STORAGE_OPTIONS_JSON
    worker.py trace KIND WHERE N           (run under strace by run.py)
    worker.py serve KIND WHERE EXPIRE      (commands on stdin: acquire, release, quit)
    worker.py threads KIND WHERE EXPIRE ROUNDS SEED
    worker.py contend KIND WHERE EXPIRE DURATION HOLD GAP OCCUPIED_MARKER
    worker.py scale KIND N WINDOW EXPIRE ROOT
    worker.py slots PREFIX SLOTS EXPIRE DURATION HOLD GAP INSIDE_DIR STORAGE_OPTIONS_JSON

Times are ``time.monotonic()``, which on Linux is CLOCK_MONOTONIC, one clock for every
process on the machine: a time taken in one process compares with one taken in another.
"""

from __future__ import annotations

import gc
import json
import math
import os
import random
import resource
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from libs import make


def say(**kw: object) -> None:
    print(json.dumps(kw), flush=True)


def stats(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    n = len(s)
    return {
        "n": n,
        "median": s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2,
        "p99": s[max(0, math.ceil(0.99 * n) - 1)],
        "max": s[-1],
        "min": s[0],
        "mean": sum(s) / n,
    }


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def status_kb(field: str) -> int:
    """A field of /proc/self/status in kB (RssAnon: heap, stacks and other anonymous
    memory; not the shared library's code pages, which a debug build has many of)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


# -- uncontended acquire + release ------------------------------------------------------


def uncontended(kind: str, where: str, n: int, options: dict | None, fresh: bool) -> None:
    """``n`` acquire + release of one lock, timed from Python. ``fresh``: a new lock object
    each time, as users write it (``with BlobLock(uri): pass``; each peer's own ``with`` or
    acquire and release on a new object); otherwise one object taken again and again."""
    kw = {"storage_options": options} if options else {}
    if fresh and kind == "blob-lock":
        from blob_lock import BlobLock

        def once() -> bool:
            with BlobLock(where, expire=30.0, **kw):
                pass
            return True
    elif fresh:

        def once() -> bool:
            lock = make(kind, where, 30.0, **kw)
            ok = lock.acquire(5.0)
            lock.release()
            return ok
    else:
        lock = make(kind, where, 30.0, **kw)

        def once() -> bool:
            ok = lock.acquire(5.0)
            lock.release()
            return ok

    for _ in range(max(5, n // 10)):  # warm up: runtime, store client, page cache
        assert once()
    samples = []
    clock = time.perf_counter
    for _ in range(n):
        t = clock()
        ok = once()
        samples.append(clock() - t)
        assert ok
    say(result={**stats(samples), "samples": samples})


def floor_cycle(kind: str, where: str) -> Callable[[], None]:
    """The system calls of one uncontended acquire+release, replayed from Python with no
    lock library in between: what the file system alone costs each protocol.

    - ``cas`` (blob-lock, a lock taken again): twice an update-if-match, each one exclusive
      flock on the guard file, a read of the lockfile (open, fstat, read, close), a new
      temporary file (create, write, fstat, close), an exchange with the lockfile and an
      unlink of the old one.
    - ``link`` (flufl.lock): a claim file created and written, linked to the lock name,
      stat-ed, then both names unlinked.
    """
    import ctypes
    import fcntl

    libc = ctypes.CDLL(None, use_errno=True)
    os.makedirs(where, exist_ok=True)
    lockfile, guard = f"{where}/lock.json", f"{where}/.lock.json.guard"
    body = b"x" * 320  # about a lockfile's size
    with open(lockfile, "wb") as f:
        f.write(body)
    # Names no other process uses, as blob-lock's and flufl.lock's are: a name another round
    # used before in this folder is found in the kernel's cache of names, a new one is not.
    names = iter(range(10**9))
    stem = f"{uuid.uuid4().int >> 64:016x}-{os.getpid():x}-"

    def create(path: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, body)
        os.fstat(fd)
        os.close(fd)

    def update() -> None:
        g = os.open(guard, os.O_RDWR | os.O_CREAT)
        fcntl.flock(g, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fd = os.open(lockfile, os.O_RDONLY)
        os.fstat(fd)
        os.read(fd, 4096)
        os.close(fd)
        tmp = f"{where}/.lock.json.{stem}{next(names):x}.tmp"
        create(tmp)
        if libc.renameat2(-100, tmp.encode(), -100, lockfile.encode(), 2) != 0:  # EXCHANGE
            raise OSError(ctypes.get_errno(), "renameat2")
        os.unlink(tmp)
        os.close(g)

    def cas() -> None:
        update()
        update()

    def link() -> None:
        claim, lock = f"{where}/flufl.lck.{stem}{next(names):x}", f"{where}/flufl.lck"
        create(claim)
        os.link(claim, lock)
        os.stat(claim)
        os.unlink(lock)
        os.unlink(claim)

    return {"cas": cas, "link": link}[kind]


def floor(kind: str, where: str, n: int) -> None:
    """``n`` cycles of ``floor_cycle(kind, where)``, timed."""
    cycle = floor_cycle(kind, where)
    for _ in range(max(5, n // 10)):
        cycle()
    samples = []
    clock = time.perf_counter
    for _ in range(n):
        t = clock()
        cycle()
        samples.append(clock() - t)
    say(result={**stats(samples), "samples": samples})


# Cycles in each turn of `paired`.
PAIR_TURN = 20


def paired(where: str, n: int) -> None:
    """The cas floor and a fresh ``with BlobLock(uri): pass`` in one process, ``PAIR_TURN``
    cycles each in turn (which goes first alternates): both meet the same moment's file
    system and caches, so their ratio is not one process's luck against another's (the
    medians of single processes moved by ±25 % from one to the next). Each turn's ratio of
    medians, and both sample lists."""
    from blob_lock import BlobLock

    ours_at = f"{where}/blob-lock"
    floor_once = floor_cycle("cas", f"{where}/floor")

    def ours() -> None:
        with BlobLock(ours_at, expire=30.0):
            pass

    for _ in range(max(5, n // 10)):
        floor_once()
        ours()
    clock = time.perf_counter
    floors: list[float] = []
    oursamples: list[float] = []
    ratios = []
    for turn in range(max(1, n // PAIR_TURN)):
        f: list[float] = []
        o: list[float] = []
        order = [(floor_once, f), (ours, o)]
        for cycle, out in order if turn % 2 == 0 else order[::-1]:
            for _ in range(PAIR_TURN):
                t = clock()
                cycle()
                out.append(clock() - t)
        floors += f
        oursamples += o
        ratios.append(stats(o)["median"] / stats(f)["median"])
    say(result={"floor": floors, "ours": oursamples, "ratios": ratios})


def latency(protocol: str, prefix: str, n: int, options: dict) -> None:
    """On a store behind a delay: the round trip (one read of a missing lockfile, by a
    lock's own ``inspect()``, on a warm connection), then acquire + release of ``n`` new
    locks, then ``n`` of one lock acquired again after its own release."""
    from blob_lock import BlobLock

    def lock(name: str) -> BlobLock:
        return BlobLock(f"{prefix}/{name}", expire=30.0, protocol=protocol, storage_options=options)

    probe = lock("missing")
    for _ in range(3):
        probe.inspect()
    clock = time.perf_counter
    rtts = []
    for _ in range(n):
        t = clock()
        probe.inspect()
        rtts.append(clock() - t)
    fresh = []
    for i in range(n):
        one = lock(f"fresh-{i}")
        t = clock()
        assert one.acquire(30.0)
        one.release()
        fresh.append(clock() - t)
    again = []
    one = lock("again")
    assert one.acquire(30.0)
    one.release()
    for _ in range(n):
        t = clock()
        assert one.acquire(30.0)
        one.release()
        again.append(clock() - t)
    say(result={"rtt": stats(rtts), "fresh": stats(fresh), "again": stats(again)})


def sockets() -> set[str]:
    """This process's open sockets."""
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(target)
    return found


def clients(prefix: str, n: int, options: dict | None) -> None:
    """Locks made as users make them, on a store already in use: what constructing one
    costs and whether it opens a connection."""
    from blob_lock import BlobLock

    clock = time.perf_counter
    with BlobLock(f"{prefix}/warm", storage_options=options):
        pass  # the store is in use: its client is built and its conditional writes checked
    before = sockets()
    made = []
    built = []
    for i in range(n):
        t = clock()
        made.append(BlobLock(f"{prefix}/made-{i}", storage_options=options))
        built.append(clock() - t)
    opened = len(sockets() - before)
    say(
        result={
            "construct": stats(built),
            "sockets_opened": opened,
        }
    )


def trace(kind: str, where: str, n: int) -> None:
    """Under strace: one acquire + release of a new lock, then ``n`` of the same lock, each
    iteration begun by a failing stat of ``<where>.mark-<i>`` that marks it in the trace."""
    lock = make(kind, where, 30.0)
    for i in range(n + 1):
        try:
            os.stat(f"{where}.mark-{i}")
        except FileNotFoundError:
            pass
        assert lock.acquire(5.0)
        lock.release()
    try:
        os.stat(f"{where}.mark-end")
    except FileNotFoundError:
        pass
    say(result="done")


# -- handover ---------------------------------------------------------------------------


def serve(kind: str, where: str, expire: float) -> None:
    """One lock, driven by commands on stdin: the cross-process handover."""
    lock = make(kind, where, expire)
    if kind == "blob-lock":
        # A first call sets the runtime up, so that the timed acquisitions do not.
        lock.lock.inspect()
    say(event="ready")
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "acquire":
            say(event="waiting", at=time.monotonic())
            ok = lock.acquire(None)
            say(event="acquired", ok=ok, at=time.monotonic())
        elif cmd == "release":
            t0 = time.monotonic()
            lock.release()
            say(event="released", began=t0, at=time.monotonic())
        elif cmd == "quit":
            break


def threads(kind: str, where: str, expire: float, rounds: int, seed: int) -> None:
    """Two locks on one URI in one process: a holder releases, a waiting thread acquires.
    The handover is from the moment ``release()`` returned to the moment the waiter's
    ``acquire()`` returned (negative when the waiter got in before release returned)."""
    rng = random.Random(seed)
    holder, waiter = make(kind, where, expire), make(kind, where, expire)
    assert holder.acquire(5.0)
    holder.release()
    handovers = []
    for _ in range(rounds):
        assert holder.acquire(5.0)
        got: dict[str, float] = {}
        started = threading.Event()

        def wait(got: dict[str, float] = got, started: threading.Event = started) -> None:
            started.set()
            assert waiter.acquire(60.0)
            got["at"] = time.monotonic()
            waiter.release()

        t = threading.Thread(target=wait)
        t.start()
        started.wait()
        # Long enough for the waiter to be between polls, at a random phase of them.
        time.sleep(rng.uniform(0.2, 0.6))
        holder.release()
        released = time.monotonic()
        t.join(120)
        handovers.append(got["at"] - released)
    say(result=stats(handovers), samples=handovers)


# -- contention -------------------------------------------------------------------------


def contend(
    kind: str,
    where: str,
    expire: float,
    duration: float,
    hold: float,
    gap: float,
    marker: str,
) -> None:
    """Loops acquire, hold ``hold`` s, release, pause ``gap`` s, from a start time given on
    stdin until ``duration`` later. Records each wait and checks exclusion: while it holds
    the lock it owns the marker file, created with O_EXCL (an overlap fails to create it)."""
    lock = make(kind, where, expire)
    say(event="ready")
    start = float(sys.stdin.readline().split()[1])
    end = start + duration
    time.sleep(max(0.0, start - time.monotonic()))
    waits: list[float] = []
    overlaps = 0
    unfinished = 0.0
    while True:
        t0 = time.monotonic()
        left = end - t0
        if left <= 0:
            break
        if not lock.acquire(left):
            unfinished = time.monotonic() - t0  # still waiting at the end: counts as a wait
            break
        waits.append(time.monotonic() - t0)
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.close(fd)
            mine = True
        except FileExistsError:
            overlaps += 1
            mine = False
        time.sleep(hold)
        if mine:
            os.unlink(marker)
        lock.release()
        if gap:
            time.sleep(gap)
    longest = max([*waits, unfinished]) if waits or unfinished else 0.0
    say(
        result={
            "acquired": len(waits),
            "longest_wait": longest,
            "unfinished_wait": unfinished,
            "mean_wait": sum(waits) / len(waits) if waits else None,
            "overlaps": overlaps,
            "waits": waits + ([unfinished] if unfinished else []),
        }
    )


def slots(
    prefix: str,
    n: int,
    expire: float,
    duration: float,
    hold: float,
    gap: float,
    inside: str,
    options: dict | None,
) -> None:
    """Loops: a fresh ``BlobSemaphore`` (as users make one per ``with``), a slot, hold
    ``hold`` s, release, pause ``gap`` s, from a start time given on stdin until ``duration``
    later. Each holder checks the bound itself: while it holds a slot it has a file in
    ``inside``, and counts the files there (more than ``n`` would be a broken semaphore)."""
    from blob_lock import BlobSemaphore, LockTimeout

    say(event="ready")
    start = float(sys.stdin.readline().split()[1])
    end = start + duration
    time.sleep(max(0.0, start - time.monotonic()))
    waits: list[float] = []
    most = 0
    unfinished = 0.0
    me = Path(inside) / f"{os.getpid()}"
    while True:
        t0 = time.monotonic()
        left = end - t0
        if left <= 0:
            break
        semaphore = BlobSemaphore(prefix, n, expire=expire, storage_options=options)
        try:
            slot = semaphore.acquire(timeout=left)
        except LockTimeout:
            unfinished = time.monotonic() - t0  # still waiting at the end: counts as a wait
            break
        waits.append(time.monotonic() - t0)
        me.touch()
        most = max(most, len(os.listdir(inside)))
        time.sleep(hold)
        me.unlink()
        slot.release()
        if gap:
            time.sleep(gap)
    say(
        result={
            "acquired": len(waits),
            "longest_wait": max([*waits, unfinished]) if waits or unfinished else 0.0,
            "most_inside": most,
            "waits": waits + ([unfinished] if unfinished else []),
        }
    )


# -- scale ------------------------------------------------------------------------------


def scale(kind: str, n: int, window: float, expire: float, root: str) -> None:
    if kind == "mops":
        return scale_mops(n, window, expire, root)
    from blob_lock import BlobLock

    warm = BlobLock(f"{root}/warm", expire=expire)
    assert warm.acquire(5.0)
    warm.release()
    gc.collect()
    anon0 = status_kb("RssAnon")
    t = time.monotonic()
    locks = [BlobLock(f"{root}/{i}", expire=expire) for i in range(n)]
    for lock in locks:
        assert lock.try_acquire()
    acquiring = time.monotonic() - t
    heartbeat = locks[0].heartbeat
    time.sleep(heartbeat * 1.5)  # the first heartbeats are under way
    cpu0, t0 = cpu_seconds(), time.monotonic()
    time.sleep(window)
    cpu1, t1 = cpu_seconds(), time.monotonic()
    gc.collect()
    anon1 = status_kb("RssAnon")
    held = sum(1 for lock in locks if lock.held)
    lost = sum(1 for lock in locks if lock.lost)
    # Renewals happened: the last write of a sample of locks is younger than a heartbeat
    # and a bit (inspected after the window, so that reading costs no CPU in it).
    now = time.time()
    ages = []
    for lock in random.Random(1).sample(locks, min(50, n)):
        seen = lock.inspect()
        ages.append(now - seen.written_at.timestamp())
    beats = (t1 - t0) / heartbeat * n
    say(
        result={
            "locks": n,
            "held": held,
            "lost": lost,
            "heartbeat": heartbeat,
            "acquire_all_s": acquiring,
            "window_s": t1 - t0,
            "cpu_s": cpu1 - cpu0,
            "heartbeats": beats,
            "cpu_per_heartbeat_us": (cpu1 - cpu0) / beats * 1e6,
            "anon_kb_per_lock": (anon1 - anon0) / n,
            "oldest_sampled_write_s": max(ages),
        }
    )


def scale_mops(n: int, window: float, expire: float, root: str) -> None:
    """mops's lease maintenance daemon holding ``n`` leases on local files (mops has no
    in-memory store). Each lease renews every ``expire / 2``. Renewals are counted by
    wrapping each lease's ``maintain``; a gap longer than ``expire`` between two renewals
    of a lease means others could have seen it expired."""
    from concurrent.futures import ThreadPoolExecutor
    from datetime import timedelta

    from thds.mops.pure.core import lease
    from thds.mops.pure.core.lease import maintain as mops_maintain

    def acquire(i: int) -> object:
        held = lease.acquire(
            f"{root}/{i}", expire=timedelta(seconds=expire), debug=False, block=timedelta(0)
        )
        assert held is not None
        return held

    acquire(-1).release()  # warm up
    gc.collect()
    anon0 = status_kb("RssAnon")
    guard = threading.Lock()
    renewals = [0]
    last: dict[int, float] = {}
    worst_gap = [0.0]
    counting = [False]

    def counted(i: int, held: object) -> None:
        inner = held.maintain  # type: ignore[attr-defined]

        def maintain() -> None:
            inner()
            now = time.monotonic()
            with guard:
                if counting[0]:
                    renewals[0] += 1
                    worst_gap[0] = max(worst_gap[0], now - last.get(i, now))
                last[i] = now

        held.maintain = maintain  # type: ignore[attr-defined]

    t = time.monotonic()
    # mops's acquisition sleeps (it waits twice its write time before reading back), so
    # acquire in parallel, or 10,000 of them take minutes.
    with ThreadPoolExecutor(16) as pool:
        helds = list(pool.map(acquire, range(n)))
    now = time.monotonic()
    for i, held in enumerate(helds):
        last[i] = now
        counted(i, held)
        mops_maintain.add_lease_to_maintenance_daemon(held)  # type: ignore[arg-type]
    acquiring = time.monotonic() - t
    period = expire * mops_maintain._MAINTENANCE_MARGIN
    time.sleep(period * 1.5)
    with guard:
        counting[0] = True
        start_last = dict(last)
    cpu0, t0 = cpu_seconds(), time.monotonic()
    time.sleep(window)
    cpu1, t1 = cpu_seconds(), time.monotonic()
    with guard:
        counting[0] = False
        done = renewals[0]
        # A lease not renewed since the window began has a gap up to now.
        stale = (
            max(t1 - start_last.get(i, t0) for i in range(n) if last[i] <= t0)
            if any(last[i] <= t0 for i in range(n))
            else 0.0
        )
        gap = max(worst_gap[0], stale)
    gc.collect()
    anon1 = status_kb("RssAnon")
    expected = (t1 - t0) / period * n
    say(
        result={
            "locks": n,
            "heartbeat": period,
            "acquire_all_s": acquiring,
            "window_s": t1 - t0,
            "cpu_s": cpu1 - cpu0,
            "heartbeats": done,
            "heartbeats_due": expected,
            "cpu_per_heartbeat_us": (cpu1 - cpu0) / done * 1e6 if done else None,
            "anon_kb_per_lock": (anon1 - anon0) / n,
            "longest_gap_s": gap,
            "threads": threading.active_count(),
        }
    )


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "uncontended":
        options = json.loads(args[4]) if len(args) > 4 else None
        uncontended(args[0], args[1], int(args[2]), options, args[3] == "fresh")
    elif mode == "floor":
        floor(args[0], args[1], int(args[2]))
    elif mode == "paired":
        paired(args[0], int(args[1]))
    elif mode == "latency":
        latency(args[0], args[1], int(args[2]), json.loads(args[3]))
    elif mode == "trace":
        trace(args[0], args[1], int(args[2]))
    elif mode == "clients":
        clients(args[0], int(args[1]), json.loads(args[2]) if len(args) > 2 else None)
    elif mode == "serve":
        serve(args[0], args[1], float(args[2]))
    elif mode == "threads":
        threads(args[0], args[1], float(args[2]), int(args[3]), int(args[4]))
    elif mode == "contend":
        contend(
            args[0],
            args[1],
            float(args[2]),
            float(args[3]),
            float(args[4]),
            float(args[5]),
            args[6],
        )
    elif mode == "slots":
        slots(
            args[0],
            int(args[1]),
            float(args[2]),
            float(args[3]),
            float(args[4]),
            float(args[5]),
            args[6],
            json.loads(args[7]) or None,
        )
    elif mode == "scale":
        scale(args[0], int(args[1]), float(args[2]), float(args[3]), args[4])
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
