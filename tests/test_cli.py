"""The blob-lock command, run as users run it."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
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


# A command that reports which signal reached it, then exits 3.
TRAPS = """
import pathlib, signal, sys, time
mark = pathlib.Path(sys.argv[1])
def bye(signum, frame):
    mark.write_text(signal.Signals(signum).name)
    sys.exit(3)
signal.signal(signal.SIGTERM, bye)
signal.signal(signal.SIGINT, bye)
print("ready", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_passes_signals_on_then_releases(tmp_path, sig):
    uri, mark = str(tmp_path / "lock"), tmp_path / "mark"
    proc = subprocess.Popen(
        [BLOB_LOCK, "run", uri, "--", sys.executable, "-c", TRAPS, str(mark)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(sig)
    assert proc.wait(30) == 3, proc.stderr.read()
    assert mark.read_text() == sig.name
    assert json.loads((tmp_path / "lock" / "lock.json").read_text())["released_at"]


def test_run_reports_a_command_ended_by_a_signal_as_128_plus_n(tmp_path):
    suicide = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    done = run("run", str(tmp_path / "lock"), "--", sys.executable, "-c", suicide)
    assert done.returncode == 128 + signal.SIGKILL
    assert json.loads((tmp_path / "lock" / "lock.json").read_text())["released_at"]


def test_a_signal_while_waiting_for_the_lock_ends_the_wait(tmp_path):
    uri = str(tmp_path / "lock")
    with BlobLock(uri) as held:
        proc = subprocess.Popen(
            [BLOB_LOCK, "run", "-v", uri, "--", "true"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for line in proc.stderr:  # -v logs each new holder it waits for
            if "waiting" in line:
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM
        assert held.held and not held.lost


def test_run_verbose_logs_each_transition_of_the_claim(tmp_path):
    done = run("run", "-v", str(tmp_path / "lock"), "--", "true")
    assert done.returncode == 0, done.stderr
    steps = re.findall(r"owner \w+: (\w+) -> (\w+)", done.stderr)
    assert steps == [
        ("new", "acquiring"),
        ("acquiring", "held"),
        ("held", "releasing"),
        ("releasing", "released"),
    ], done.stderr
