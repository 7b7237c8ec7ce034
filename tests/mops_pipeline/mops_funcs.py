"""A memoized mops function for tests/test_mops_adapter.py, run with the subprocess shim: the
orchestrator and the remote are separate processes that both import this module."""

from __future__ import annotations

import os
import time

from thds.mops import pure


@pure.magic("subprocess", blob_root=f"file://{os.environ['MOPS_TEST_ROOT']}", pipeline_id="t")
def slow_square(x: int) -> int:
    """Records each run (one line per run), works a moment, and squares."""
    with open(os.environ["MOPS_TEST_RUNS"], "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(float(os.environ.get("MOPS_TEST_WORK", "3")))
    return x * x
