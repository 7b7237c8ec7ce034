"""The soak (`make soak`): a Jepsen-style campaign per store and kind. W worker processes
(tests/soak/workload.py) loop a critical section over one lock, or over a semaphore's
slots, and write to a fenced resource (tests/soak/fence.py) inside it; a seeded nemesis
(tests/soak/nemesis.py) pauses the holder past its lease, kills workers, breaks the
network through the fault proxy and restarts or stalls the store; then a quiet phase with
every fault healed. The checker (tests/soak/checker.py) reads what was recorded. Each
campaign runs in a process of its own, ``--parallel`` at once; this prints one line per
campaign as it ends and exits non-zero on any violation where the store runs cas (lww's
overlaps, on s3rver, are its figure, not a failure).

    python tests/soak/runner.py [--seconds S | --sections N] [--stores files,moto,...]
                                [--kinds lock,semaphore] [--parallel P] [--seed SEED]

A campaign lasts ``--seconds``, or by default until it has its store's number of sections
(100,000 on one lock for files, moto, Azurite and the GCS fake), then its quiet phase.
Its records stay in ``--out`` (default .cache/soak/<time>/<store>-<kind>/). A run cut
short with SIGUSR1 (``pkill -USR1 -f 'soak/runner.py --stores'``) starts no campaign more,
and each under way ends its faults at once and goes on to its quiet phase and checks. With
``--expect-violation`` (the seeded bug's run, `make soak-mutant`) the exit status is turned
around: 0 when the checker found a violation of exclusion, 1 when it found none.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from checker import SAFETY, Campaign, check, load  # noqa: E402
from nemesis import Nemesis  # noqa: E402
from pool import Pool  # noqa: E402
from stores import CLOSED_METADATA, ROOT, STORES, Unavailable, install_localstack  # noqa: E402

# Sections per campaign when --seconds is not given: a campaign's nemesis runs until it has
# that many, then its quiet phase. 100,000 on one lock for each store that runs cas in the
# tests; fewer where the figure is a store's (LocalStack's S3, lww on s3rver) and for
# semaphores (each of their slots is a lock).
DEFAULT_SECTIONS = {"files": 100_000, "moto": 100_000, "azurite": 100_000, "gcs": 100_000}
DEFAULT_SECTIONS.update(localstack=20_000, s3rver=5_000)
SEMAPHORE_SECTIONS = 10_000
DEFAULT_STORES = ["files", "moto", "azurite", "gcs", "localstack", "s3rver"]
# A semaphore under lww is left out unless asked for (--kinds): a slot whose holder was
# killed is taken over only after expire and clock_skew there (60 s at the default skew),
# not after expire as under cas, and the quiet phase's liveness fails on it.
# The stores by what a section costs there (CPU and waits), the costliest first.
COST = ["moto", "localstack", "azurite", "gcs", "files", "s3rver"]


def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, help="each campaign's length (default: by sections)")
    p.add_argument("--sections", type=int, help="each campaign's sections (default: per store)")
    p.add_argument(
        "--most-minutes", type=float, default=150, help="a campaign's length at most, by sections"
    )
    p.add_argument("--stores", default=",".join(DEFAULT_STORES))
    p.add_argument(
        "--kinds", help="lock, semaphore or both (default: both, and on lww stores the lock)"
    )
    p.add_argument("--workers", type=int, default=8, help="worker processes per campaign")
    p.add_argument("--slots", type=int, default=2, help="a semaphore's number of slots")
    p.add_argument("--expire", type=float, default=2.0, help="the lock's expire, seconds")
    p.add_argument("--hold", type=float, default=0.002, help="seconds inside each section")
    p.add_argument("--gap", type=float, default=0.004, help="most seconds between sections")
    p.add_argument("--seed", default="1")
    p.add_argument("--out", type=Path)
    p.add_argument("--parallel", type=int, default=3, help="campaigns run at once")
    p.add_argument("--expect-violation", action="store_true")
    p.add_argument("--nice", type=int, default=0, help=argparse.SUPPRESS)  # in a child
    p.add_argument("--campaign", help=argparse.SUPPRESS)  # STORE:KIND, in a child
    return p.parse_args()


def main() -> int:
    args = arguments()
    # This process and every one it starts (the servers, the workers): no metadata service.
    os.environ.update(CLOSED_METADATA)
    # Asked to stop (a run interrupted): the cleanup runs, of each campaign's workers and
    # store, and of the campaigns under way.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.campaign:
        return one(args)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or ROOT / ".cache" / "soak" / stamp
    stores = [s for s in args.stores.split(",") if s]
    unknown = [s for s in stores if s not in STORES]
    if unknown:
        print(f"unknown stores {unknown}: choose among {', '.join(STORES)}", file=sys.stderr)
        return 2
    mutation = os.environ.get("BLOB_LOCK_MUTATION")
    print(
        f"soak {stamp}: seed {args.seed}, {args.workers} workers, expire {args.expire:g} s, "
        f"semaphore of {args.slots}, {args.parallel} campaigns at once, blob_lock from "
        f"{package()}{f', seeded bug {mutation}' if mutation else ''}; records in {out}",
        flush=True,
    )
    out.mkdir(parents=True, exist_ok=True)
    if "localstack" in stores:
        try:  # once, before its campaigns start side by side
            install_localstack(out)
        except Unavailable as e:
            print(f"localstack: skipped: {e}", flush=True)
            stores.remove("localstack")
    plan = []
    for name in stores:
        kinds = args.kinds or ("lock" if STORES[name].protocol == "lww" else "lock,semaphore")
        for kind in (k for k in kinds.split(",") if k):
            sections = args.sections or (
                SEMAPHORE_SECTIONS if kind == "semaphore" else DEFAULT_SECTIONS[name]
            )
            plan.append((name, kind, None if args.seconds else sections))
    # The longest first (the locks, the costliest store first): the last to end is a short one.
    plan.sort(key=lambda c: (c[1] != "lock", COST.index(c[0])))
    summaries = side_by_side(args, plan, out)
    return verdict_status(args, summaries)


def side_by_side(args: argparse.Namespace, plan: list, out: Path) -> list[dict]:
    """Each campaign in a process of its own (``--campaign``), ``--parallel`` at once; each
    one's lines printed as it ends; their summaries (verdict.json)."""
    waiting, running, summaries = list(plan), [], []

    def finish_now(*_) -> None:  # SIGUSR1: no campaign more; those under way end theirs
        waiting.clear()
        for child, _ in running:
            child.send_signal(signal.SIGUSR1)

    signal.signal(signal.SIGUSR1, finish_now)
    try:
        _campaigns(args, out, waiting, running, summaries)
    finally:  # interrupted: each campaign stops its workers and its store
        for child, _ in running:
            child.terminate()
        for child, _ in running:
            child.wait()
    return summaries


