"""blob_lock.mops with a real mops pipeline (issue 16): `pure.magic` with the subprocess
shim, blob root on file://, orchestrators as real processes (some killed with SIGKILL), and
the remote switched on by BLOB_LOCK_MOPS=1 alone; then the adapter in this process (adls://
on Azurite, a pickled lease, a plain mops write racing ours)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Left out of `make test-fast` (-m "not slow"): real mops pipelines through blob_lock.mops
pytestmark = pytest.mark.slow

pytest.importorskip("thds.mops.pure")

PIPELINE = Path(__file__).parents[1] / "processes" / "mops_pipeline"
CALL = "import json, mops_funcs; print(json.dumps(mops_funcs.{}(7)), flush=True)"


def orchestrator(
    tmp_path: Path, adapter: bool, work: float = 3.0, func: str = "slow_square", **extra: str
) -> subprocess.Popen:
    (tmp_path / "home").mkdir(exist_ok=True)  # a home that exists, as users' do
    env = {
        **os.environ,
        "PYTHONPATH": str(PIPELINE),
        # mops's shim runs `python` from PATH: this interpreter's first.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),  # mops keeps a control folder under ~/.mops
        "MOPS_TEST_ROOT": str(tmp_path / "blobs"),
        "MOPS_TEST_RUNS": str(tmp_path / "runs"),
        "MOPS_TEST_WORK": str(work),
        "MOPS_TEST_LAUNCHES": str(tmp_path / "launches"),
        **extra,
    }
    env.pop("BLOB_LOCK_MOPS", None)
    if adapter:
        env["BLOB_LOCK_MOPS"] = "1"
    return subprocess.Popen(
        [sys.executable, "-c", CALL.format(func)], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def runs(tmp_path: Path, what: str = "runs") -> int:
    path = tmp_path / what
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


@pytest.mark.parametrize("case", ["grace", "no_grace", "plain_mops"])
def test_an_orchestrator_killed_while_its_remote_is_queued(tmp_path, case):
    """mops's documented duplicate launch: the orchestrator dies after launching, the remote
    waits in a queue longer than the lease lasts, and the restart launches again. The
    adapter hands the lock off with the launch grace, so the restart waits for the queued
    remote instead; without the grace (or on plain mops) the second launch happens."""
    env = {
        "MOPS_TEST_EXPIRE": "2",  # the lease, shortened from mops's 88 s
        "MOPS_TEST_QUEUE": "15",  # the remote starts this long after its launch
        "BLOB_LOCK_MOPS_GRACE": "0" if case == "no_grace" else "60",
    }
    adapter = case != "plain_mops"
    first = orchestrator(tmp_path, adapter, work=2.0, func="queued_square", **env)
    deadline = time.monotonic() + 120
    while runs(tmp_path, "launches") == 0:
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()[1]
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.wait()
    restart = orchestrator(tmp_path, adapter, work=2.0, func="queued_square", **env)
    assert results([restart]) == [49]
    if case == "grace":
        assert (runs(tmp_path, "launches"), runs(tmp_path)) == (1, 1)
    else:
        assert runs(tmp_path, "launches") == 2


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


def test_a_failed_look_after_keep_alive_starts_stops_it(adapter, tmp_path, monkeypatch):
    """The remote's writer starts a keep-alive, then reads the lockfile's expiry: a store
    error there is mops's CannotMaintainLease, and the keep-alive is stopped, not left
    renewing for ever behind a handle nobody has."""
    from datetime import timedelta

    import blob_lock.mops
    from blob_lock import StoreError, _process, inspect

    uri = str(tmp_path / "lock")
    held = lease.acquire(uri, expire=timedelta(seconds=30))
    looks = []

    def failing_second_look(*args, **kwargs):
        looks.append(args)
        if len(looks) == 2:  # the look after keep_alive started
            raise StoreError("the store went away", uri, True)
        return inspect(*args, **kwargs)

    monkeypatch.setattr(blob_lock.mops, "inspect", failing_second_look)
    live = lambda: {type(item).__name__ for item in list(_process._live)}  # noqa: E731
    assert "KeepAlive" not in live()
    with pytest.raises(lease.CannotMaintainLease, match="the store went away"):
        lease.make_remote_lease_writer(uri)
    assert len(looks) == 2
    assert "KeepAlive" not in live(), "the keep-alive was left running"
    lease.maintain_to_release(held)()


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


def test_a_plain_mops_write_landing_just_after_ours_makes_us_lose(adapter, tmp_path, monkeypatch):
    """A plain mops acquirer that read the lock free before our write writes its lease blind
    just after it: the adapter checks again, as mops does, and loses instead of both holding."""
    from datetime import timedelta

    import blob_lock.mops
    from thds.mops.pure.core.lease.write import LeaseEmitter

    uri, lockfile = str(tmp_path / "lock"), tmp_path / "lock" / "lock.json"
    landed: list[dict] = []
    real_pause = blob_lock.mops._pause

    def mops_write_lands(seconds: float) -> None:
        if not landed:  # during the adapter's pause, right after its own write
            body = LeaseEmitter("mopswriter", timedelta(seconds=88))(None)
            (tmp_path / "mops.tmp").write_text(json.dumps(body))
            (tmp_path / "mops.tmp").replace(lockfile)
            landed.append(body)

    monkeypatch.setattr(blob_lock.mops, "_pause", mops_write_lands)
    assert lease.acquire(uri, expire=timedelta(seconds=88)) is None
    assert landed and json.loads(lockfile.read_text()) == landed[0]  # ours wrote nothing more
    monkeypatch.setattr(blob_lock.mops, "_pause", real_pause)
    assert lease.acquire(uri, expire=timedelta(seconds=88)) is None  # mops's lease is held


def test_the_pause_after_an_acquisition_is_as_long_as_mopss_own(adapter, tmp_path, monkeypatch):
    """mops waits twice its read-and-write time (or its acquire_margin) before it trusts its
    write; the adapter waits at least that long, and 10 ms at the least."""
    from datetime import timedelta

    import blob_lock.mops

    pauses: list[float] = []
    monkeypatch.setattr(blob_lock.mops, "_pause", pauses.append)
    held = lease.acquire(str(tmp_path / "a"), expire=timedelta(seconds=30))
    margin = lease.acquire(
        str(tmp_path / "b"), expire=timedelta(seconds=30), acquire_margin=timedelta(seconds=2)
    )
    assert held is not None and margin is not None
    assert pauses[0] >= 0.005 and pauses[1] >= 1.9, pauses
    held.release()
    margin.release()


REMOTE_COPY = """
import pickle, sys, time, json
from pathlib import Path
from thds.mops import pure  # noqa: F401 (BLOB_LOCK_MOPS=1 installs the adapter)
from thds.mops.pure.core import lease

