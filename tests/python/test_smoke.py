"""The smoke test the wheel workflow runs on every platform (tests/processes/smoke.py)
passes here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_platform_smoke_test_passes():
    script = Path(__file__).parents[1] / "processes" / "smoke.py"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "works here" in done.stdout