def _campaigns(args, out: Path, waiting: list, running: list, summaries: list) -> None:
    # The first campaign, the longest (moto's, by default: its server answers one request at
    # a time), at the normal priority and the others at nice 10: they take the CPU it leaves,
    # and the run lasts about as long as it does alone, not as long as its share of the
    # cores would make it (BENCHMARKS.md, "The soak's rates").
    lead = waiting[0] if waiting else None
    while waiting or running:
        while waiting and len(running) < args.parallel:
            name, kind, sections = campaign_plan = waiting.pop(0)
            work = out / f"{name}-{kind}"
            argv = [sys.executable, __file__, "--campaign", f"{name}:{kind}"]
            argv += ["--out", str(work), "--seed", args.seed]
            argv += [] if campaign_plan == lead else ["--nice", "10"]
            argv += ["--sections", str(sections)] if sections else ["--seconds", str(args.seconds)]
            for flag in ("workers", "slots", "expire", "hold", "gap", "most_minutes"):
                argv += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
            child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
            running.append((child, work))
        time.sleep(1)
        for child, work in list(running):
            if child.poll() is None:
                continue
            running.remove((child, work))
            assert child.stdout is not None
            print(child.stdout.read(), end="", flush=True)
            verdict = work / "verdict.json"
            if verdict.exists():
                summaries.append(json.loads(verdict.read_text()))
            else:
                summaries.append({"line": f"{work.name}: crashed ({child.returncode})"})
                print(summaries[-1]["line"], flush=True)


def one(args: argparse.Namespace) -> int:
    """One campaign (``--campaign STORE:KIND``) in this process, into ``--out``."""
    name, kind = args.campaign.split(":")
    if args.nice:
        os.nice(args.nice)  # its store's server, workers and fenced resource too
    try:
        verdict = campaign(args, name, kind, args.out)
    except Unavailable as e:
        print(f"{name}/{kind}: skipped: {e}", flush=True)
        args.out.joinpath("verdict.json").write_text(json.dumps({"skipped": str(e)}))
        return 0
    print(verdict.line(), flush=True)
    for example in verdict.examples[:5]:
        print(f"    {example}", flush=True)
    return 1 if verdict.violations() else 0


def package() -> str:
    """Where the workers import blob_lock from (a mutant's build, or the one in place)."""
    where = "import blob_lock, os; print(os.path.dirname(blob_lock.__file__))"
    done = subprocess.run([sys.executable, "-c", where], capture_output=True, text=True)
    return done.stdout.strip() or f"nowhere: {done.stderr.strip()[-300:]}"


def verdict_status(args: argparse.Namespace, summaries: list[dict]) -> int:
    ran = [s for s in summaries if "skipped" not in s]
    if args.expect_violation:
        caught = [s for s in ran if s.get("exclusion_broken")]
        print(
            f"the seeded bug was caught in {len(caught)} of {len(ran)} campaigns"
            if caught
            else "the seeded bug went unseen: no campaign found a violation of exclusion "
            "(was the extension built with --features mutations?)"
        )
        return 0 if caught else 1
    failed = [s for s in ran if s.get("violations", ["crashed"])]
    print(f"soak: {len(ran)} campaigns, {len(failed)} failed", flush=True)
    return 1 if failed or not ran else 0


