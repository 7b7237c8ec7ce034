"""What one lock costs when nobody contends: time per acquire+release (the headline), store
requests (counted on the wire, and file store calls from syscalls), latency on moto, and
what making a lock costs on a store in use."""

# ruff: noqa: RUF001 (the table's ratios use the multiplication sign)
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from common import (
    PEERS,
    WORKER,
    Figure,
    Report,
    Sizes,
    fmt_time,
    met,
    ratio,
    run_worker,
)

# The uncontended loops run in this many rounds, each library (and each floor) once per
# round in turn: this VM's speed drifts 10-20 % over minutes, which would favour whichever
# library happened to run in a fast minute. Each round starts one further along the list,
# so that no library always follows the same one: on a file system without a journal,
# files deleted by the run before slow the next one's file creation (BENCHMARKS.md, "Where it
# gives"). Many
# short rounds rather than a few long ones: a process's own luck (where its files land,
# what the run before left) moved the medians of five rounds by ±15 %.
ROUNDS = 15


def headline(rep: Report, sz: Sizes, tmp: str, moto) -> None:
    """The pattern users write, a fresh ``with BlobLock(uri): pass`` each time, beside one
    object reused and the peers' fresh figures, on local files, memory:// and moto."""
    from worker import PAIR_TURN, stats

    runs = [("uncontended", kind, "fresh") for kind in ["blob-lock", *PEERS]]
    runs += [("uncontended", "blob-lock", "reused")]
    runs += [("floor", "link", ""), ("paired", "cas", "")]
    samples: dict[tuple[str, str, str], list[float]] = {run: [] for run in runs}
    beside, ratios = [], []  # the paired runs' fresh `with`, and each turn's ratio
    for r in range(ROUNDS):
        for what, kind, mode in runs[r % len(runs) :] + runs[: r % len(runs)]:
            n = sz.uncontended // ROUNDS
            if kind == "mops":
                n = max(4, n // 10)
            if what == "paired":
                got = run_worker(what, f"{tmp}/paired", n)
                samples[what, kind, mode] += got["floor"]
                beside += got["ours"]
                ratios += got["ratios"]
                continue
            args = (what, kind, f"{tmp}/{what}-{kind}-{mode}", n) + ((mode,) if mode else ())
            samples[what, kind, mode] += run_worker(*args)["samples"]
    fresh = {kind: stats(samples["uncontended", kind, "fresh"]) for kind in ["blob-lock", *PEERS]}
    reused = stats(samples["uncontended", "blob-lock", "reused"])
    floors = {"cas": stats(samples["paired", "cas", ""])}
    floors["link"] = stats(samples["floor", "link", ""])
    ours = fresh["blob-lock"]
    for stat in ["median", "p99"]:
        o = ours[stat]
        peers = " · ".join(
            [f"reused {fmt_time(reused[stat])}{ratio(reused[stat], o)}"]
            + [f"{k} {fmt_time(fresh[k][stat])}{ratio(fresh[k][stat], o)}" for k in PEERS]
        )
        ok = fresh["flufl.lock"][stat] >= o and fresh["mops"][stat] / o >= 50
        rep.add(
            f"**fresh `with BlobLock(uri): pass`, local files**, {stat} (n={ours['n']})",
            fmt_time(o),
            peers,
            "≤ flufl.lock fresh; mops ≥ 50× ours",
            met(ok),
        )
    rep.figures["latency"] = Figure(
        "A fresh lock acquired and released on local files, each library",
        "ecdf",
        {
            "blob-lock": samples["uncontended", "blob-lock", "fresh"],
            "blob-lock, reused": samples["uncontended", "blob-lock", "reused"],
            **{k: samples["uncontended", k, "fresh"] for k in PEERS},
        },
        xlabel="acquire + release",
        log=True,
        note="Left is faster. blob-lock: `with BlobLock(uri): pass`; reused: one object.",
    )
    mem = f"memory://bench/{uuid.uuid4().hex}"
    m = {mode: run_worker("uncontended", "blob-lock", mem, sz.uncontended, mode) for mode in
         ["fresh", "reused"]}  # fmt: skip
    rep.add(
        f"**fresh `with BlobLock(uri): pass`, memory://** (no I/O), median (n={m['fresh']['n']})",
        fmt_time(m["fresh"]["median"]),
        f"reused {fmt_time(m['reused']['median'])}"
        f"{ratio(m['reused']['median'], m['fresh']['median'])}",
    )
    if moto is not None:
        so = json.dumps(moto.storage_options)
        moto.faults.delay(sz.delay)
        try:
            s3 = {mode: run_worker("uncontended", "blob-lock", moto.uri(), sz.clients, mode, so)
                  for mode in ["fresh", "reused"]}  # fmt: skip
        finally:
            moto.faults.delay(0)
        f, u = s3["fresh"]["median"], s3["reused"]["median"]
        rep.add(
            f"**fresh `with BlobLock(uri): pass`, S3 (moto) +{sz.delay * 1e3:g} ms delay**, "
            f"median (n={s3['fresh']['n']})",
            fmt_time(f),
            f"reused {fmt_time(u)}{ratio(u, f)}; fresh / reused ×{f / u:.2f}",
            "fresh ≤ 1.2× reused",
            met(f / u <= 1.2),
        )
    floor, turns = floors["cas"]["median"], sorted(ratios)
    paired = turns[len(turns) // 2]
    rep.add(
        "the file system alone: the system calls of one acquire+release, replayed from Python, "
        f"median (n={floors['cas']['n']})",
        f"cas {fmt_time(floor)}, and a fresh `with` in turns with it in the same processes "
        f"{fmt_time(stats(beside)['median'])}: ×{paired:.2f} of it (median of "
        f"{len(turns)} turns; quartiles ×{turns[len(turns) // 4]:.2f}-"
        f"×{turns[3 * len(turns) // 4]:.2f}; the fresh `with` above: "
        f"×{ours['median'] / floor:.2f})",
        f"flufl.lock's link protocol {fmt_time(floors['link']['median'])}"
        f"{ratio(floors['link']['median'], floor)}",
        "fresh `with` ≤ 1.2× the cas floor",
        met(paired <= 1.2),
    )
    rep.notes.append(
        "Headline: a fresh lock object each time (blob-lock `with BlobLock(uri): pass`, the "
        "peers a new object acquired and released), against one blob-lock object acquired and "
        "released in a loop; after a tenth as many warm-up rounds, timed from Python with "
        f"perf_counter, in {ROUNDS} rounds that take the libraries in turn, each round "
        "starting one further along (a fresh process each); blob-lock cas, expire 30 s, mops "
        "`lease.acquire(debug=False)` + `.release()` (no maintenance daemon; fewer rounds, "
        "about 15 ms each), flufl.lock `lock()` + `unlock()`, filelock `acquire()` + "
        "`release()` (flock; not a lease). The file system alone (bench/worker.py `floor_cycle`): "
        "cas is two update-if-match, each a guard flock, a read of the lockfile, a new "
        "temporary file, an exchange and an unlink (blob-lock leaves the unlink to a thread "
        "of its own, off the caller's path, except on ext4 without a journal); flufl.lock's "
        "protocol a claim file created, linked, stat-ed, then two unlinks; file names as "
        "unique to each process as the libraries' own. The cas floor runs in each round "
        f"in one process with a fresh blob-lock `with`, in turns of {PAIR_TURN} cycles "
        "(bench/worker.py `paired`): the ratio is the median of the turns' ratios of medians."
    )


def requests(rep: Report, sz: Sizes, tmp: str, moto) -> None:
    from blob_lock import BlobLock
    from count_proxy import breakdown

    so = moto.storage_options
    moto.faults.delay(0)
    n = sz.count_rounds

    def count(protocol: str, case: str) -> tuple[float, str]:
        reqs = []
        # One round unmeasured first: the process guesses whether a lock without a receipt of
        # its own release is new from the last such lock (docs/operations.md, "Requests per
        # lock"), so each case is measured in a run of its kind.
        for i in range(n + 1):
            uri = moto.uri()
            first = BlobLock(uri, expire=30, protocol=protocol, storage_options=so)
            if case != "new" and case != "elsewhere":
                assert first.acquire(30)
                first.release()
            if case in ("elsewhere", "stale"):
                elsewhere(uri, protocol, so)
            lock = (
                first
                if case not in ("other", "stale")
                else BlobLock(uri, expire=30, protocol=protocol, storage_options=so)
            )
            mark = moto.counter.snapshot()
            assert lock.acquire(30)
            lock.release()
            if i:
                reqs += moto.counter.since(mark)
        return len(reqs) / n, breakdown(reqs, n)

    # The process checks the store's conditional writes once, before its first cas write:
    # counted on its own, then out of the way of the per-lock figures.
    mark = moto.counter.snapshot()
    with BlobLock(moto.uri(), storage_options=so):
        pass
    probe = [
        r for r in moto.counter.since(mark) if ".blob-lock-probe-" in r.path or "?delete" in r.path
    ]
    rep.add(
        "store requests of the check of a store's conditional writes, once per process",
        f"{len(probe)} = {breakdown(probe)}",
        "—",
        "≤ 4",
        met(len(probe) <= 4),
    )
    traced = trace_counts(sz, tmp)
    cases = [
        ("new", "a new lock, in a run of new locks"),
        ("same", "the same lock again, after its own release"),
        ("other", "a fresh BlobLock on a lock this process released last"),
        (
            "elsewhere",
            "a fresh BlobLock on a lock another process released last, in a run of such locks",
        ),
        (
            "stale",
            "a fresh BlobLock on a lock this process released, then another process took and "
            "released (a stale receipt), in a run of such locks",
        ),
    ]
    per_case: dict[str, list[float]] = {"cas": [], "lww": []}
    for protocol in ["cas", "lww"]:
        for case, label in cases:
            per, parts = count(protocol, case)
            per_case[protocol].append(per)
            target, verdict = "—", "—"
            if protocol == "cas" and case in ("new", "same", "other"):
                target, verdict = "≤ 2 (conditional write, release)", met(per <= 2)
            elif protocol == "cas":
                target, verdict = "≤ 3 (read, conditional write, release)", met(per <= 3)
            peer = "—"
            if case == "new" and "mops" in traced:
                m = traced["mops"]
                peer = (
                    f"mops (S3 n/a; on local files, from syscalls): {m['calls']:g}"
                    f"{ratio(m['calls'], per)} = {m['parts']}"
                )
            rep.add(
                f"store requests per acquire+release on S3 (moto), {protocol}, {label}",
                f"{per:g} = {parts}",
                peer,
                target,
                verdict,
            )
    rep.figures["requests"] = Figure(
        "Store requests per acquire + release on S3 (moto), by what the lock was before",
        "bars",
        per_case,
        ylabel="requests",
        groups=[
            "new",
            "again,\nsame object",
            "released here,\nfresh object",
            "released by\nanother process",
            "stale receipt\nof our release",
        ],
        note="Counted on the wire by a proxy in front of moto.",
    )
    for kind, label in [("blob-lock", "cas"), ("blob-lock-lww", "lww")]:
        t = traced.get(kind)
        if t is None:
            continue
        rep.add(
            f"local file store calls per acquire+release, {label} (from syscalls)",
            f"new lock {t['new_calls']:g} = {t['new_parts']}; again {t['calls']:g} = "
            f"{t['parts']}; {t['syscalls']:g} syscalls on the lock's files",
            f"mops {traced['mops']['calls']:g} = {traced['mops']['parts']}; "
            f"{traced['mops']['syscalls']:g} syscalls"
            if "mops" in traced
            else "—",
        )
    if "error" in traced:
        rep.notes.append(f"Local file store calls not counted: {traced['error']}.")
    rep.notes.append(
        "Store requests: counted on the wire by tests/proxies/count_proxy.py between blob-lock and "
        "moto's S3 server, over "
        f"{n} acquire+release each; read = GET, create = PUT If-None-Match, update = PUT "
        "If-Match, overwrite = unconditional PUT. Local files and memory:// cannot be "
        "counted from Python (no hook into the Rust store); the local-file rows infer store "
        "calls from an strace of the worker: read = open of lock.json, create = link onto "
        "lock.json, replace = rename onto lock.json (blob-lock's update-if-match, or a plain "
        "overwrite; mops writes by rename). 'again' is the same lock object re-acquired. "
        "The store's check (its four requests: create, create again, an update with a "
        "version that never existed, a delete, which object_store sends as S3's bulk "
        "delete, a POST) is counted on its own, before the other rows."
    )


def elsewhere(uri: str, protocol: str, so: dict) -> None:
    """Acquires and releases ``uri`` in another process."""
    code = (
        "import json, sys; from blob_lock import BlobLock\n"
        "with BlobLock(sys.argv[1], protocol=sys.argv[2], storage_options=json.loads(sys.argv[3])):"
        " pass"
    )
    subprocess.run([sys.executable, "-c", code, uri, protocol, json.dumps(so)], check=True)


def trace_counts(sz: Sizes, tmp: str) -> dict:
    """Store calls on local files, inferred from syscalls (strace)."""
    if shutil.which("strace") is None:
        return {"error": "strace is not installed"}
    out: dict = {}
    for kind in ["blob-lock", "blob-lock-lww", "mops"]:
        where = f"{tmp}/trace-{kind}-{uuid.uuid4().hex[:8]}"
        log = f"{where}.strace"
        proc = subprocess.run(
            [
                "strace",
                "-f",
                "-y",
                "-qq",
                "-o",
                log,
                sys.executable,
                WORKER,
                "trace",
                kind,
                where,
                str(sz.trace_rounds),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if proc.returncode != 0:
            return {"error": f"strace failed: {(proc.stderr.strip().splitlines() or [''])[-1]}"}
        # One segment per marked iteration. What follows the end mark (the sweeper's last
        # removals, the exit's flush) is no iteration: its syscalls are spread over the
        # repeated ones, which left those files.
        segments: list[list[str]] = []
        tail: list[str] = []
        cur: list[str] | None = None
        for line in Path(log).read_text(errors="replace").splitlines():
            if f"{where}.mark-end" in line:
                cur = tail
                continue
            if f"{where}.mark-" in line:
                cur = []
                segments.append(cur)
                continue
            if cur is not None and where + "/" in line:
                cur.append(line)
        if len(segments) < 2:
            return {"error": "strace showed no marked iterations"}
        per = [classify(seg, where) for seg in segments]
        again = per[1:]
        tail_syscalls = classify(tail, where)[1]
        calls = sum(sum(p[0].values()) for p in again) / len(again)
        merged: dict[str, int] = {}
        for p in again:
            for k, v in p[0].items():
                merged[k] = merged.get(k, 0) + v
        out[kind] = {
            "new_calls": sum(per[0][0].values()),
            "new_parts": parts_str(per[0][0], 1),
            "calls": calls,
            "parts": parts_str(merged, len(again)),
            "syscalls": (sum(p[1] for p in again) + tail_syscalls) / len(again),
        }
        os.unlink(log)
    return out


_OPEN = re.compile(r'open(?:at)?\(.*"([^"]+)", (O_[A-Z_|]+)')
_LINK = re.compile(r'link(?:at)?\(.*"([^"]+)",.*"([^"]+)"')
_RENAME = re.compile(r'rename(?:at2?)?\(.*"([^"]+)",.*"([^"]+)"')


def classify(lines: list[str], where: str) -> tuple[dict[str, int], int]:
    calls = {"read": 0, "create": 0, "replace": 0}
    syscalls = 0
    for line in lines:
        if "resumed>" in line:
            continue  # the second half of a call strace split (counted at its start)
        syscalls += 1
        name = line.split(None, 1)[1] if line[:1].isdigit() else line
        lockfile = "/lock.json"
        if name.startswith(("open(", "openat(")):
            m = _OPEN.search(name)
            if m and m.group(1).endswith(lockfile) and "O_RDONLY" in m.group(2):
                calls["read"] += 1
        elif name.startswith(("link(", "linkat(")):
            m = _LINK.search(name)
            if m and m.group(2).endswith(lockfile):
                calls["create"] += 1
        elif name.startswith(("rename(", "renameat(", "renameat2(")):
            m = _RENAME.search(name)
            if m and m.group(2).endswith(lockfile):
                calls["replace"] += 1
    return calls, syscalls


def parts_str(calls: dict[str, int], n: int) -> str:
    return " + ".join(f"{k} {v / n:g}" for k, v in calls.items() if v) or "none"


def latency(rep: Report, sz: Sizes, moto) -> None:
    so = json.dumps(moto.storage_options)
    moto.faults.delay(sz.delay)
    try:
        res = {p: run_worker("latency", p, moto.uri(), sz.latency, so) for p in ["cas", "lww"]}
    finally:
        moto.faults.delay(0)
    for protocol in ["cas", "lww"]:
        r = res[protocol]
        rtt = r["rtt"]["median"]
        for case, label in [("fresh", "a new lock"), ("again", "the same lock again")]:
            t = r[case]["median"]
            target, verdict = "—", "—"
            if protocol == "cas" and case == "fresh":
                target, verdict = "≤ 3.2 RTT", met(t / rtt <= 3.2)
            rep.add(
                f"acquire+release on moto, +{sz.delay * 1e3:g} ms delay, {protocol}, {label} "
                f"(median of {r[case]['n']})",
                f"{t / rtt:.2f} RTT ({fmt_time(t)}; RTT {fmt_time(rtt)})",
                "no peer reaches S3",
                target,
                verdict,
            )
    rep.notes.append(
        f"Latency on moto: a fixed latency of {sz.delay * 1e3:g} ms each way, injected by "
        "tests/proxies/fault_proxy.py's FaultProxy with its delay made a link's "
        "(bench/moto_store.py "
        "DelayLine: each chunk passes on that long after it arrived; FaultProxy's own delay "
        "makes chunks wait in turn, so a round trip costs two or three delays depending on "
        "how the bytes are split; `--serial-delay` uses it as it is). RTT is the median of "
        "one GET of a missing lockfile by a lock's own "
        "`inspect()` on a warm connection, in the same process as the acquisitions; lww's "
        "figures include its settle wait (500 ms at expire 30 s). The proxies add their own "
        "hops on loopback."
    )


def clients(rep: Report, sz: Sizes, moto) -> None:
    """Locks as users make them: a fresh BlobLock for every `with`, on a store in use."""
    so = json.dumps(moto.storage_options)
    memory = run_worker("clients", f"memory://bench-{uuid.uuid4().hex[:8]}", sz.clients)
    moto.faults.delay(sz.delay)
    try:
        s3 = run_worker("clients", moto.uri(), sz.clients, so)
    finally:
        moto.faults.delay(0)
    for where, r in [("S3 (moto)", s3), ("memory://", memory)]:
        c = r["construct"]["median"]
        rep.add(
            f"constructing a BlobLock on a {where} store in use (median of {r['construct']['n']})",
            f"{fmt_time(c)}; {r['sockets_opened']} sockets opened",
            "—",
            "< 50 µs, no connection" if where.startswith("S3") else "—",
            met(c < 50e-6 and r["sockets_opened"] == 0) if where.startswith("S3") else "—",
        )
    rep.notes.append(
        "Clients: the locks are made in one process after a first lock has used the store "
        "(its client built, its conditional writes checked); sockets are the process's open "
        "ones before and after the constructions."
    )
