"""The mops pairing end to end, with real processes on each shared store: an orchestrator
takes the memo's lock and launches a remote with its owner id; the orchestrator is killed
with SIGKILL; the remote's keep_alive holds the lock well past its expiry, so a restarted
orchestrator (the same script, tests/processes/pairing_roles.py) waits for the result instead of
launching a second remote; and once the remote has written the result and stopped, the lock
expires by itself, since only the dead orchestrator would ever have released it.

Why: this is what the lock is for. A crash of the orchestrator must neither lose the
remote's exclusion nor make its restart run the memo twice, and nobody may wait for ever.

The restarted orchestrator returns as soon as it sees the result and never takes the lock:
the remote writes the result before it stops renewing, so the lock is still held or expired
when it is read, never free with no result. The lock therefore ends expired, with the dead
orchestrator's owner id and token."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, TypeVar

import pytest
from blob_lock import LockState, inspect
from conftest import Worker

# Left out of `make test-fast` (-m "not slow"): real processes killed with SIGKILL, on every store
pytestmark = pytest.mark.slow

ROLES = Path(__file__).parents[1] / "processes" / "pairing_roles.py"
EXPIRE = 2.0
T = TypeVar("T")


class Role(Worker):
    """A tests/processes/pairing_roles.py process, read line by line as a Worker is."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(ROLES), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._out = b""


def eventually(what: str, check: Callable[[], T | None], timeout: float = 60.0) -> T:
    """The first truthy ``check()``, polled; a generous liveness bound, not a timing test."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout}s")


def remote_event(work: Path, name: str) -> dict | None:
    """The remote's event ``name`` from its log (the remote is detached: it prints there)."""
    log = work / "remote.log"
    lines = log.read_text().split("\n")[:-1] if log.exists() else []  # whole lines only
    events = (json.loads(line) for line in lines if line.startswith("{"))  # not a traceback
    return next((e for e in events if e["event"] == name), None)


def read(path: Path) -> str | None:
    return (path.read_text().strip() or None) if path.exists() else None


def launches(work: Path) -> list[int]:
    path = work / "launches"
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


def test_a_restarted_orchestrator_waits_for_the_remote_of_a_killed_one(shared_backend, tmp_path):
    lock_uri = f"{shared_backend.uri()}/lock"  # the memo's lock folder
    options = shared_backend.storage_options or None
    work = tmp_path / "pairing"
    work.mkdir()
    args = ("orchestrate", lock_uri, shared_backend.options_json(), str(work), str(EXPIRE))

    def look():
        return inspect(lock_uri, storage_options=options)

    roles: list[Role] = []
    try:
        # 1. The orchestrator takes the lock and launches the remote with its owner id.
        first = Role(*args)
        roles.append(first)
        launched = first.line()
        assert launched["event"] == "launched", launched
        owner, token = launched["owner"], launched["token"]
        alive = eventually("the remote's keep_alive", lambda: remote_event(work, "alive"))
        assert (alive["owner"], alive["token"]) == (owner, token)

        # 2. The orchestrator dies without a chance to release or to stop anything.
        first.kill()
        assert first.proc.returncode == -signal.SIGKILL
        killed_at = datetime.now(timezone.utc)

        # 3. Well past expiry the lock is still held, in the dead orchestrator's name: only
        # the remote's renewals, written since the kill, can have kept it.
        time.sleep(3 * EXPIRE)
        seen = look()
        assert seen.state is LockState.HELD, seen.describe()
        assert (seen.owner, seen.token) == (owner, token)
        assert seen.written_at is not None and seen.written_at > killed_at
        assert not (work / "remote.rc").exists()  # the remote is still working

        # 4. A restart of the same orchestrator sees it held and waits rather than launch,
        # for a whole expiry period, as long as the remote renews.
        restarted = Role(*args)
        roles.append(restarted)
        waiting = restarted.line()
        assert waiting == {"event": "waiting", "state": "held", "owner": owner, "token": token}
        assert restarted.poll(timeout=EXPIRE) is None
        assert launches(work) == [launched["remote"]]

        # 5. The remote finishes: it writes the result and stops renewing; the restarted
        # orchestrator returns with that result.
        (work / "finish").touch()
        got = restarted.line()
        assert got["event"] == "result", got
        assert got["waited"] is True
        assert got["value"] == {"by": alive["pid"], "token": token}
        assert restarted.wait(60) == 0
        rc = eventually("the remote's exit", lambda: read(work / "remote.rc"))
        assert rc == "0", (work / "remote.log").read_text()
        assert remote_event(work, "stopped") == {"event": "stopped", "lost": False}
        assert launches(work) == [launched["remote"]]  # one remote, ever

        # Nobody releases (the remote never does; its orchestrator is dead) and nobody
        # takes it again: the lock expires, still in the dead orchestrator's name.
        final = eventually("the lock's expiry", lambda: (s := look()).state != "held" and s)
        assert final.state is LockState.EXPIRED, final.describe()
        assert (final.owner, final.token) == (owner, token)
    finally:
        for role in roles:
            role.kill()
        for pid in launches(work):  # the remote's session, if the test failed before its end
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