copy = pickle.loads(bytes.fromhex(sys.argv[1]))
release = lease.maintain_to_release(copy)  # what mops's lazy future does where it resolves
lockfile, deadline = Path(sys.argv[2]), time.monotonic() + 60
while json.loads(lockfile.read_text())["pid"] != str(__import__("os").getpid()):
    assert time.monotonic() < deadline, "the copy never renewed the lock"
    time.sleep(0.05)
release()
"""


def test_a_pickled_lease_keeps_and_releases_the_lock_in_another_process(adapter, tmp_path):
    """mops's lazy result futures carry the acquired lease into the process that resolves
    them: there, maintaining it keeps the lock alive and releasing it releases the lock."""
    import pickle
    from datetime import timedelta

    from blob_lock import LockState, inspect

    uri = str(tmp_path / "lock")
    held = lease.acquire(uri, expire=timedelta(seconds=3))
    env = {**os.environ, "BLOB_LOCK_MOPS": "1"}
    args = [pickle.dumps(held).hex(), str(tmp_path / "lock" / "lock.json")]
    child = subprocess.run(
        [sys.executable, "-c", REMOTE_COPY, *args], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    seen = inspect(uri)
    assert seen.state is LockState.RELEASED and seen.owner == held.writer_id
    held.release()  # the original's release after the copy's: nothing more to do, no error

    again = lease.acquire(uri, expire=timedelta(seconds=3))
    assert again is not None and again.token > held.token
    pickle.loads(pickle.dumps(again)).release()  # a copy never maintained releases too
    assert inspect(uri).state is LockState.RELEASED
    again.release()


def test_adls_uris_lock_on_azure_with_the_environments_credentials(
    adapter, azurite_url, monkeypatch
):
    """adls://ACCOUNT/CONTAINER/PATH locks az://CONTAINER/PATH on that account, with the
    credentials in the environment (here Azurite's), orchestrator and remote alike."""
    from datetime import timedelta

    from conftest import _az_backend
    from servers import AZURITE_ACCOUNT

    monkeypatch.setenv("AZURE_STORAGE_USE_EMULATOR", "true")
    backend = _az_backend(azurite_url)
    container = backend.root.removeprefix("az://")
    memo = f"adls://{AZURITE_ACCOUNT}/{container}/memo/abc"
    # expire 120 s: the orchestrator's first renewal comes after the remote's write has been
    # read (at 30 s one landed between them under a loaded make test, and the body read was
    # the orchestrator's).
    held = lease.acquire(f"{memo}/lock", expire=timedelta(seconds=120))
    assert held is not None
    assert lease.acquire(f"{memo}/lock", expire=timedelta(seconds=30), block=timedelta(0)) is None
    stop = lease.maintain_to_release(held)
    assert lease.read_lease(memo)["writer_id"] == held.writer_id

    remote = (
        "import sys; from thds.mops import pure; from thds.mops.pure.core import lease\n"
        "lease.add_lease_to_maintenance_daemon(\n"
        "    lease.make_remote_lease_writer(sys.argv[1], expected_writer_id=sys.argv[2]))()\n"
    )
    env = {**os.environ, "BLOB_LOCK_MOPS": "1"}
    child = subprocess.run(
        [sys.executable, "-c", remote, f"{memo}/lock", held.writer_id], env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    body = json.loads(backend.raw_get(f"{backend.root}/memo/abc/lock"))
    assert (body["writer_id"], body["writer_name"], body["protocol"]) == (
        held.writer_id, "remote", "cas",
    )  # fmt: skip
    stop()
    body = json.loads(backend.raw_get(f"{backend.root}/memo/abc/lock"))
    assert body["released_at"] and body["token"] == held.token


def test_repeated_single_attempts_take_over_a_dead_holders_lock_after_expire(adapter, tmp_path):
    """mops's lease waiter calls acquire(block=0) again and again: the attempts watch the
    lock as a blocking wait does, so a dead holder's lock is taken after its expire (2 s)
    rather than expire + clock_skew (62 s) by the wall clock."""
    from datetime import timedelta

    uri = str(tmp_path / "lock")
    dies = f"import os, blob_lock; blob_lock.BlobLock({uri!r}, expire=2).acquire(); os._exit(0)"
    subprocess.run([sys.executable, "-c", dies], check=True, timeout=60)
    from blob_lock import inspect

    dead = inspect(uri).token
    began, got = time.monotonic(), None
    while got is None:
        assert time.monotonic() - began < 40, "not taken over before the wall-clock fallback"
        got = lease.acquire(uri, expire=timedelta(seconds=2), block=timedelta(0))
        time.sleep(0.2)
    assert dead is not None and got.token > dead
    got.release()
