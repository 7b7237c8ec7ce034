# ruff: noqa: RUF001 (the table's ratios use the multiplication sign)
"""blob_lock.joblib's Memory beside plain joblib.Memory: a hit, a miss (locks on local files and
on S3 through moto), and four processes missing the same call whose function works for a
while: the CPU-seconds they spend in all, and how long until all four have the result.

The section runs in bench/run.py's process (``bench/run.py --only joblib``); each
measurement runs in processes of their own, this file as their ``__main__`` (so joblib keys
the cached function the same in each):

    joblib_memo.py calls CASE N LOCATION OPTIONS_JSON
        CASE ``hit`` (one call, cached) or ``miss`` (a new argument each time): N calls of
        each Memory in turns of BLOCK calls, plain joblib's and ours, each on a cache of
        its own under LOCATION; ours with OPTIONS_JSON. Prints both kinds' samples.
    joblib_memo.py work KIND LOCATION SECONDS START OPTIONS_JSON
        At monotonic time START, calls ``work(1)``, which spends SECONDS of CPU, through
        KIND's Memory (``plain`` or ``blob``). Prints the CPU-seconds and the wall time the
        call took in this process, and whether this process computed it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Report, Sizes, fmt_time, met, ratio, version

SCRIPT = str(Path(__file__).resolve())
ROUNDS = 5  # processes per case, one after the other (the VM's speed drifts over minutes)
BLOCK = 50  # calls of one kind before the other's, within a process
PROCESSES = 4


def joblib_memory(rep: Report, sz: Sizes, tmp: str, moto: object | None) -> None:
    from worker import stats

    places = {"local files": "{}"}
    if moto is not None:
        so = moto.storage_options  # type: ignore[attr-defined]
        places["S3 (moto)"] = json.dumps(
            {"lock_prefix": moto.uri("joblib"), "storage_options": so}  # type: ignore[attr-defined]
        )
    # A hit never reaches the locks: measured with them on local files only.
    runs = [("hit", "local files")] + [("miss", where) for where in places]
    for case, where in runs:
        n = sz.joblib_calls // (4 if "moto" in where else 1)
        ours: list[float] = []
        plain: list[float] = []
        ratios: list[float] = []
        for r in range(ROUNDS):
            cache = f"{tmp}/joblib-{case}-{where.split()[0]}-{r}"
            got = _run(["calls", case, str(n), cache, places[where]])
            ours += got["blob"]
            plain += got["plain"]
            ratios.append(stats(got["blob"])["median"] / stats(got["plain"])["median"])
        o, p = stats(ours), stats(plain)
        turn = sorted(ratios)[len(ratios) // 2]
        label = "a hit (the call cached)" if case == "hit" else "a miss (a new call)"
        rep.add(
            f"joblib: {label}, blob_lock.joblib.Memory with its locks on {where}, median / p99 "
            f"(n={o['n']}); median of the {ROUNDS} processes' ratios of medians",
            f"{fmt_time(o['median'])} / {fmt_time(o['p99'])}; ×{turn:.2f}",
            f"joblib.Memory {fmt_time(p['median'])} / {fmt_time(p['p99'])}"
            f"{ratio(p['median'], o['median'])}",
            "≤ 1.2× plain joblib's" if case == "hit" else "—",
            met(turn <= 1.2) if case == "hit" else "—",
        )
    n = sz.count_rounds
    if moto is not None:
        per, parts = miss_requests(moto, f"{tmp}/joblib-counted", n)
        rep.add(
            "joblib: store requests per miss (a new call) of blob_lock.joblib.Memory with its "
            "locks on S3 (moto), counted on the wire; per hit",
            f"{per:g} = {parts}; 0",
            "—",
            "≤ 2 per miss (a new lock's create, its release); 0 per hit",
            met(per <= 2),
        )
    work = sz.joblib_work
    spent = {kind: _together(kind, f"{tmp}/joblib-work-{kind}", work) for kind in ("blob", "plain")}
    ours_cpu, plain_cpu = (sum(d["cpu"] for d in spent[k]) for k in ("blob", "plain"))
    wall = {k: max(d["wall"] for d in spent[k]) for k in spent}
    computed = {k: sum(d["computed"] for d in spent[k]) for k in spent}
    rep.add(
        f"joblib: {PROCESSES} processes missing one call whose function spends {work:g} s "
        "of CPU, locks on local files: CPU-seconds in all; until all have the result; "
        "computations",
        f"{ours_cpu:.2f} s; {wall['blob']:.2f} s; {computed['blob']}",
        f"joblib.Memory {plain_cpu:.2f} s; {wall['plain']:.2f} s; {computed['plain']}"
        f"{ratio(plain_cpu, ours_cpu)}",
        f"≤ 1.2 × {work:g} s of CPU; one computation",
        met(ours_cpu <= 1.2 * work and computed["blob"] == 1),
    )
    rep.notes.append(
        f"joblib {version('joblib')}: a hit and a miss timed with perf_counter in one process "
        f"per round ({ROUNDS} rounds), plain joblib.Memory's calls and blob_lock.joblib.Memory's "
        f"in turns of {BLOCK}, each on a cache of its own (local files), after a tenth as many "
        f"unmeasured calls; a hit is one cached call of a function returning its argument, a "
        f"miss a new argument each time (the function returns at once: what is left is joblib's "
        f"hashing and writing, and, for ours, the look again and the lock's acquire and release, "
        f"on local files or on moto through the bench's proxies with a quarter as many calls). "
        f"Requests: counted on the wire in front of moto over {n} misses, then the same {n} "
        f"calls again as hits. The work: {PROCESSES} processes told one start time, each calling "
        f"the function (a loop spending {work:g} s of its process's CPU); CPU-seconds are each "
        f"process's process_time over its call (every thread, blob-lock's included), the wall "
        f"time the longest call."
    )


def miss_requests(moto: object, location: str, n: int) -> tuple[float, str]:
    """Store requests per miss, and what they were, with the locks on moto; a hit's must be
    none (checked: a hit that made one fails the section)."""
    from count_proxy import breakdown

    counter = moto.counter  # type: ignore[attr-defined]
    cached = memory(
        "blob",
        location,
        {"lock_prefix": moto.uri("joblib-counted"), "storage_options": moto.storage_options},  # type: ignore[attr-defined]
    ).cache(echo)
    cached(-1)  # the store's check of conditional writes, once per process: not counted
    mark = counter.snapshot()
    for x in range(n):
        cached(x)
    misses = counter.since(mark)
    mark = counter.snapshot()
    for x in range(n):
        cached(x)
    hits = counter.since(mark)
    if hits:
        raise RuntimeError(f"{len(hits)} store requests in {n} hits: {breakdown(hits)}")
    return len(misses) / n, breakdown(misses, n)


def _run(args: list[str]) -> dict:
    from common import run_worker

    return run_worker(*args, script=SCRIPT)


def _together(kind: str, location: str, work: float) -> list[dict]:
    start = time.monotonic() + 3.0  # the processes' imports come first
    procs = [
        subprocess.Popen(
            [sys.executable, SCRIPT, "work", kind, location, str(work), str(start), "{}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(PROCESSES)
    ]
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"a joblib work process failed ({p.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1])["result"])
    return out


# -- the processes ------------------------------------------------------------------------


def echo(x):
    return x


def work(x):
    global COMPUTED
    COMPUTED = True
    began = time.process_time()
    while time.process_time() - began < float(os.environ["BENCH_WORK"]):
        pass
    return x


COMPUTED = False


def memory(kind: str, location: str, options: dict):
    if kind == "plain":
        import joblib

        return joblib.Memory(location, verbose=0)
    from blob_lock.joblib import Memory

    return Memory(location, verbose=0, **options)


def calls(case: str, n: int, location: str, options: dict) -> None:
    cached = {
        kind: memory(kind, f"{location}/{kind}", options if kind == "blob" else {}).cache(echo)
        for kind in ("plain", "blob")
    }
    samples: dict[str, list[float]] = {"plain": [], "blob": []}
    warm = max(BLOCK, n // 10)
    fresh = iter(range(10**9))
    for f in cached.values():
        for _ in range(warm):
            f(0 if case == "hit" else next(fresh))
    for block in range(0, n, BLOCK):
        turn = ("plain", "blob") if (block // BLOCK) % 2 == 0 else ("blob", "plain")
        for kind in turn:
            f = cached[kind]
            for _ in range(min(BLOCK, n - block)):
                x = 0 if case == "hit" else next(fresh)
                began = time.perf_counter()
                f(x)
                samples[kind].append(time.perf_counter() - began)
    print(json.dumps({"result": samples}), flush=True)


def work_once(kind: str, location: str, seconds: str, start: str, options: dict) -> None:
    os.environ["BENCH_WORK"] = seconds
    cached = memory(kind, location, options).cache(work)
    time.sleep(max(0.0, float(start) - time.monotonic()))
    cpu, wall = time.process_time(), time.monotonic()
    cached(1)
    cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    print(json.dumps({"result": {"cpu": cpu, "wall": wall, "computed": COMPUTED}}), flush=True)


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "calls":
        calls(args[0], int(args[1]), args[2], json.loads(args[3]))
    elif mode == "work":
        work_once(args[0], args[1], args[2], args[3], json.loads(args[4]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