def campaign(args: argparse.Namespace, name: str, kind: str, work: Path):
    """One campaign: ``args.seconds`` long, or until ``args.sections`` (and its quiet
    phase), ``args.most_minutes`` at most."""
    work.mkdir(parents=True, exist_ok=True)
    store = STORES[name](work)
    fence = None
    pool = None
    cpu = _cpu()
    try:
        store.start()
        sock = Path(f"/tmp/soak-fence-{os.getpid()}-{name}-{kind}.sock")
        fence = subprocess.Popen(
            [sys.executable, str(HERE / "fence.py"), str(sock), str(work / "fence.log")],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert fence.stdout is not None and fence.stdout.readline() == "listening\n"
        timeout = 10 * args.expire
        config = {
            "uri": store.uri(f"soak-{kind}"),
            "options": store.options,
            "kind": kind,
            "slots": args.slots,
            "expire": args.expire,
            "timeout": timeout,
            "protocol": store.protocol,
            "hold": args.hold,
            "gap": args.gap,
            "fence": str(sock),
            "seed": f"{args.seed}-{name}-{kind}",
        }
        (work / "config.json").write_text(json.dumps(config, indent=1))
        env = {**CLOSED_METADATA, **store.env}
        pool = Pool(args.workers, work, config, env)
        pool.start_all()
        began = time.monotonic()
        if args.seconds:
            quiet, seconds = max(12.0, min(60.0, 0.4 * args.seconds)), args.seconds
        else:
            quiet, seconds = 60.0, 60 * args.most_minutes
        rng = random.Random(f"{args.seed}-{name}-{kind}")
        nemesis = Nemesis(rng, store, pool, args.expire, work / "nemesis.jsonl")
        progress = Progress(f"{name}/{kind}", pool, began)
        # SIGUSR1 (to the runner, which passes it on): the faults end now, then the quiet
        # phase and the checks, as when the campaign has its sections.
        cut: list[bool] = []
        signal.signal(signal.SIGUSR1, lambda *_: cut.append(True))

        def enough() -> bool:
            counted = progress.sections()  # at most every 5 s; notes a torn lockfile too
            done = bool(args.sections and counted >= args.sections)
            # Under lww, a store that tore the lockfile ends the campaign: nothing acquires
            # it again (the checker reports the tear as the store's figure).
            return bool(cut) or done or (store.protocol == "lww" and pool.torn)

        nemesis.run(until=began + seconds - quiet, enough=enough)
        nemesis.heal()
        quiet_start = time.monotonic()
        while time.monotonic() < quiet_start + quiet:
            time.sleep(0.5)
            pool.revive(nemesis.note)
        stuck = pool.stop(grace=timeout + 10)
    finally:
        if pool is not None:
            for proc in pool.procs:
                if proc is not None and proc.poll() is None:
                    proc.kill()
        if fence is not None:
            fence.terminate()
            fence.wait(10)
        connections = store.proxy.accepted if store.proxy is not None else 0
        store.close()
    cpu = _cpu() - cpu
    records, fence_log, faults = load(work)
    facts = Campaign(
        store=name,
        kind=kind,
        protocol=store.protocol,
        workers=args.workers,
        slots=args.slots if kind == "semaphore" else 1,
        quiet_start=quiet_start,
        settle=2 * args.expire,
        # acquire's documented bound: its timeout and one request timeout (at most expire
        # less its margin); and 10 s for a machine whose two cores the soak and whatever
        # runs beside it keep busy (a liveness bound: it catches a wait that never ends).
        wait_bound=timeout + args.expire + 10.0,
    )
    verdict = check(facts, records, fence_log, faults)
    verdict.stuck_workers = stuck
    summary = {
        "line": verdict.line(),
        "violations": verdict.violations(),
        "exclusion_broken": verdict.campaign.protocol == "cas"
        and any(getattr(verdict, name) for name in SAFETY),
        "examples": verdict.examples,
        "wall_seconds": round(time.monotonic() - began),
        "nemesis": dict(verdict.nemesis),
        "failures": dict(verdict.failures),
        # What it cost: CPU seconds of the soak's processes (this one's proxy and nemesis,
        # the store's server, the workers, the fenced resource); connections to the store
        # (on moto, which closes each, its requests).
        "cpu_seconds": round(cpu, 1),
        "cpu_ms_per_section": round(1000 * cpu / max(1, verdict.sections), 2),
        "connections": connections,
    }
    (work / "verdict.json").write_text(json.dumps(summary, indent=1))
    return verdict


class Progress:
    """The sections so far, counted at most every 5 s; a line on stderr every 5 minutes."""

    def __init__(self, what: str, pool: Pool, began: float) -> None:
        self.what, self.pool, self.began = what, pool, began
        self.counted, self.at, self.said = 0, 0.0, began

    def sections(self) -> int:
        now = time.monotonic()
        if now - self.at >= 5:
            self.counted, self.at = self.pool.sections(), now
        if now - self.said >= 300:
            self.said = now
            minutes = (now - self.began) / 60
            print(f"{self.what}: {self.counted:,} sections in {minutes:.0f} min", file=sys.stderr)
        return self.counted


def _cpu() -> float:
    """CPU seconds of this process and of its children that ended."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


if __name__ == "__main__":
    sys.exit(main())
