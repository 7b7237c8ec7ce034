"""The launch gap (issue 15): an orchestrator launches a remote that sits in a queue, and
dies. With `hand_off` a restarted orchestrator waits for the queued remote instead of
launching a duplicate; without it, it launches again once the lock expires. Real processes
killed with SIGKILL, on local files, S3 (moto) and Azure (Azurite)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from blob_lock import LockState, inspect
from conftest import _make_backend

# Left out of `make test-fast` (-m "not slow"): real processes killed with SIGKILL, on every store
pytestmark = pytest.mark.slow

ROLES = str(Path(__file__).parents[1] / "processes" / "launch_roles.py")
EXPIRE = 1.5
GRACE = 30.0
# The remote starts working only after 3 x expire, and late enough that a restart without
# the grace has surely taken the lock over by then on a loaded machine.
REMOTE_DELAY = max(3 * EXPIRE, 8.0)


@pytest.fixture(params=["file", "s3", "az"])
def store(request, tmp_path):
    return _make_backend(request.param, request, tmp_path / "store")


def orchestrator(store, memo: str, events: Path, grace: float) -> subprocess.Popen:
    args = [ROLES, "orchestrate", memo, json.dumps(store.storage_options), str(events)]
    return subprocess.Popen(
        [sys.executable, *args, str(EXPIRE), str(grace), str(REMOTE_DELAY)],
        stdout=subprocess.PIPE,
        text=True,
    )


def lines(events: Path, timeout: float = 60.0, until=None) -> list[dict]:
    """The events recorded so far, waiting (at most ``timeout``) until ``until`` holds."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        seen = [json.loads(x) for x in events.read_text().splitlines()] if events.exists() else []
        if until is None or until(seen) or time.monotonic() > deadline:
            return seen
        time.sleep(0.1)


def finished(seen: list[dict]) -> bool:
    return (
        sum(e["event"] in ("published", "too late") for e in seen)
        >= sum(e["event"] == "launch" for e in seen)
        > 0
    )


def named(seen: list[dict], event: str) -> list[dict]:
    return [e for e in seen if e["event"] == event]


@pytest.mark.parametrize("hand_off", [True, False], ids=["hand_off", "no_hand_off"])
def test_an_orchestrator_killed_while_its_remote_is_queued(store, tmp_path, hand_off):
    memo, events = store.uri(), tmp_path / "events.jsonl"
    first = orchestrator(store, memo, events, GRACE if hand_off else 0)
    said = json.loads(first.stdout.readline())
    assert said["event"] == "handed", said
    first.kill()  # SIGKILL right after the hand-off: no release, no more renewals
    first.wait()

    restart = orchestrator(store, memo, events, GRACE if hand_off else 0)
    out, _ = restart.communicate(timeout=120)
    assert restart.returncode == 0, out
    done = json.loads(out.strip().splitlines()[-1])
    seen = lines(events, until=finished)
    launches, published = named(seen, "launch"), named(seen, "published")
    assert len(published) == 1, seen
    if hand_off:
        # The restart waited for the queued remote: one launch, kept alive when it started.
        assert done == {"event": "done", "launched": False, "result": said["owner"]}, out
        assert len(launches) == 1, seen
        assert named(seen, "kept") == [
            {**named(seen, "kept")[0], "owner": said["owner"], "token": launches[0]["token"]}
        ]
        assert published[0]["owner"] == said["owner"]
    else:
        # What the grace buys: without it the lock expired under the queued remote, the
        # restart launched a duplicate, and the first remote met a lock taken over.
        assert len(launches) == 2, seen
        assert done["launched"] is True, out
        refused = {e["owner"]: e["error"] for e in named(seen, "not kept")}
        assert refused.get(said["owner"]) == "LockStolen", seen
        # The late remote ran anyway; write_once kept it from replacing the result.
        assert len(named(seen, "too late")) == 1, seen
        assert done["result"] == published[0]["owner"], (done, seen)
    opts = store.storage_options or None
    assert inspect(f"{memo}/lock", storage_options=opts).state is not LockState.OURS


def test_three_orchestrators_launch_once_and_all_see_the_result(store, tmp_path):
    memo, events = store.uri(), tmp_path / "events.jsonl"
    procs = [orchestrator(store, memo, events, GRACE) for _ in range(3)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    done = [json.loads(o.strip().splitlines()[-1]) for o in outs]
    assert sorted(d["launched"] for d in done) == [False, False, True], outs
    seen = lines(events, until=finished)
    assert len(named(seen, "launch")) == 1, seen
    assert len(named(seen, "published")) == 1 and not named(seen, "too late"), seen
    assert {d["result"] for d in done} == {named(seen, "launch")[0]["owner"]}, done
