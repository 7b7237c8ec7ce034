"""The two sides of the mops pairing, as real processes for tests/test_pairing.py.

orchestrate LOCK_URI OPTIONS_JSON WORK EXPIRE
    Returns the memo's result, launching a remote only when nobody is running it: the
    same script serves a first run and a restart after a crash. Prints JSON lines.
remote LOCK_URI OPTIONS_JSON OWNER WORK
    Keeps the orchestrator's lock alive while it "works" (until WORK/finish appears), then
    writes WORK/result.json and stops renewing. Never releases.

WORK is a local folder shared by path; the lock is what the test is about.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from blob_lock import BlobLock, LockState, inspect, keep_alive

# Generous liveness bound: no role waits for ever, even when the test around it fails.
GIVE_UP = 120.0


def say(**kw) -> None:
    print(json.dumps(kw), flush=True)


def launch_remote(lock_uri: str, options: str, owner: str, work: Path) -> int:
    """Starts the remote detached, in a session of its own, so that it outlives us as a
    job on another machine would. The shell around it records its exit code, as a batch
    system would: the test is not its parent and cannot wait for it."""
    remote = [sys.executable, __file__, "remote", lock_uri, options, owner, str(work)]
    script = (
        f"{shlex.join(remote)} >>{shlex.quote(str(work / 'remote.log'))} 2>&1; "
        f"echo $? >{shlex.quote(str(work / 'remote.rc'))}"
    )
    proc = subprocess.Popen(
        ["sh", "-c", script],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with open(work / "launches", "a") as f:  # the test counts the lines
        f.write(f"{proc.pid}\n")
    return proc.pid


def orchestrate(lock_uri: str, options: str, work: Path, expire: float) -> int:
    opts = json.loads(options) or None
    result = work / "result.json"
    deadline = time.monotonic() + GIVE_UP
    said_waiting = False
    while time.monotonic() < deadline:
        seen = inspect(lock_uri, storage_options=opts)
        # The result is looked for after the lock is read: the remote writes it before it
        # stops renewing, so a lock seen free with no result after it means nobody is
        # running the memo (never started, or the remote died), not that it just finished.
        if result.exists():
            say(event="result", value=json.loads(result.read_text()), waited=said_waiting)
            return 0
        if seen.state is LockState.HELD:
            # A remote keeps it alive, maybe for an orchestrator that died: wait, not launch.
            if not said_waiting:
                say(event="waiting", state=seen.state.value, owner=seen.owner, token=seen.token)
                said_waiting = True
            time.sleep(0.1)
            continue
        # Free by one read; only an acquisition decides (two restarts may both get here).
        # An expired lock is taken after it has been watched for its expire_s.
        lock = BlobLock(lock_uri, expire=expire, storage_options=opts)
        if not lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            break
        try:
            if result.exists():  # finished by the one we waited behind
                continue
            pid = launch_remote(lock_uri, options, lock.owner, work)
            say(event="launched", owner=lock.owner, token=lock.token, remote=pid)
            while not result.exists():  # renewed in the background meanwhile
                if time.monotonic() > deadline:
                    say(event="gave_up", why="no result")
                    return 1
                time.sleep(0.1)
        finally:
            lock.release()
    say(event="gave_up", why="lock never free")
    return 1


def remote(lock_uri: str, options: str, owner: str, work: Path) -> int:
    opts = json.loads(options) or None
    with keep_alive(lock_uri, owner, storage_options=opts) as alive:
        say(event="alive", owner=alive.owner, token=alive.token, pid=os.getpid())
        deadline = time.monotonic() + GIVE_UP
        while not (work / "finish").exists():  # the "work", until the test says stop
            if time.monotonic() > deadline:
                say(event="gave_up")
                return 3
            time.sleep(0.05)
        # Atomic, so that a polling orchestrator never reads half a result.
        tmp = work / "result.tmp"
        tmp.write_text(json.dumps({"by": os.getpid(), "token": alive.token}))
        tmp.replace(work / "result.json")
        lost = alive.lost
    # Out of the block: renewal stopped, nothing released; the lock now expires by itself.
    say(event="stopped", lost=lost)
    return 0


def main() -> int:
    role, lock_uri, options = sys.argv[1], sys.argv[2], sys.argv[3]
    if role == "orchestrate":
        return orchestrate(lock_uri, options, Path(sys.argv[4]), float(sys.argv[5]))
    if role == "remote":
        return remote(lock_uri, options, sys.argv[4], Path(sys.argv[5]))
    raise SystemExit(f"unknown role {role}")


if __name__ == "__main__":
    sys.exit(main())
