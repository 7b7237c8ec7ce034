"""blob_lock.joblib across real processes (tests/processes/joblib_roles.py), on local files and
on S3 (moto) through ``lock_prefix``: processes that miss one call compute it once and all
return it (plain joblib computes it in each), distinct calls run at once, a computing
process killed with SIGKILL has its call taken over after ``expire``, an exception frees
the call at once, a waiter never judges a result joblib has written half of, plain joblib
reads the results both ways, the cached function pickled to joblib.Parallel's workers, and
docs/joblib.md's example as written."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import roles as roles_module
from blob_lock import LockState, list_locks

# Real processes, several at once: left out of `make test-fast`.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ROLES = str(ROOT / "tests" / "processes" / "joblib_roles.py")


class Role(roles_module.Role):
    """tests/processes/joblib_roles.py in a process of its own, its JSON lines read here."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        super().__init__(ROLES, *args, env={**os.environ, **env}, stdin=True)

    def expect(self, event: str, timeout: float = 120.0) -> dict:
        got = self.line(timeout)
        assert got["event"] == event, got
        return got

    def go(self) -> None:
        self.send("go")


@pytest.fixture
def roles(tmp_path):
    started: list[Role] = []
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "log").write_text("")
    (notes / "arrived").write_text("")
    (notes / "looked").write_text("")

    def start(*args: str, **env: str) -> Role:
        started.append(Role(*args, env={"ROLE_DIR": str(notes), **env}))
        return started[-1]

    start.notes = notes  # type: ignore[attr-defined]
    yield start
    for role in started:
        role.end()


def log(roles) -> list[str]:
    return roles.notes.joinpath("log").read_text().splitlines()


def all_call_at_once(roles, kind: str, location: str, xs: list[int], options: dict, **env):
    procs = [
        roles("call", kind, location, str(x), json.dumps(options), ROLE_N=str(len(xs)), **env)
        for x in xs
    ]
    for p in procs:
        p.expect("ready")
    for p in procs:
        p.go()
    return [_result(p) for p in procs]


def _result(p: Role) -> dict:
    while True:
        got = p.line(timeout=180)
        if got["event"] in ("done", "error"):
            return got


@pytest.fixture(params=["files", "s3"])
def locks(request) -> dict:
    """Where the locks live: beside the cache (local files), or on S3 (moto) through
    ``lock_prefix``; the cache is on local files either way."""
    if request.param == "files":
        return {}
    from conftest import _s3_backend

    backend = _s3_backend(request.getfixturevalue("moto_endpoint"))
    return {"lock_prefix": backend.uri("joblib-locks"), "storage_options": backend.storage_options}


def test_four_processes_missing_one_call_compute_it_once(roles, tmp_path, locks):
    done = all_call_at_once(
        roles, "blob", str(tmp_path / "cache"), [7] * 4, locks, ROLE_MODE="arrivals"
    )
    assert [d["event"] for d in done] == ["done"] * 4, done
    assert [d["result"] for d in done] == [49] * 4
    assert all(d["missed"] for d in done), "every process looked before the result was stored"
    starts = [line for line in log(roles) if line.startswith("start")]
    assert len(starts) == 1, log(roles)
    # Every lock of the call released, on the store the locks live in.
    root = locks.get("lock_prefix", str(tmp_path / "cache" / "joblib-locks"))
    seen = list(list_locks(root, storage_options=locks.get("storage_options")))
    assert len(seen) == 1 and seen[0].state is LockState.RELEASED, seen


def test_plain_joblib_computes_it_in_each_process(roles, tmp_path):
    """What the test above guards against: the same four processes on joblib.Memory."""
    done = all_call_at_once(
        roles, "plain", str(tmp_path / "cache"), [7] * 4, {}, ROLE_MODE="arrivals"
    )
    assert [d["result"] for d in done] == [49] * 4
    assert len([line for line in log(roles) if line.startswith("start")]) == 4


def test_distinct_calls_compute_at_once(roles, tmp_path, locks):
    """Each computation waits until all four have started: locks that put distinct calls
    one after the other would leave the first waiting until it gives up."""
    done = all_call_at_once(
        roles, "blob", str(tmp_path / "cache"), [1, 2, 3, 4], locks, ROLE_MODE="starts",
        ROLE_GIVE_UP="60",
    )  # fmt: skip
    assert sorted(d.get("result") for d in done) == [1, 4, 9, 16], done


def calling(role) -> dict:
    """Lets a started role call, once it is ready: its "calling" line (whether it missed)."""
    role.expect("ready")
    role.go()
    return role.expect("calling")


def test_a_killed_computer_is_taken_over_after_expire(roles, tmp_path, locks):
    location, options = str(tmp_path / "cache"), json.dumps({"expire": 2, **locks})
    first = roles("call", "blob", location, "3", options, ROLE_MODE="forever")
    calling(first)
    killed_pid = first.expect("computing")["pid"]
    second = roles("call", "blob", location, "3", options)
    assert calling(second)["missed"]
    assert second.proc.poll() is None and len(log(roles)) == 1  # it waits: the call is held
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait()
    killed_at = time.monotonic()
    assert second.expect("computing", timeout=60)["pid"] == second.proc.pid
    assert time.monotonic() - killed_at < 60  # the liveness bound: taken over, not for ever
    assert _result(second)["result"] == 9
    assert log(roles) == [f"start {killed_pid} 3", f"start {second.proc.pid} 3",
                          f"end {second.proc.pid} 3"]  # fmt: skip


