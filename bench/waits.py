"""Waiting for a lock: a handover across processes and between threads, and processes
contending for one lock."""

from __future__ import annotations

import random
import time
import uuid

from common import (
    PEERS,
    Figure,
    Report,
    Served,
    Sizes,
    fmt_time,
    met,
    ratio,
    run_together,
    run_worker,
)
from libs import poll_max


def handover(rep: Report, sz: Sizes, tmp: str) -> None:
    from blob_lock import BlobLock

    expire = sz.handover_expire
    poll = poll_max(expire)
    # The round trip of the local file store: one read of the lockfile.
    probe_uri = f"{tmp}/handover-probe"
    probe = BlobLock(probe_uri, expire=expire)
    assert probe.acquire(5)
    probe.release()
    ts = []
    for _ in range(50):
        t = time.perf_counter()
        probe.inspect()
        ts.append(time.perf_counter() - t)
    rtt = sorted(ts)[len(ts) // 2]
    rng = random.Random(7)
    cross = {}
    for kind in ["blob-lock", *PEERS]:
        rounds = sz.handover_rounds if kind == "blob-lock" else sz.cross_rounds
        cross[kind] = cross_process(kind, f"{tmp}/handover-{kind}", expire, rounds, rng)
    from worker import stats

    rep.figures["handover"] = Figure(
        "Handover across processes on local files: release returned to acquire returned",
        "ecdf",
        cross,
        xlabel="handover",
        log=True,
        note=f"expire {expire:g} s; the holder releases 0.2 to 0.6 s after the waiter began.",
    )
    ours = stats(cross["blob-lock"])
    rep.add(
        f"**handover across processes, local file**, median / p99 / worst of {ours['n']}",
        f"{fmt_time(ours['median'])} / {fmt_time(ours['p99'])} / {fmt_time(ours['max'])}",
        " · ".join(
            f"{k} {fmt_time(median(cross[k]))} / — / {fmt_time(max(cross[k]))}"
            f"{ratio(median(cross[k]), ours['median'])}"
            for k in PEERS
        ),
        "median < 2 ms, p99 < 20 ms",
        met(ours["median"] < 2e-3 and ours["p99"] < 20e-3),
    )
    inproc = {}
    for kind, where in [
        ("blob-lock", f"memory://bench/{uuid.uuid4().hex}"),
        ("blob-lock-file", f"{tmp}/threads-blob"),
        *[(k, f"{tmp}/threads-{k}") for k in PEERS],
    ]:
        real = "blob-lock" if kind == "blob-lock-file" else kind
        inproc[kind] = run_worker(
            "threads", real, where, expire, sz.thread_rounds, rng.randrange(1 << 30)
        )
    for kind, label, peers in [
        ("blob-lock", "memory://", "—"),
        (
            "blob-lock-file",
            "local file",
            " · ".join(
                f"{k} {fmt_time(inproc[k]['max'])} / {fmt_time(inproc[k]['median'])}"
                f"{ratio(inproc[k]['median'], inproc['blob-lock-file']['median'])}"
                for k in PEERS
            ),
        ),
    ]:
        r = inproc[kind]
        rep.add(
            f"handover between threads of one process, {label}, worst / median of {r['n']}",
            f"{fmt_time(r['max'])} / {fmt_time(r['median'])}",
            peers,
            "< 1 ms",
            met(r["max"] < 1e-3),
        )
    rep.notes.append(
        f"Handover: expire {expire:g} s. On local files a waiter wakes when another process "
        "writes the lockfile (inotify, src/store/file/notify.rs); it still polls, at most "
        f"every {fmt_time(poll)} (src/timing.rs), the fallback on NFS and on blob stores, "
        f"where a handover takes at most a poll and a round trip; RTT {fmt_time(rtt)} is one "
        "read of the lockfile. Across processes: the holder and the waiter are processes of "
        "their own, swapping roles each round; the holder releases 0.2 to 0.6 s after the "
        "waiter began waiting; the "
        "handover runs from the moment the holder's `release()` returned to the moment the "
        "waiter's `acquire()` returned, both on CLOCK_MONOTONIC (`time.monotonic()`, one "
        "clock for all processes on Linux). Between threads: two lock objects on one URI, "
        "released 0.2 to 0.6 s after the waiting thread began. Peers poll too: mops every "
        "0.2 s, flufl.lock 0.01 to 2.01 s, filelock 0.05 s; ratios are of medians."
    )


def median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def cross_process(kind: str, where: str, expire: float, rounds: int, rng: random.Random) -> list:
    a, b = Served(kind, where, expire), Served(kind, where, expire)
    try:
        a.send("acquire")
        assert a.line()["event"] == "waiting"
        assert a.line()["ok"]
        holder, waiter = a, b
        out = []
        for _ in range(rounds):
            waiter.send("acquire")
            assert waiter.line()["event"] == "waiting"
            time.sleep(rng.uniform(0.2, 0.6))  # the waiter is waiting, between two polls
            holder.send("release")
            released = holder.line()
            got = waiter.line()
            assert got["event"] == "acquired" and got["ok"], got
            out.append(got["at"] - released["at"])
            holder, waiter = waiter, holder
        holder.send("release")
        holder.line()
        return out
    finally:
        a.close()
        b.close()


def contention(rep: Report, sz: Sizes, tmp: str) -> None:
    res = {k: contend(k, sz, tmp) for k in ["blob-lock", *PEERS]}
    ours = res["blob-lock"]
    rep.measured["lock contention"] = ours
    n, secs = sz.contention_procs, sz.contention_seconds

    def rate(r: dict) -> float:
        return r["acquired"] / secs

    rep.add(
        f"contention: {n} processes on one local-file lock for {secs:g} s, acquisitions/s",
        f"{rate(ours):.1f}",
        " · ".join(f"{k} {rate(res[k]):.1f}{ratio(rate(res[k]), rate(ours))}" for k in PEERS),
    )

    peer_longest = res["filelock"]["longest"]
    ok = ours["starved"] == 0 and ours["longest"] <= peer_longest
    rep.add(
        f"contention: longest wait of any process ({n} processes, {secs:g} s)",
        f"{fmt_time(ours['longest'])}; {n - ours['starved']}/{n} processes acquired, the "
        f"fewest {ours['fewest']} times",
        " · ".join(
            f"{k} {fmt_time(res[k]['longest'])}{ratio(res[k]['longest'], ours['longest'])}, "
            f"{n - res[k]['starved']}/{n} acquired, fewest {res[k]['fewest']}"
            for k in PEERS
        ),
        "all acquire; ≤ filelock's longest wait",
        met(ok),
    )
    rep.figures["contention"] = Figure(
        f"Waits of {n} processes contending for one local-file lock for {secs:g} s",
        "ecdf",
        {k: r["waits"] for k, r in res.items()},
        xlabel="wait for the lock",
        log=True,
        note=f"Each holds {sz.contention_hold * 1e3:g} ms, then pauses "
        f"{sz.contention_gap * 1e3:g} ms; a wait unfinished at the end counts.",
    )
    overlaps = {k: r["overlaps"] for k, r in res.items()}
    rep.notes.append(
        f"Contention: {n} processes per library loop acquire, hold "
        f"{sz.contention_hold * 1e3:g} ms, release, pause {sz.contention_gap * 1e3:g} ms, "
        f"from one start time for {secs:g} s; blob-lock expire {sz.contention_expire:g} s "
        f"(waiters poll at most every {fmt_time(poll_max(sz.contention_expire))}). A wait "
        "still unfinished at the end counts as a wait. On local files blob-lock's waiters "
        "wake at each write of the lockfile (inotify) and race for it; filelock's poll every "
        "50 ms. Exclusion was checked with an O_EXCL "
        f"marker file held while holding the lock; overlaps seen: {overlaps}."
    )


def contend(kind: str, sz: Sizes, tmp: str) -> dict:
    args = [
        "contend",
        kind,
        f"{tmp}/contend-{kind}",
        str(sz.contention_expire),
        str(sz.contention_seconds),
        str(sz.contention_hold),
        str(sz.contention_gap),
        f"{tmp}/contend-{kind}.occupied",
    ]
    timeout = sz.contention_seconds + sz.contention_expire + 120
    # mops logs each race it loses: its stderr to a file.
    results = run_together(args, sz.contention_procs, timeout, f"{tmp}/contend-{kind}.log")
    return {
        "acquired": sum(r["acquired"] for r in results),
        "longest": max(r["longest_wait"] for r in results),
        "starved": sum(1 for r in results if r["acquired"] == 0),
        "fewest": min(r["acquired"] for r in results),
        "overlaps": sum(r["overlaps"] for r in results),
        "waits": [w for r in results for w in r["waits"]],
    }
