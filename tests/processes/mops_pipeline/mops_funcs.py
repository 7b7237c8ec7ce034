"""Memoized mops functions for tests/python/test_mops_adapter.py, run with a subprocess shim: the
orchestrator and the remote are separate processes that both import this module."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Sequence
from datetime import timedelta

from thds.mops import pure
from thds.mops.pure.core import lease

ROOT = f"file://{os.environ['MOPS_TEST_ROOT']}"

if os.environ.get("MOPS_TEST_EXPIRE"):
    # mops hard-codes an 88 s lease; the launch-gap tests shorten it to keep to seconds.
    # Wrapped after mops's import, so it wraps blob-lock's acquire where the adapter is on.
    _acquire = lease.acquire

    def _short_acquire(uri: str, **kwargs: object) -> object:
        kwargs["expire"] = timedelta(seconds=float(os.environ["MOPS_TEST_EXPIRE"]))
        return _acquire(uri, **kwargs)

    lease.acquire = _short_acquire


def _work(x: int) -> int:
    with open(os.environ["MOPS_TEST_RUNS"], "a") as f:  # one line per run
        f.write(f"{os.getpid()}\n")
    time.sleep(float(os.environ.get("MOPS_TEST_WORK", "3")))
    return x * x


@pure.magic("subprocess", blob_root=ROOT, pipeline_id="t")
def slow_square(x: int) -> int:
    """Records each run, works a moment, and squares."""
    return _work(x)


def queued_shim(shim_args: Sequence[str]) -> None:
    """mops's subprocess shim with a queue in front, as a Kubernetes job waits for a node:
    records the launch, then the remote starts after MOPS_TEST_QUEUE seconds. The remote is
    a child process, so it outlives an orchestrator killed while it is queued."""
    with open(os.environ["MOPS_TEST_LAUNCHES"], "a") as f:
        f.write(f"{os.getpid()}\n")
    queued = 'sleep "$0"; exec python -m thds.mops.pure.core.entry.main "$@"'
    subprocess.check_call(["sh", "-c", queued, os.environ["MOPS_TEST_QUEUE"], *shim_args])


@pure.magic(queued_shim, blob_root=ROOT, pipeline_id="t")
def queued_square(x: int) -> int:
    """slow_square behind a queue."""
    return _work(x)
