"""A semaphore under contention: processes contending for its slots, on local files and on
S3 (moto), with each holder checking that no more than the slots hold at once. No peer
offers a semaphore on blob storage (Consul's `lock -n` needs a Consul cluster), so the rows
have no peers' figures."""

from __future__ import annotations

import json
from pathlib import Path

from common import Figure, Report, Sizes, fmt_time, met, run_together


def semaphore(rep: Report, sz: Sizes, tmp: str, moto: object | None) -> None:
    n, slots, secs = sz.semaphore_procs, sz.semaphore_slots, sz.contention_seconds
    places: dict[str, tuple[str, dict | None]] = {"local files": (f"{tmp}/quota", None)}
    if moto is not None:
        places["S3 (moto)"] = (moto.uri("quota"), moto.storage_options)  # type: ignore[attr-defined]
    waits: dict[str, list[float]] = {}
    # The lock's figures of the same loop, from this run's contention section (local files).
    lock = rep.measured.get("lock contention")
    for where, (prefix, options) in places.items():
        r = contend(prefix, options, sz, f"{tmp}/inside-{len(waits)}")
        waits[where] = r["waits"]
        ok = r["most"] <= slots and r["starved"] == 0
        beside = "no peer on blob storage"
        if lock is not None and where == "local files":
            beside = (
                f"one lock, the same loop: {lock['acquired'] / secs:.1f}/s; "
                f"{fmt_time(lock['longest'])} (contention section)"
            )
        rep.add(
            f"semaphore: {n} processes on {slots} slots for {secs:g} s, {where}: "
            "acquisitions/s; longest wait; most holders at once",
            f"{r['acquired'] / secs:.1f}/s; {fmt_time(r['longest'])}; {r['most']} "
            f"(all {n} acquired, the fewest {r['fewest']} times)"
            if r["starved"] == 0
            else f"{r['acquired'] / secs:.1f}/s; {fmt_time(r['longest'])}; {r['most']} "
            f"({n - r['starved']}/{n} acquired)",
            beside,
            f"≤ {slots} at once; all acquire",
            met(ok),
        )
    rep.figures["semaphore"] = Figure(
        f"Waits of {n} processes for one of {slots} slots, {secs:g} s",
        "ecdf",
        waits,
        xlabel="wait for a slot",
        log=True,
        note=f"Each holds {sz.semaphore_hold * 1e3:g} ms, then pauses "
        f"{sz.contention_gap * 1e3:g} ms; a wait unfinished at the end counts.",
    )
    rep.notes.append(
        f"Semaphore: {n} processes loop: a fresh BlobSemaphore (as users make one per `with`), "
        f"a slot of {slots}, hold {sz.semaphore_hold * 1e3:g} ms, release, pause "
        f"{sz.contention_gap * 1e3:g} ms, from one start time for {secs:g} s, expire "
        f"{sz.contention_expire:g} s. Each holder keeps a file in a shared folder while it "
        "holds a slot and counts the files there: the most it saw is the 'most holders' "
        "figure. Waiters read one slot and the number per poll; a release in the same process "
        "wakes them, and on local files so does one in another process (inotify); on S3 it "
        "is found by the next poll."
    )


def contend(prefix: str, options: dict | None, sz: Sizes, inside: str) -> dict:
    Path(inside).mkdir(parents=True, exist_ok=True)
    args = [
        "slots",
        prefix,
        str(sz.semaphore_slots),
        str(sz.contention_expire),
        str(sz.contention_seconds),
        str(sz.semaphore_hold),
        str(sz.contention_gap),
        inside,
        json.dumps(options or {}),
    ]
    timeout = sz.contention_seconds + sz.contention_expire + 120
    results = run_together(args, sz.semaphore_procs, timeout)
    return {
        "acquired": sum(r["acquired"] for r in results),
        "longest": max(r["longest_wait"] for r in results),
        "most": max(r["most_inside"] for r in results),
        "starved": sum(1 for r in results if r["acquired"] == 0),
        "fewest": min(r["acquired"] for r in results),
        "waits": [w for r in results for w in r["waits"]],
    }
