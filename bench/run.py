"""The benchmark: blob-lock beside thds-mops's lease, flufl.lock and filelock.

    .venv/bin/python bench/run.py [--quick] [--out FILE] [--only SECTION,...]

Prints the machine, the date and the build, then ONE markdown table: each figure of
blob-lock, the peers' figures beside it with their ratio to ours (peer / blob-lock: above
1 a peer takes longer, or more requests, or more memory), the target and whether it is met.
Notes under the table say how each figure was taken. ``make bench`` builds a release
extension first; figures of a debug build mean nothing (the header says which it is).

Sections (``--only``): headline, requests, latency, handover, scale, contention.
Every measurement runs in a process of its own (bench/worker.py); moto's S3 server and the
proxies in front of it (bench/moto_store.py) run here.
"""

# ruff: noqa: RUF001 (the table's ratios use the multiplication sign)
from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from libs import poll_max  # noqa: E402

WORKER = str(HERE / "worker.py")
PEERS = ["flufl.lock", "filelock", "mops"]
SECTIONS = ["headline", "requests", "latency", "clients", "handover", "scale", "contention"]


# -- sizes --------------------------------------------------------------------------------


@dataclass
class Sizes:
    uncontended: int = 2000  # acquire+release per library (mops: a tenth: 15 ms each)
    latency: int = 30  # acquire+release on moto behind the delay, per protocol
    clients: int = 200  # locks made, and `with` blocks, per store in the clients section
    delay: float = 0.02  # the fault proxy's delay, each chunk each way
    count_rounds: int = 20  # acquire+release counted per case
    trace_rounds: int = 10  # acquire+release under strace
    handover_expire: float = 5.0
    cross_rounds: int = 20  # cross-process handovers per peer
    handover_rounds: int = 100  # and of blob-lock's
    thread_rounds: int = 30
    scale_locks: int = 10_000
    mops_scale_locks: int | None = None  # None: the same as scale_locks
    scale_window: float = 20.0
    scale_expire: float = 3.0
    contention_procs: int = 16
    contention_seconds: float = 30.0
    contention_expire: float = 10.0
    contention_hold: float = 0.01
    contention_gap: float = 0.01

    @classmethod
    def quick(cls) -> Sizes:
        return cls(
            uncontended=200,
            latency=8,
            clients=30,
            count_rounds=5,
            trace_rounds=3,
            cross_rounds=3,
            handover_rounds=20,
            thread_rounds=5,
            scale_locks=200,
            scale_window=3.0,
            contention_seconds=3.0,
        )


# -- formatting ---------------------------------------------------------------------------


def fmt_time(s: float | None) -> str:
    if s is None:
        return "n/a"
    a = abs(s)
    if a < 1e-3:
        return f"{s * 1e6:.0f} µs" if a >= 1e-5 else f"{s * 1e6:.1f} µs"
    if a < 1:
        return f"{s * 1e3:.1f} ms" if a < 0.1 else f"{s * 1e3:.0f} ms"
    return f"{s:.2f} s"


def fmt_num(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "n/a"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{digits}f}"


def ratio(peer: float | None, ours: float | None) -> str:
    if peer is None or ours is None or ours == 0:
        return ""
    r = peer / ours
    return f" (×{r:.2g})" if r < 10 else f" (×{r:,.0f})"


@dataclass
class Row:
    measure: str
    ours: str
    peers: str = "—"
    target: str = "—"
    verdict: str = "—"


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    took: dict[str, float] = field(default_factory=dict)  # seconds per section

    def add(self, *a: str, **kw: str) -> None:
        self.rows.append(Row(*a, **kw))

    def failed(self, section: str, e: BaseException) -> None:
        self.add(f"{section}: not measured", f"error: {type(e).__name__}: {e}"[:200])


def met(ok: bool | None) -> str:
    if ok is None:
        return "n/a"
    return "met" if ok else "**missed**"


# -- running workers ----------------------------------------------------------------------


