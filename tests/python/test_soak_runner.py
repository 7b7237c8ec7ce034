"""The soak's runner (tests/soak/runner.py) cut short, as docs/development.md tells whoever
runs a long soak to do: SIGUSR1 starts no campaign more, and the one under way ends its
faults, runs its quiet phase and its checks, and gives its verdict."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[1] / "soak" / "runner.py"


@pytest.mark.heavy  # eight workers looping a section take this machine's CPU: make check
@pytest.mark.timeout(600)
def test_sigusr1_ends_a_soak_with_its_verdict_and_starts_no_campaign_more(tmp_path):
    # An hour per campaign, two campaigns one after the other: uncut, this runs two hours.
    argv = [sys.executable, str(RUNNER), "--stores", "files", "--kinds", "lock,semaphore"]
    argv += ["--seconds", "3600", "--parallel", "1", "--workers", "4", "--out", str(tmp_path)]
    runner = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        records = tmp_path / "files-lock" / "records"
        deadline = time.monotonic() + 120
        while not any(p.stat().st_size for p in records.glob("*.jsonl")):
            assert runner.poll() is None, runner.communicate()[0]
            assert time.monotonic() < deadline, "no section recorded in 120 s"
            time.sleep(0.5)
        runner.send_signal(signal.SIGUSR1)
        # Its quiet phase (60 s at this length), the workers' stop and the checks; a bound
        # for liveness only, far below the hour the campaign was given.
        out, _ = runner.communicate(timeout=400)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()
    assert runner.returncode == 0, out
    verdict = json.loads((tmp_path / "files-lock" / "verdict.json").read_text())
    assert verdict["violations"] == [], verdict
    assert verdict["wall_seconds"] < 600, verdict  # cut, not run its hour
    assert "files/lock" in out and "soak: 1 campaigns, 0 failed" in out, out
    assert not (tmp_path / "files-semaphore").exists(), "a campaign started after the cut"
