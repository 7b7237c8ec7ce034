"""The soak (`make soak`): a Jepsen-style campaign per store. W worker processes
(tests/soak/workload.py) loop a critical section over one lock, or over a semaphore's
slots, and write to a fenced resource (tests/soak/fence.py) inside it; a seeded nemesis
(tests/soak/nemesis.py) pauses the holder past its lease, kills workers, breaks the
network through the fault proxy and restarts or stalls the store; then a quiet phase with
every fault healed. The checker (tests/soak/checker.py) reads what was recorded, and this
prints one line per campaign and exits non-zero on any violation where the store runs cas
(lww's overlaps, on s3rver, are its figure, not a failure).

    python tests/soak/runner.py [--seconds S] [--stores files,moto,...] [--kinds lock,semaphore]

Each campaign's records stay in ``--out`` (default .cache/soak/<time>/<store>-<kind>/).
With ``--expect-violation`` (the seeded bug's run, `make soak-mutant`) the exit status is
turned around: 0 when the checker found a violation of exclusion, 1 when it found none.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from checker import SAFETY, Campaign, Verdict, check, load  # noqa: E402
from nemesis import Nemesis  # noqa: E402
from pool import Pool  # noqa: E402
from stores import CLOSED_METADATA, ROOT, STORES, Unavailable  # noqa: E402

# Seconds per campaign when --seconds is not given: enough for 100,000 sections of the lock
# on each cas store at the rates measured here under the nemesis (BENCHMARKS.md, "Soak").
DEFAULT_SECONDS = {
    "files": 900,
    "moto": 900,
    "azurite": 900,
    "gcs": 900,
    "localstack": 900,
    "s3rver": 300,
}
DEFAULT_STORES = ["files", "moto", "azurite", "gcs", "localstack", "s3rver"]


def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, help="each campaign's length (default: per store)")
    p.add_argument("--stores", default=",".join(DEFAULT_STORES))
    p.add_argument("--kinds", default="lock,semaphore", help="lock, semaphore or both")
    p.add_argument("--workers", type=int, default=8, help="worker processes per campaign")
    p.add_argument("--slots", type=int, default=2, help="a semaphore's number of slots")
    p.add_argument("--expire", type=float, default=2.0, help="the lock's expire, seconds")
    p.add_argument("--hold", type=float, default=0.002, help="seconds inside each section")
    p.add_argument("--gap", type=float, default=0.004, help="most seconds between sections")
    p.add_argument("--seed", default="1")
    p.add_argument("--out", type=Path)
    p.add_argument("--expect-violation", action="store_true")
    return p.parse_args()


def main() -> int:
    args = arguments()
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = args.out or ROOT / ".cache" / "soak" / stamp
    stores = [s for s in args.stores.split(",") if s]
    unknown = [s for s in stores if s not in STORES]
    if unknown:
        print(f"unknown stores {unknown}: choose among {', '.join(STORES)}", file=sys.stderr)
        return 2
    kinds = [k for k in args.kinds.split(",") if k]
    print(
        f"soak {stamp}: seed {args.seed}, {args.workers} workers, expire {args.expire:g} s, "
        f"semaphore of {args.slots}, records in {out}",
        flush=True,
    )
    verdicts: list[Verdict] = []
    for name in stores:
        for kind in kinds:
            seconds = args.seconds or DEFAULT_SECONDS[name]
            if kind == "semaphore":
                seconds = args.seconds or seconds / 4
            try:
                verdict = campaign(args, name, kind, seconds, out / f"{name}-{kind}")
            except Unavailable as e:
                print(f"{name}/{kind}: skipped: {e}", flush=True)
                break
            verdicts.append(verdict)
            print(verdict.line(), flush=True)
            for example in verdict.examples[:5]:
                print(f"    {example}", flush=True)
    return verdict_status(args, verdicts)


def verdict_status(args: argparse.Namespace, verdicts: list[Verdict]) -> int:
    if args.expect_violation:
        caught = [
            v
            for v in verdicts
            if v.campaign.protocol == "cas" and any(getattr(v, s) for s in SAFETY)
        ]
        print(
            f"the seeded bug was caught in {len(caught)} of {len(verdicts)} campaigns"
            if caught
            else "the seeded bug went unseen: no campaign found a violation (was the "
            "extension built with --features mutations?)"
        )
        return 0 if caught else 1
    failed = [v for v in verdicts if v.violations()]
    print(f"soak: {len(verdicts)} campaigns, {len(failed)} failed")
    return 1 if failed or not verdicts else 0


def campaign(args: argparse.Namespace, name: str, kind: str, seconds: float, work: Path):
    work.mkdir(parents=True, exist_ok=True)
    store = STORES[name](work)
    fence = None
    pool = None
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
        quiet = max(8.0, min(60.0, 0.2 * seconds))
        rng = random.Random(f"{args.seed}-{name}-{kind}")
        nemesis = Nemesis(rng, store, pool, args.expire, work / "nemesis.jsonl")
        nemesis.run(until=began + seconds - quiet)
        nemesis.heal()
        quiet_start = time.monotonic()
        while time.monotonic() < began + seconds:
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
        store.close()
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
        # less its margin), and 3 s for a machine whose two cores the soak keeps busy.
        wait_bound=timeout + args.expire + 3.0,
    )
    verdict = check(facts, records, fence_log, faults)
    verdict.stuck_workers = stuck
    summary = {
        "line": verdict.line(),
        "violations": verdict.violations(),
        "examples": verdict.examples,
        "seconds": seconds,
        "nemesis": dict(verdict.nemesis),
        "failures": dict(verdict.failures),
    }
    (work / "verdict.json").write_text(json.dumps(summary, indent=1))
    return verdict


if __name__ == "__main__":
    sys.exit(main())
