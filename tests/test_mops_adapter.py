"""blob_lock.mops with a real mops pipeline (issue 16): `pure.magic` with the subprocess
shim, blob root on file://, orchestrators as real processes (some killed with SIGKILL), and
the remote switched on by BLOB_LOCK_MOPS=1 alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("thds.mops.pure")

PIPELINE = Path(__file__).parent / "mops_pipeline"
CALL = "import json, mops_funcs; print(json.dumps(mops_funcs.slow_square(7)), flush=True)"


def orchestrator(tmp_path: Path, adapter: bool, work: float = 3.0) -> subprocess.Popen:
    env = {
        **os.environ,
        "PYTHONPATH": str(PIPELINE),
        # mops's shim runs `python` from PATH: this interpreter's first.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),  # mops keeps a control folder under ~/.mops
        "MOPS_TEST_ROOT": str(tmp_path / "blobs"),
        "MOPS_TEST_RUNS": str(tmp_path / "runs"),
        "MOPS_TEST_WORK": str(work),
    }
    env.pop("BLOB_LOCK_MOPS", None)
    if adapter:
        env["BLOB_LOCK_MOPS"] = "1"
    return subprocess.Popen(
        [sys.executable, "-c", CALL], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def runs(tmp_path: Path) -> int:
    path = tmp_path / "runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def lockfiles(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "blobs").rglob("lock/lock.json"))


def results(procs: list[subprocess.Popen]) -> list[int]:
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-5000:]
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]


@pytest.mark.parametrize("plain", [0, 1], ids=["all_adapter", "one_plain_mops"])
def test_three_orchestrators_run_the_function_once(tmp_path, plain):
    procs = [orchestrator(tmp_path, adapter=i >= plain) for i in range(3)]
    assert results(procs) == [49, 49, 49]
    assert runs(tmp_path) == 1


def test_the_remote_keeps_the_lease_alive_through_blob_lock(tmp_path):
    proc = orchestrator(tmp_path, adapter=True, work=4.0)
    deadline = time.monotonic() + 120
    seen = None
    while time.monotonic() < deadline and proc.poll() is None:
        for f in lockfiles(tmp_path):
            try:
                body = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if body.get("writer_name") == "remote":
                seen = body
        if seen:
            break
        time.sleep(0.05)
    assert seen is not None, "no remote write seen"
    # blob-lock's fields: the remote kept the lease as blob-lock does, not as mops writes it.
    assert seen["protocol"] == "cas" and seen["token"] >= 1, seen
    assert results([proc]) == [49]


@pytest.mark.parametrize("plain_restart", [False, True], ids=["adapter", "plain_mops_restart"])
def test_a_killed_orchestrator_is_not_run_again_by_its_restart(tmp_path, plain_restart):
    first = orchestrator(tmp_path, adapter=True, work=6.0)
    deadline = time.monotonic() + 120
    while runs(tmp_path) == 0:
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()[1]
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    restart = orchestrator(tmp_path, adapter=not plain_restart)
    assert results([restart]) == [49]
    assert runs(tmp_path) == 1


# -- in this process: install, the URIs, the errors mops's callers catch ---------------------

lease = pytest.importorskip("thds.mops.pure.core.lease")


@pytest.fixture
def adapter(monkeypatch):
    import blob_lock.mops as adapter

    monkeypatch.delenv("BLOB_LOCK_MOPS", raising=False)
    adapter.install()
    try:
        yield adapter
    finally:
        adapter.uninstall()


def test_install_routes_every_lease_call_and_uninstall_restores_mops(adapter, tmp_path):
    from datetime import timedelta

    from blob_lock import LockState, inspect
    from thds.mops.pure.core.lease import maintain

    assert lease.acquire is adapter.acquire and adapter.installed()
    assert maintain.maintain_to_release is adapter.maintain_to_release
    assert os.environ["BLOB_LOCK_MOPS"] == "1"  # inherited by the remotes mops starts
    adapter.install()  # idempotent
    uri = str(tmp_path / "lock")
    held = lease.acquire(uri, expire=timedelta(seconds=30))
    assert held is not None and held.expire_s == 30
    assert lease.acquire(uri, expire=timedelta(seconds=30), block=timedelta(0)) is None
    stop = lease.maintain_to_release(held)  # where mops hands the invocation to its remote
    seen = inspect(uri)
    assert seen.owner == held.writer_id and seen.handed_off and 599 < seen.grace_s <= 600
    assert lease.read_lease(str(tmp_path))["writer_id"] == held.writer_id

    with pytest.raises(lease.LeaseLostError):
        lease.make_remote_lease_writer(uri, expected_writer_id="someone-else")
    remote = lease.make_remote_lease_writer(uri, expected_writer_id=held.writer_id)
    stop_remote = lease.add_lease_to_maintenance_daemon(remote)
    assert inspect(uri).writer_name == "remote" and not inspect(uri).handed_off
    stop_remote()
    stop()
    stop()  # mops releases twice
    assert inspect(uri).state is LockState.RELEASED
    with pytest.raises(lease.CannotMaintainLease):
        lease.make_remote_lease_writer(str(tmp_path / "nothing"), expected_writer_id="x")
    assert lease.read_lease(str(tmp_path / "nothing")) is None

    adapter.uninstall()
    assert lease.acquire is not adapter.acquire and not adapter.installed()
    assert "BLOB_LOCK_MOPS" not in os.environ


def test_mops_uris_are_mapped_and_others_refused(tmp_path, monkeypatch):
    from blob_lock.mops import lock_location

    monkeypatch.setenv("HOME", str(tmp_path))
    home = tmp_path.resolve()
    assert lock_location("file://~/memo/lock") == (str(home / "memo" / "lock"), None)
    assert lock_location(f"file://{home}/m/lock") == (str(home / "m" / "lock"), None)
    assert lock_location("~/plain/lock") == (str(home / "plain" / "lock"), None)
    assert lock_location("adls://acct/cont/memo/x/lock") == (
        "az://cont/memo/x/lock",
        {"azure_storage_account_name": "acct"},
    )
    for bad in ["s3://bucket/memo/lock", "adls://acct", "adls://acct/cont"]:
        with pytest.raises(ValueError, match="mops"):
            lock_location(bad)


def test_a_mops_without_the_expected_lease_functions_is_refused_by_version(monkeypatch):
    import blob_lock.mops as adapter

    monkeypatch.delattr(lease, "make_remote_lease_writer")
    with pytest.raises(RuntimeError, match=r"thds-mops \S+ has no make_remote_lease_writer"):
        adapter.install()
    assert not adapter.installed()
