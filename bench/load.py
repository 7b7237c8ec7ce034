"""Past the store's capacity: how many locks one process holds with none lost, on Azurite
and on moto, at expire 6 and at the default expire, and what happens to the rest.

One process takes locks one after another with ``try_acquire`` (a wide parallel map of
claims, as the issue that asked for it put it), far more than the store can renew; it then
holds what it took for a few heartbeats and releases them. What it took is what the store
could renew with headroom (the process measures the store while it saturates it); the rest
is refused at once with ``StoreSaturated``. A lost lock is a failure. Also read: the
tightest renewal margin (how close a lease came to its deadline) and who used the CPU (this
process, the store's server, on two cores between them).

    .venv/bin/python bench/load.py --worker URI OPTIONS N EXPIRE HOLD   (one run)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "servers"))
sys.path.insert(0, str(HERE))


def machine_cpu() -> float:
    """CPU seconds the whole machine spent so far (user, nice, system), all cores."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[0]) + int(fields[1]) + int(fields[2])) / ticks


def worker(uri: str, options: dict, n: int, expire: float, hold: float) -> None:
    import resource

    from blob_lock import BlobLock, LockError, StoreSaturated, stats

    resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
    held, refused, reason = [], 0, ""
    cpu0, machine0, began = time.process_time(), machine_cpu(), time.monotonic()
    for i in range(n):
        lock = BlobLock(f"{uri}/{i}", expire=expire, storage_options=options)
        try:
            if lock.try_acquire():
                held.append(lock)
        except StoreSaturated as e:
            refused += 1
            reason = str(e).split(" is saturated: ", 1)[-1]
    took = time.monotonic() - began
    before = stats()["renewals"]["ok"]
    time.sleep(hold)
    s = stats()
    wall = time.monotonic() - began
    result = {
        "held": len(held),
        "refused": refused,
        "reason": reason,
        "lost": sum(lock.lost for lock in held),
        "acquire_s": took,
        "renewals": s["renewals"]["ok"] - before,
        "margin_min": s["renewal_margin_min_seconds"],
        "cpu_ours": (time.process_time() - cpu0) / wall,
        "cpu_machine": (machine_cpu() - machine0) / wall,
    }
    for lock in held:
        try:
            lock.release()
        except LockError:  # a lost lock says so at release: counted above already
            pass
    print(json.dumps({"result": result}), flush=True)


def run(uri: str, options: dict, n: int, expire: float, hold: float, env: dict) -> dict:
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--worker",
            uri,
            json.dumps(options),
            str(n),
            str(expire),
            str(hold),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, **env},
    )
    for line in out.stdout.splitlines():
        if line.startswith('{"result"'):
            return json.loads(line)["result"]
    raise RuntimeError(f"load worker failed ({out.returncode}): {out.stderr.strip()[-500:]}")


def load(rep, sz, tmp: str) -> None:
    """The section of bench/run.py (``--only load``)."""
    import servers

    work = Path(tempfile.mkdtemp(dir=tmp))
    (work / "azurite").mkdir()
    (work / "moto").mkdir()
    cases = [(6.0, sz.load_locks_6), (30.0, sz.load_locks_30)]
    outcomes: list[tuple[str, dict]] = []
    with servers.running_azurite(work / "azurite") as url:
        service = servers.azurite_service(url)
        for expire, n in cases:
            container = f"c{uuid.uuid4().hex[:10]}"
            service.create_container(container)
            r = run(
                f"az://{container}",
                {"azure_storage_use_emulator": "true"},
                n,
                expire,
                sz.load_heartbeats * expire / 3,
                {"AZURITE_BLOB_STORAGE_URL": url},
            )
            add(rep, "Azurite", expire, n, r)
            outcomes.append((f"Azurite\nexpire {expire:g} s\n{n:,} tried", r))
    with servers.running_moto(work / "moto") as url:
        for expire, n in cases:
            bucket = f"b{uuid.uuid4().hex[:10]}"
            servers.boto3_s3(url).create_bucket(Bucket=bucket)
            r = run(
                f"s3://{bucket}",
                servers.s3_options(url),
                n,
                expire,
                sz.load_heartbeats * expire / 3,
                {},
            )
            add(rep, "moto", expire, n, r)
            outcomes.append((f"moto\nexpire {expire:g} s\n{n:,} tried", r))
    from common import Figure

    rep.figures["load"] = Figure(
        "Locks taken one after another past the store's capacity: held, refused, lost",
        "bars",
        {
            "held through the hold": [r["held"] - r["lost"] for _, r in outcomes],
            "refused at once (StoreSaturated)": [r["refused"] for _, r in outcomes],
            "lost while held": [r["lost"] for _, r in outcomes],
        },
        ylabel="locks",
        groups=[label for label, _ in outcomes],
        note=f"Held for {sz.load_heartbeats:g} heartbeats; one process, a fresh BlobLock each.",
    )
    rep.notes.append(
        "Past the store's capacity: one process takes N locks one after another with "
        "try_acquire (a fresh BlobLock each), holds what it took for "
        f"{sz.load_heartbeats:g} heartbeats, then releases them. The store is measured while it is "
        "kept busy; a lock is taken while the held ones need under 80 % of what it answers "
        "and their renewals keep up, and refused at once (StoreSaturated) otherwise. CPU is "
        "in cores of this 2-core machine, the process's own and the whole machine's (the "
        "rest is the store's server: Azurite is one Node.js thread, moto one Python "
        "process)."
    )


def add(rep, store: str, expire: float, n: int, r: dict) -> None:
    margin = r["margin_min"]
    slack = expire - expire / 10 - expire / 3
    rep.add(
        f"{store}, expire {expire:g}: locks held of {n:,} taken in a loop; lost",
        f"{r['held']:,} held, {r['refused']:,} refused as saturated; **{r['lost']} lost**",
        "—",
        "0 lost",
        "met" if r["lost"] == 0 else "**missed**",
    )
    rep.notes.append(
        f"{store}, expire {expire:g}: {r['held']:,} locks taken in {r['acquire_s']:.1f} s "
        f"({r['refused']:,} refused: {r['reason'][:160]}); {r['renewals']:,} renewals while "
        f"held; the tightest renewal left {margin if margin is None else f'{margin:.2f} s'} "
        f"of its {slack:.1f} s slack; CPU: this process {r['cpu_ours']:.2f} cores, the "
        f"machine {r['cpu_machine']:.2f} of 2."
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        uri, options, n, expire, hold = sys.argv[2:7]
        worker(uri, json.loads(options), int(n), float(expire), float(hold))
    else:
        raise SystemExit(__doc__)
