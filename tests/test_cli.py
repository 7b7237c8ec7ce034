"""The blob-lock command, run as users run it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from blob_lock import BlobLock

# The installed console script, beside this interpreter (the venv need not be activated).
_beside = Path(sys.executable).parent / "blob-lock"
BLOB_LOCK = str(_beside) if _beside.exists() else shutil.which("blob-lock") or "blob-lock"


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([BLOB_LOCK, *args], capture_output=True, text=True, timeout=timeout)


def test_run_holds_the_lock_and_passes_the_exit_code(tmp_path):
    uri = str(tmp_path / "lock")
    # The command checks from inside that the lock is held, then exits 7.
    probe = (
        "import sys; from blob_lock import BlobLock; "
        f"sys.exit(7 if not BlobLock({uri!r}).try_acquire() else 1)"
    )
    done = run("run", uri, "--", sys.executable, "-c", probe)
    assert done.returncode == 7, done.stderr
    body = json.loads((tmp_path / "lock" / "lock.json").read_text())
    assert body["released_at"], "released after the command"


def test_run_gives_up_after_timeout_with_75(tmp_path):
    uri = str(tmp_path / "lock")
    with BlobLock(uri):
        done = run("run", uri, "--timeout", "0.5", "--", "true")
    assert done.returncode == 75
    assert "timed out" in done.stderr


def test_run_reports_bad_input(tmp_path):
    assert run("run", "ftp://x/y", "--", "true").returncode == 2
    missing = run("run", str(tmp_path / "l"), "--", "/no/such/program")
    assert missing.returncode == 127 and "cannot run" in missing.stderr
    assert run("run", str(tmp_path / "l")).returncode == 2
