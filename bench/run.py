"""The benchmark: blob-lock beside thds-mops's lease, flufl.lock and filelock.

    .venv/bin/python bench/run.py [--quick | --full] [--out FILE] [--only SECTION,...]

Prints the machine, the date and the build, then ONE markdown table: each figure of
blob-lock, the peers' figures beside it with their ratio to ours (peer / blob-lock: above
1 a peer takes longer, or more requests, or more memory), the target and whether it is met.
Notes under the table say how each figure was taken. ``make bench`` builds a release
extension first; figures of a debug build mean nothing (the header says which it is).

Sections (``--only``): headline, requests, latency, clients, handover, scale, contention,
semaphore, load, prefect, joblib.
Every measurement runs in a process of its own (bench/worker.py); moto's S3 server and the
proxies in front of it (bench/moto_store.py) run here.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    REPORT_TITLE,
    Report,
    Sizes,
    machine,
    render,
)
from costs import clients, headline, latency, requests
from joblib_memo import joblib_memory
from load import load
from prefect_managers import prefect
from quotas import semaphore
from scale import scale
from waits import contention, handover

SECTIONS = [
    "headline",
    "requests",
    "latency",
    "clients",
    "handover",
    "scale",
    "contention",
    "semaphore",
    "load",
    "prefect",
    "joblib",
]


# -- main -------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes: a minute or two")
    size.add_argument(
        "--full", action="store_true", help="the long run: about 20 minutes (default: under 10)"
    )
    ap.add_argument("--only", help="comma-separated sections: " + ", ".join(SECTIONS))
    ap.add_argument(
        "--out",
        help="also write the report (markdown) to this file: a new one, or a report written "
        "before (never a page such as BENCHMARKS.md)",
    )
    ap.add_argument(
        "--figures",
        help="draw the pictures (SVG, bench/figures.py) and write the table (table.md) into "
        "this folder: `make bench` gives docs/figures, which docs/benchmarks.md embeds",
    )
    ap.add_argument("--tmp", help="where the local-file locks go (default: the temp dir)")
    ap.add_argument(
        "--serial-delay",
        action="store_true",
        help="inject the delay with tests/proxies/fault_proxy.py as it is "
        "(each chunk waits in turn) "
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
    sz = Sizes.quick() if args.quick else Sizes.full() if args.full else Sizes()
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
    if args.out:
        # Checked before minutes of measuring: a page such as BENCHMARKS.md is not overwritten.
        out = Path(args.out)
        if out.is_dir() or not out.parent.is_dir():
            ap.error(f"--out {out}: give a file in a folder that exists")
        first = out.read_text().split("\n", 1)[0] if out.is_file() else REPORT_TITLE
        if not first.startswith(REPORT_TITLE):
            ap.error(
                f"--out {out}: that file is not a report of this bench (its first line is not "
                f"'{REPORT_TITLE}...') and would be overwritten; give a new file. The run's "
                "table goes into docs/figures/table.md with --figures (as `make bench` does); "
                "BENCHMARKS.md's figures are copied from there by hand."
            )
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
        with_moto = {"headline", "requests", "latency", "clients", "semaphore", "prefect", "joblib"}
        if with_moto & set(sections):
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
                elif section == "semaphore":
                    semaphore(rep, sz, tmp, moto)
                elif section == "load":
                    load(rep, sz, tmp)
                elif section == "prefect":
                    prefect(rep, sz, tmp, moto)
                elif section == "joblib":
                    joblib_memory(rep, sz, tmp, moto)
            except Exception as e:  # one section's failure leaves the others' figures
                rep.failed(section, e)
            rep.took[section] = time.monotonic() - began
    finally:
        if moto is not None:
            moto.close()
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.monotonic() - started
    text = render(header, rep, elapsed, args.quick, args.full)
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    if args.figures:
        from figures import draw

        folder = Path(args.figures)
        size = " (--quick)" if args.quick else " (--full)" if args.full else ""
        caption = f"make bench{size}, {header[0].removeprefix('- date: ')}."
        for path in draw(rep.figures, folder, caption):
            print(f"[bench] drew {path}", file=sys.stderr)
        table = render(header, rep, elapsed, args.quick, args.full, level=2)
        (folder / "table.md").write_text(table)


if __name__ == "__main__":
    socket.setdefaulttimeout(None)
    main()