def test_an_exception_frees_the_call_at_once(roles, tmp_path, locks):
    """expire 60: a waiter that had to wait for the lease to expire would miss the bound."""
    location, options = str(tmp_path / "cache"), json.dumps({"expire": 60, **locks})
    first = roles("call", "blob", location, "4", options, ROLE_MODE="raise")
    calling(first)
    first.expect("computing")
    second = roles("call", "blob", location, "4", options)
    calling(second)
    roles.notes.joinpath("go").write_text("")
    failed = _result(first)
    assert failed["event"] == "error" and "failed on purpose" in failed["message"], failed
    assert second.expect("computing", timeout=30)["pid"] == second.proc.pid
    assert _result(second)["result"] == 16


def test_plain_joblib_reads_the_results_both_ways(roles, tmp_path, locks):
    location = str(tmp_path / "cache")
    for writer, reader, x in [("blob", "plain", 5), ("plain", "blob", 6)]:
        for kind in (writer, reader):
            p = roles("call", kind, location, str(x), json.dumps(locks))
            p.expect("ready")
            p.go()
            assert _result(p)["result"] == x * x
        assert [line.split()[0] for line in log(roles) if line.endswith(f" {x}")] == [
            "start",
            "end",
        ], f"{reader} computed what {writer} stored: {log(roles)}"
    # A hit takes no lock: the call that plain joblib stored has none.
    root = locks.get("lock_prefix", str(tmp_path / "cache" / "joblib-locks"))
    seen = list(list_locks(root, storage_options=locks.get("storage_options")))
    assert len(seen) == 1 and seen[0].uri.endswith("/lock"), seen


@pytest.mark.parametrize("validate", ["expires", "young"])
def test_a_waiter_never_judges_a_result_joblib_has_half_written(roles, tmp_path, locks, validate):
    """joblib writes a result's output, then its metadata. The computing process pauses
    between the two until the waiter has looked at the output alone: that look is a call
    still being stored, not a result to judge. joblib's expires_after would raise KeyError
    on the missing time; a callback that says False would delete the fresh output."""
    location = str(tmp_path / "cache")
    options = json.dumps({"poll": 0.05, **locks})
    env = {"ROLE_VALIDATE": validate, "ROLE_MODE": "arrivals", "ROLE_N": "2"}
    writer = roles("call", "blob", location, "3", options, ROLE_BETWEEN="1", **env)
    calling(writer)
    writer.expect("computing")
    waiter = roles("call", "blob", location, "3", options, ROLE_LOOKS="1", **env)
    assert calling(waiter)["missed"]
    assert _result(writer)["result"] == 9
    got = _result(waiter)
    assert got["event"] == "done" and got["result"] == 9, got
    assert roles.notes.joinpath("looked").read_text(), "the waiter looked between the writes"
    assert [line.split()[0] for line in log(roles)] == ["start", "end", "between"], log(roles)


@pytest.mark.parametrize("kind,computed", [("blob", 1), ("plain", 2)])
def test_the_cached_function_pickled_to_parallel_workers(roles, tmp_path, kind, computed):
    """Two loky workers, each computation waiting until both arrived: on plain joblib each
    worker computes the call."""
    p = roles("parallel", kind, str(tmp_path / "cache"), "8", "4", ROLE_MODE="arrivals",
              ROLE_N="2")  # fmt: skip
    assert _result(p)["results"] == [64] * 4  # (its workers print their own lines too)
    starts = [line for line in log(roles) if line.startswith("start")]
    assert len(starts) == computed, log(roles)


DOCS = ROOT / "docs" / "joblib.md"
EXAMPLE = re.compile(r"<!-- readme-test: joblib -->\n```python\n(.*?)```", re.S)


def test_the_docs_example_runs_as_written(tmp_path):
    """docs/joblib.md's script, run twice by two processes at once in one folder: one
    computes, both print its result; a third run finds it cached."""
    (code,) = EXAMPLE.findall(DOCS.read_text())
    (tmp_path / "train.py").write_text(code)

    def run() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "train.py"], cwd=tmp_path, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    runs = [run(), run()]
    outs = [r.communicate(timeout=180) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [err for _, err in outs]
    printed = [out.splitlines() for out, _ in outs]
    assert printed[0][-1] == printed[1][-1], printed
    computed = [out.count("[Memory] Calling") for out, _ in outs]
    assert sorted(computed) == [0, 1], outs
    again = run()
    out, err = again.communicate(timeout=180)
    assert again.returncode == 0, err
    assert "[Memory] Calling" not in out and out.splitlines()[-1] == printed[0][-1]
