"""What every section of the benchmark shares: the sizes, the report and its formatting,
the worker processes every measurement runs in, and the machine the header describes."""

# ruff: noqa: RUF001 (the table's ratios use the multiplication sign)
from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))


WORKER = str(HERE / "worker.py")
PEERS = ["flufl.lock", "filelock", "mops"]

# -- sizes --------------------------------------------------------------------------------


@dataclass
class Sizes:
    """The default: the headline table in about 10 minutes here (docs/figures/table.md's
    header gives each section's time). ``--full`` is the longer run of 2026-11-24 (about 20
    minutes): more rounds, mops's daemon at 10,000 leases, contention for 30 s."""

    uncontended: int = 2000  # acquire+release per library (mops: a tenth: 15 ms each)
    latency: int = 15  # acquire+release on moto behind the delay, per protocol
    clients: int = 200  # locks made, and `with` blocks, per store in the clients section
    delay: float = 0.02  # the fault proxy's delay, each chunk each way
    count_rounds: int = 10  # acquire+release counted per case
    trace_rounds: int = 5  # acquire+release under strace
    handover_expire: float = 5.0
    cross_rounds: int = 10  # cross-process handovers per peer
    handover_rounds: int = 50  # and of blob-lock's
    thread_rounds: int = 15
    scale_locks: int = 10_000
    mops_scale_locks: int | None = 2_000  # None: the same as scale_locks
    scale_window: float = 10.0
    scale_expire: float = 3.0
    contention_procs: int = 16
    contention_seconds: float = 15.0
    contention_expire: float = 10.0
    contention_hold: float = 0.01
    contention_gap: float = 0.01
    semaphore_procs: int = 16
    semaphore_slots: int = 4
    semaphore_hold: float = 0.05
    prefect_cycles: int = 1000  # acquire+release per Prefect lock manager and case
    joblib_calls: int = 1000  # calls of each Memory per process, hits and misses (S3: 1/4)
    joblib_work: float = 2.0  # CPU-seconds of the call four processes miss at once
    load_locks_6: int = 3000  # past the store's capacity at expire 6 (bench/load.py)
    load_locks_30: int = 8000  # and at the default expire
    load_heartbeats: float = 3.0  # held for this many heartbeats

    @classmethod
    def full(cls) -> Sizes:
        return cls(
            latency=30,
            count_rounds=20,
            trace_rounds=10,
            cross_rounds=20,
            handover_rounds=100,
            thread_rounds=30,
            mops_scale_locks=None,
            scale_window=20.0,
            contention_seconds=30.0,
        )

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
            mops_scale_locks=None,
            scale_window=3.0,
            contention_seconds=3.0,
            load_locks_6=1500,
            load_locks_30=3000,
            load_heartbeats=2.0,
            prefect_cycles=100,
            joblib_calls=200,
            joblib_work=1.0,
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
class Figure:
    """A section's raw figures for a picture (bench/figures.py draws it). ``ecdf``: samples
    in seconds per series, drawn as their distribution; ``bars``: one value per group in
    each series."""

    title: str
    kind: str
    series: dict[str, list[float]]
    xlabel: str = ""
    ylabel: str = ""
    groups: list[str] = field(default_factory=list)
    log: bool = False
    note: str = ""


def run_together(
    args: list[str], n: int, timeout: float, log_path: str | None = None
) -> list[dict]:
    """``n`` workers started with ``args`` (bench/worker.py's), each waited for until it says
    it is ready, then told one start time half a second on, so that they begin together;
    each one's result (its last JSON line). Their stderr goes to ``log_path``, whose last line
    explains a worker that did not start."""
    log = open(log_path or os.devnull, "w")
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            bufsize=1,
        )
        for _ in range(n)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            line = p.stdout.readline()
            if not line or json.loads(line).get("event") != "ready":
                log.flush()
                tail = Path(log_path).read_text().strip().splitlines()[-1:] if log_path else []
                raise RuntimeError(f"a {args[0]} worker did not start: {tail}")
        start = time.monotonic() + 0.5
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(f"go {start}\n")
            p.stdin.flush()
        results = []
        for p in procs:
            out, _ = p.communicate(timeout=timeout)
            results.append(json.loads(out.strip().splitlines()[-1])["result"])
        return results
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        log.close()


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    took: dict[str, float] = field(default_factory=dict)  # seconds per section
    figures: dict[str, Figure] = field(default_factory=dict)  # by file name, without .svg
    # Results one section leaves for another to set beside its own (the lock's contention
    # beside the semaphore's).
    measured: dict[str, dict] = field(default_factory=dict)

    def add(self, *a: str, **kw: str) -> None:
        self.rows.append(Row(*a, **kw))

    def failed(self, section: str, e: BaseException) -> None:
        self.add(f"{section}: not measured", f"error: {type(e).__name__}: {e}"[:200])


def met(ok: bool | None) -> str:
    if ok is None:
        return "n/a"
    return "met" if ok else "**missed**"


# -- running workers ----------------------------------------------------------------------


def run_worker(
    *args: object, timeout: float = 600, env: dict | None = None, script: str = WORKER
) -> dict:
    """Runs ``script`` (bench/worker.py unless told) with ``args``: its last result line."""
    out = subprocess.run(
        [sys.executable, script, *map(str, args)],
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


# The first line of a report (at level 1): `--out` writes only over a file that starts so.
REPORT_TITLE = "# blob-lock benchmark"


def render(
    header: list[str], rep: Report, elapsed: float, quick: bool, full: bool, level: int = 1
) -> str:
    """The report in markdown; ``level``: its title's heading level (2 inside a page)."""
    size = " (--quick: small sizes)" if quick else " (--full)" if full else ""
    out = ["#" * level + REPORT_TITLE.lstrip("#") + size, ""]
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
