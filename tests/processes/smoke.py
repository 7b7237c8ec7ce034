"""What a fresh install must do on any platform, with nothing but the package and a local
folder: run as `python tests/processes/smoke.py` by the wheel workflow on each platform it builds,
and by tests/python/test_smoke.py here. Exits non-zero, saying what failed, if anything does."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import blob_lock
from blob_lock import BlobLock, inspect, list_locks, prune_locks, stats


def cli(*args: str) -> subprocess.CompletedProcess:
    # `python -m blob_lock`: the console script's folder is not on PATH everywhere.
    return subprocess.run(
        [sys.executable, "-m", "blob_lock", *args], capture_output=True, text=True, timeout=120
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        uri = str(Path(tmp) / "memo" / "lock")
        began = time.time_ns() // 1000
        with BlobLock(uri, labels={"run": "smoke"}) as held:
            # A fresh lockfile's token: the wall clock in microseconds.
            assert held.token is not None and began <= held.token, held.token
            # Another process cannot take it, and sees who holds it.
            taken = cli("run", uri, "--no-wait", "--", sys.executable, "-c", "pass")
            assert taken.returncode == 75, (taken.returncode, taken.stderr)
            status = cli("status", uri)
            assert "run=smoke" in status.stdout, status.stdout
        first = inspect(uri)
        assert first.state == "released"
        # Another process takes it once it is free: the file store's guard and renames.
        ran = cli(
            "run", uri, "--label", "run=second", "--expire", "1", "--", sys.executable, "-c",
            "pass",
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert first.token is not None and inspect(uri).token > first.token
        assert [Path(s.uri) for s in list_locks(tmp)] == [Path(uri)]
        # prune keeps a lockfile until no create of it can be on its way (its expire).
        time.sleep(1.1)
        pruned = list(prune_locks(tmp, older_than=0, clock_skew=0))
        assert [p.outcome for p in pruned] == ["deleted"], pruned
        assert stats()["acquisitions"]["acquired"] >= 1
    print(f"blob-lock {blob_lock.__version__} works here ({sys.platform}, Python "
          f"{sys.version.split()[0]})")  # fmt: skip


if __name__ == "__main__":
    main()