def run_worker(*args: object, timeout: float = 600, env: dict | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, WORKER, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    result = None
    for line in out.stdout.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if "result" in d:
            result = d["result"]
    if out.returncode != 0 or result is None:
        raise RuntimeError(
            f"worker {' '.join(map(str, args[:2]))} failed ({out.returncode}): "
            + (out.stderr.strip().splitlines() or ["no output"])[-1]
        )
    return result


class Served:
    """A ``worker.py serve`` process: one lock driven by commands."""

    def __init__(self, kind: str, where: str, expire: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, WORKER, "serve", kind, where, str(expire)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # mops logs each race it loses
            text=True,
            bufsize=1,
        )
        assert self.line()["event"] == "ready"

    def send(self, cmd: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def line(self) -> dict:
        assert self.proc.stdout is not None
        text = self.proc.stdout.readline()
        if not text:
            raise RuntimeError(f"serve worker exited with {self.proc.wait()}")
        return json.loads(text)

    def close(self) -> None:
        try:
            self.send("quit")
            self.proc.wait(30)
        except Exception:
            self.proc.kill()
            self.proc.wait()


# -- the machine ----------------------------------------------------------------------------


def elf_has_debug_info(path: Path) -> bool | None:
    """Whether an ELF64 file has a .debug_info section: a debug build (maturin develop
    without --release) has one; the release profile strips debug info."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:
                return None
            shoff = struct.unpack_from("<Q", head, 0x28)[0]
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            sections = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
            _, _, _, _, stroff, strsize = sections[shstrndx]
            f.seek(stroff)
            names = f.read(strsize)
        for name_off, *_ in sections:
            end = names.index(b"\0", name_off)
            if names[name_off:end] == b".debug_info":
                return True
        return False
    except (OSError, ValueError, struct.error):
        return None


def fs_type(path: str) -> str:
    best, kind = "", "unknown"
    real = os.path.realpath(path)
    for line in Path("/proc/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        mount = parts[1]
        if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) > len(best):
            best, kind = mount, parts[2]
    return kind


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine(tmp: str) -> list[str]:
    import blob_lock
    from blob_lock import _blob_lock

    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem_kb = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    so = Path(_blob_lock.__file__)
    debug = elf_has_debug_info(so)
    build = {True: "DEBUG build (figures are not meaningful)", False: "release build"}.get(
        debug, "build unknown"
    )
    load = os.getloadavg()
    return [
        f"- date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {cpu}, {os.cpu_count()} CPUs, {mem_kb / 1024 / 1024:.1f} GiB, "
        f"{platform.system()} {platform.release()}, load average at start "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        f"- Python {platform.python_version()}; blob-lock {blob_lock.__version__}, {build} "
        f"({so.name}, {so.stat().st_size / 1e6:.0f} MB); thds-mops {version('thds.mops')}, "
        f"flufl.lock {version('flufl.lock')}, filelock {version('filelock')}, "
        f"moto {version('moto')}",
        f"- local files in {tmp} ({fs_type(tmp)})",
    ]


# -- sections -------------------------------------------------------------------------------


# The uncontended loops run in this many rounds, each library (and each floor) once per
# round in turn: this VM's speed drifts 10-20 % over minutes, which would favour whichever
# library happened to run in a fast minute. Each round starts one further along the list,
# so that no library always follows the same one: on a file system without a journal,
# files deleted by the run before slow the next one's file creation (BENCHMARKS.md).
ROUNDS = 5


def headline(rep: Report, sz: Sizes, tmp: str, moto) -> None:
    """The pattern users write, a fresh ``with BlobLock(uri): pass`` each time, beside one
    object reused and the peers' fresh figures, on local files, memory:// and moto."""
    from worker import stats

    runs = [("uncontended", kind, "fresh") for kind in ["blob-lock", *PEERS]]
    runs += [("uncontended", "blob-lock", "reused")]
    runs += [("floor", kind, "") for kind in ["cas", "link"]]
    samples: dict[tuple[str, str, str], list[float]] = {run: [] for run in runs}
    for r in range(ROUNDS):
        for what, kind, mode in runs[r % len(runs) :] + runs[: r % len(runs)]:
            n = sz.uncontended // ROUNDS
            if kind == "mops":
                n = max(4, n // 10)
            args = (what, kind, f"{tmp}/{what}-{kind}-{mode}", n) + ((mode,) if mode else ())
            samples[what, kind, mode] += run_worker(*args)["samples"]
    fresh = {kind: stats(samples["uncontended", kind, "fresh"]) for kind in ["blob-lock", *PEERS]}
    reused = stats(samples["uncontended", "blob-lock", "reused"])
    floors = {kind: stats(samples["floor", kind, ""]) for kind in ["cas", "link"]}
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
    rep.add(
        "the file system alone: the system calls of one acquire+release, replayed from Python, "
        f"median (n={floors['cas']['n']})",
        f"cas {fmt_time(floors['cas']['median'])}",
        f"flufl.lock's link protocol {fmt_time(floors['link']['median'])}"
        f"{ratio(floors['link']['median'], floors['cas']['median'])}",
    )
    rep.notes.append(
        "Headline: a fresh lock object each time (blob-lock `with BlobLock(uri): pass`, the "
        "peers a new object acquired and released), against one blob-lock object acquired and "
        "released in a loop; after a tenth as many warm-up rounds, timed from Python with "
        f"perf_counter, in {ROUNDS} rounds that take the libraries in turn, each round "
        "starting one further along (a fresh process each); blob-lock cas, expire 30 s, mops "
        "`lease.acquire(debug=False)` + `.release()` (no maintenance daemon; fewer rounds, "
        "about 15 ms each), flufl.lock `lock()` + `unlock()`, filelock `acquire()` + "
        "`release()` (flock; not a lease). The file system alone (bench/worker.py `floor`): "
        "cas is two update-if-match, each a guard flock, a read of the lockfile, a new "
        "temporary file, an exchange and an unlink (blob-lock leaves the unlink to a thread "
        "of its own, off the caller's path); flufl.lock's protocol a claim file created, "
        "linked, stat-ed, then two unlinks."
    )


def requests(rep: Report, sz: Sizes, tmp: str, moto) -> None:
    from blob_lock import BlobLock
    from count_proxy import breakdown

    so = moto.storage_options
    moto.faults.delay(0)
    n = sz.count_rounds

    def count(protocol: str, case: str) -> tuple[float, str]:
        reqs = []
        # One round unmeasured first: the process guesses whether a lock without a record of
        # its own release is new from the last such lock (docs/operations.md, "Requests per
        # lock"), so each case is measured in a run of its kind.
        for i in range(n + 1):
            uri = moto.uri()
            first = BlobLock(uri, expire=30, protocol=protocol, storage_options=so)
            if case == "elsewhere":
                elsewhere(uri, protocol, so)
            elif case != "new":
                assert first.acquire(30)
                first.release()
            lock = (
                first
                if case != "other"
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
    ]
    for protocol in ["cas", "lww"]:
        for case, label in cases:
            per, parts = count(protocol, case)
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
        "Store requests: counted on the wire by tests/count_proxy.py between blob-lock and "
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
        "tests/fault_proxy.py's FaultProxy with its delay made a link's (bench/moto_store.py "
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


def scale(rep: Report, sz: Sizes, tmp: str) -> None:
    n, window, expire = sz.scale_locks, sz.scale_window, sz.scale_expire
    n_mops = sz.mops_scale_locks or n
    timeout = 600 + n / 10
    mem = run_worker(
        "scale",
        "blob-lock",
        n,
        window,
        expire,
        f"memory://scale-{uuid.uuid4().hex[:8]}",
        timeout=timeout,
    )
    fil = run_worker("scale", "blob-lock", n, window, expire, f"{tmp}/scale-blob", timeout=timeout)
    try:
        mops = run_worker(
            "scale",
            "mops",
            n_mops,
            window,
            expire,
            f"{tmp}/scale-mops",
            timeout=timeout + n_mops / 20,
        )
    except Exception as e:  # mops may not hold this many: say so, beside ours
        mops = None
        rep.notes.append(f"mops's maintenance daemon with {n_mops} leases failed: {e}")

    def mops_cell(key: str, unit: str, ours_value: float) -> str:
        if mops is None or mops.get(key) is None:
            return "mops: not measured"
        v = mops[key]
        shown = f"{v:.1f} µs" if unit == "µs" else f"{v:.2f} KB"
        return f"mops (file://, {mops['locks']:,} leases) {shown}{ratio(v, ours_value)}"

    rep.add(
        f"CPU per heartbeat, {n:,} locks held on memory://",
        f"{mem['cpu_per_heartbeat_us']:.1f} µs",
        mops_cell("cpu_per_heartbeat_us", "µs", mem["cpu_per_heartbeat_us"]),
        "≤ 10 µs",
        met(mem["cpu_per_heartbeat_us"] <= 10),
    )
    rep.add(
        f"memory per held lock, {n:,} locks on memory://",
        f"{mem['anon_kb_per_lock']:.2f} KB",
        mops_cell("anon_kb_per_lock", "KB", mem["anon_kb_per_lock"]),
        "≤ 4 KB",
        met(mem["anon_kb_per_lock"] <= 4),
    )
    rep.add(
        f"CPU per heartbeat / memory per lock, {n:,} locks held on local files",
        f"{fil['cpu_per_heartbeat_us']:.1f} µs / {fil['anon_kb_per_lock']:.2f} KB",
        files_vs_mops(mops, fil),
    )
    for label, r in [("memory://", mem), ("local files", fil)]:
        rep.notes.append(
            f"Scale, blob-lock on {label}: {r['held']:,} of {r['locks']:,} held and {r['lost']} "
            f"lost after the window; heartbeat {r['heartbeat']:g} s (expire {expire:g} s); "
            f"{r['heartbeats']:,.0f} heartbeats due in {r['window_s']:.1f} s took "
            f"{r['cpu_s']:.2f} s of process CPU (all threads); the oldest last write of 50 "
            f"sampled locks was {r['oldest_sampled_write_s']:.2f} s old; acquiring them all "
            f"took {r['acquire_all_s']:.1f} s."
        )
    if mops is not None:
        late = mops["longest_gap_s"] > expire
        rep.notes.append(
            f"Scale, mops: {mops['locks']:,} leases on local files (mops has no in-memory "
            f"store) in its maintenance daemon ({mops['threads']} threads), renewing every "
            f"{mops['heartbeat']:g} s: {mops['heartbeats']:,} renewals done of "
            f"{mops['heartbeats_due']:,.0f} due in {mops['window_s']:.1f} s, "
            f"{mops['cpu_s']:.2f} s of CPU; longest gap between two renewals of a lease "
            f"{mops['longest_gap_s']:.2f} s"
            + (" — longer than expire: others could have taken leases over" if late else "")
            + f"; acquiring them all took {mops['acquire_all_s']:.1f} s (16 threads)."
        )
    rep.notes.append(
        "Scale: CPU is the process's user + system time (getrusage) over the window, "
        "divided by the heartbeats due in it (window / heartbeat × locks for blob-lock, "
        "renewals counted for mops); memory is the growth of RssAnon (anonymous resident "
        "memory: heap and stacks, not the library's code pages) from before the locks were "
        "made to after the window, divided by the locks, Python objects included."
    )


def files_vs_mops(mops: dict | None, fil: dict) -> str:
    if not mops or mops.get("cpu_per_heartbeat_us") is None:
        return "mops: not measured"
    cpu, kb = mops["cpu_per_heartbeat_us"], mops["anon_kb_per_lock"]
    return (
        f"mops {cpu:.1f} µs{ratio(cpu, fil['cpu_per_heartbeat_us'])} / "
        f"{kb:.2f} KB{ratio(kb, fil['anon_kb_per_lock'])}"
    )


def contention(rep: Report, sz: Sizes, tmp: str) -> None:
    res = {k: contend(k, sz, tmp) for k in ["blob-lock", *PEERS]}
    ours = res["blob-lock"]
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
    where = f"{tmp}/contend-{kind}"
    marker = f"{tmp}/contend-{kind}.occupied"
    log = open(f"{tmp}/contend-{kind}.log", "w")
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                WORKER,
                "contend",
                kind,
                where,
                str(sz.contention_expire),
                str(sz.contention_seconds),
                str(sz.contention_hold),
                str(sz.contention_gap),
                marker,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,  # mops logs each race it loses
            text=True,
            bufsize=1,
        )
        for _ in range(sz.contention_procs)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            if not line or json.loads(line).get("event") != "ready":
                log.flush()
                tail = Path(log.name).read_text().strip().splitlines()[-1:]
                raise RuntimeError(f"a {kind} contention worker did not start: {tail}")
        start = time.monotonic() + 0.5
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(f"go {start}\n")
            p.stdin.flush()
        results = []
        for p in procs:
            assert p.stdout is not None
            out, _ = p.communicate(timeout=sz.contention_seconds + sz.contention_expire + 120)
            results.append(json.loads(out.strip().splitlines()[-1])["result"])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        log.close()
    return {
        "acquired": sum(r["acquired"] for r in results),
        "longest": max(r["longest_wait"] for r in results),
        "starved": sum(1 for r in results if r["acquired"] == 0),
        "fewest": min(r["acquired"] for r in results),
        "overlaps": sum(r["overlaps"] for r in results),
    }


# -- main -------------------------------------------------------------------------------------


def render(header: list[str], rep: Report, elapsed: float, quick: bool) -> str:
    out = ["# blob-lock benchmark" + (" (--quick: small sizes)" if quick else ""), ""]
    out += header
    took = ", ".join(f"{name} {s:.0f} s" for name, s in rep.took.items())
    out += [f"- run time {elapsed:.0f} s ({took})", ""]
    out.append("| measure | blob-lock | peers (× = peer / blob-lock) | target | result |")
    out.append("|---|---|---|---|---|")
    for r in rep.rows:
        cells = [c.replace("|", "\\|") for c in (r.measure, r.ours, r.peers, r.target, r.verdict)]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out += [f"- {n}" for n in rep.notes]
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: a minute or two")
    ap.add_argument("--only", help="comma-separated sections: " + ", ".join(SECTIONS))
    ap.add_argument("--out", help="also write the report (markdown) to this file")
    ap.add_argument("--tmp", help="where the local-file locks go (default: the temp dir)")
    ap.add_argument(
        "--serial-delay",
        action="store_true",
        help="inject the delay with tests/fault_proxy.py as it is (each chunk waits in turn) "
        "instead of as a fixed latency per direction (bench/moto_store.py's DelayLine)",
    )
    for name, kind in [
        ("scale-locks", int),
        ("mops-scale-locks", int),
        ("scale-window", float),
        ("contention-procs", int),
        ("contention-seconds", float),
        ("contention-expire", float),
        ("handover-expire", float),
        ("delay", float),
        ("clients", int),
    ]:
        ap.add_argument(f"--{name}", type=kind)
    args = ap.parse_args()
    sz = Sizes.quick() if args.quick else Sizes()
    for name in [
        "scale_locks",
        "mops_scale_locks",
        "scale_window",
        "contention_procs",
        "contention_seconds",
        "contention_expire",
        "handover_expire",
        "delay",
        "clients",
    ]:
        if getattr(args, name) is not None:
            setattr(sz, name, getattr(args, name))
    sections = args.only.split(",") if args.only else SECTIONS
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown sections: {', '.join(sorted(unknown))}")

    tmp = tempfile.mkdtemp(prefix="blob-lock-bench-", dir=args.tmp)
    started = time.monotonic()
    header = machine(tmp)
    rep = Report()
    moto = None
    try:
        if {"headline", "requests", "latency", "clients"} & set(sections):
            from moto_store import Moto

            moto = Moto(link=not args.serial_delay)
        for section in sections:
            print(f"[bench] {section} ...", file=sys.stderr, flush=True)
            began = time.monotonic()
            try:
                if section == "headline":
                    headline(rep, sz, tmp, moto)
                elif section == "requests":
                    requests(rep, sz, tmp, moto)
                elif section == "latency":
                    latency(rep, sz, moto)
                elif section == "clients":
                    clients(rep, sz, moto)
                elif section == "handover":
                    handover(rep, sz, tmp)
                elif section == "scale":
                    scale(rep, sz, tmp)
                elif section == "contention":
                    contention(rep, sz, tmp)
            except Exception as e:  # one section's failure leaves the others' figures
                rep.failed(section, e)
            rep.took[section] = time.monotonic() - began
    finally:
        if moto is not None:
            moto.close()
        shutil.rmtree(tmp, ignore_errors=True)
    text = render(header, rep, time.monotonic() - started, args.quick)
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    main()
