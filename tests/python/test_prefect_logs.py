"""Where blob_lock.prefect's records go: with no Prefect run active, to ``blob_lock.prefect``
(a waiter says once, at INFO, who holds the key it waits for); inside a flow's task run, to
that run's logger, so that the wait, a takeover from a holder that died and a loss reach
Prefect's API (what its UI shows) beside the run's own logs, and the console once, on local
files and S3 on moto. The flows run in processes of their own
(tests/processes/prefect_roles.py) against a Prefect server of this module's own."""

from __future__ import annotations

import logging
import threading
from uuid import uuid4

import pytest
from blob_lock import BlobLock, break_lock
from blob_lock.prefect import HOLDER_LABEL, BlobLockManager
from conftest import _make_backend, eventually
from prefect_server import api_logs, prefect_env, started_roles

EXPIRE = 4.0


@pytest.fixture(params=["file", "s3", "az"])
def shared_backend(request, tmp_path):
    """Local files, S3 on moto, Azure on Azurite (conftest.py marks the last two slow)."""
    return _make_backend(request.param, request, tmp_path)


def records(caplog, text: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if text in r.getMessage()]


def test_a_waiter_says_once_who_holds_the_key(shared_backend, caplog):
    """The holder is elsewhere (a lock this manager did not take: another process's): one
    read of its lockfile names it, with its owner and what is left of its lease."""
    options = shared_backend.storage_options or None
    manager = BlobLockManager(shared_backend.uri(), expire=EXPIRE, storage_options=options)
    k = str(uuid4())
    other = BlobLock(
        f"{manager.prefix}/{k}", expire=EXPIRE, storage_options=options,
        labels={HOLDER_LABEL: "holder1"},
    )  # fmt: skip
    caplog.set_level(logging.INFO, logger="blob_lock.prefect")
    assert other.acquire(timeout=30)
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(manager.acquire_lock(k, "holder2")))
    waiter.start()
    said = f"Prefect lock {k!r}: holder holder2 waits; held by holder holder1 (owner {other.owner}"
    eventually(lambda: records(caplog, said), "the wait logged")
    other.release()
    waiter.join(60)
    assert got == [True]
    (record,) = records(caplog, "waits")  # once, however long the wait
    assert (record.name, record.levelno) == ("blob_lock.prefect", logging.INFO)
    assert "unless renewed" in record.getMessage()
    assert not records(caplog, "took it over")  # released, not expired: no takeover
    manager.release_lock(k, "holder2")


def test_a_waiter_behind_a_holder_of_this_process_names_it(shared_backend, caplog):
    options = shared_backend.storage_options or None
    manager = BlobLockManager(shared_backend.uri(), expire=EXPIRE, storage_options=options)
    k = str(uuid4())
    caplog.set_level(logging.INFO, logger="blob_lock.prefect")
    assert manager.acquire_lock(k, "holder1")
    assert not manager.acquire_lock(k, "holder2", acquire_timeout=0)
    assert not records(caplog, "waits")  # no wait: one attempt
    assert not manager.acquire_lock(k, "holder2", acquire_timeout=0.2)
    (record,) = records(caplog, f"Prefect lock {k!r}: holder holder2 waits")
    assert "held by holder holder1 in this process" in record.getMessage()
    manager.release_lock(k, "holder1")


# -- inside Prefect runs, in processes of their own --------------------------------------------


@pytest.fixture
def roles():
    yield from started_roles()


@pytest.fixture(params=["file", "s3"])
def run_backend(request, tmp_path):
    """Local files and S3 on moto (what is logged does not depend on the store)."""
    return _make_backend(request.param, request, tmp_path)


def logged_run(roles, backend, tmp_path, api, key: str):
    """The ``logged`` role's flow, reporting its logs to ``api``: the role, and its folder."""
    shared = tmp_path / f"shared-{key}"
    shared.mkdir()
    env = prefect_env(
        tmp_path / f"home-{key}",
        api,
        PREFECT_LOGGING_TO_API_ENABLED="true",
        PREFECT_LOCAL_STORAGE_PATH=str(tmp_path / "results"),
    )
    args = ("logged", backend.root, backend.options_json(), key)
    return roles(*args, str(shared), env=env), shared


def finished(role) -> tuple[dict, str]:
    """The role's last line once it exited, and what it wrote on the console."""
    done = role.line(timeout=240)
    assert done["event"] == "done" and done["result"] == "done", done
    assert role.proc.wait(timeout=120) == 0
    role.err.seek(0)
    return done, role.err.read()


def in_the_run(api: str, text: str, flow_run: str, level: int, also: str = "") -> dict:
    """The one record of the run's that the API holds with ``text`` (and ``also``), at
    ``level``, from the task run."""
    found = [r for r in api_logs(api, text) if also in r["message"]]
    assert len(found) == 1, found
    (record,) = found
    assert record["flow_run_id"] == flow_run and record["task_run_id"], record
    assert record["level"] == level, record
    return record


def test_a_wait_in_a_task_run_reaches_its_run_logs(run_backend, roles, tmp_path, prefect_api):
    key = f"wait-{uuid4().hex}"
    options = run_backend.storage_options or None
    blocker = BlobLockManager(run_backend.root, expire=EXPIRE, storage_options=options)
    assert blocker.acquire_lock(key, "blocker")
    role, shared = logged_run(roles, run_backend, tmp_path, prefect_api, key)
    (shared / "go").touch()
    said = f"Prefect lock {key!r}: holder"
    eventually(lambda: api_logs(prefect_api, said), "the wait in the API", within=180)
    blocker.release_lock(key, "blocker")
    done, console = finished(role)
    record = in_the_run(prefect_api, said, done["flow_run"], logging.INFO)
    assert "waits; held by holder blocker (owner" in record["message"]
    assert console.count("waits; held by holder blocker") == 1, console[-5000:]
    assert "took it over" not in console  # the blocker released it


def test_a_takeover_in_a_task_run_reaches_its_run_logs(run_backend, roles, tmp_path, prefect_api):
    key = f"takeover-{uuid4().hex}"
    args = ("hold", run_backend.root, run_backend.options_json(), key, "doomed", "2")
    holder = roles(*args, env=prefect_env(tmp_path / "home-doomed"))
    assert holder.line()["event"] == "ready"
    holder.end()  # SIGKILL: the key stays locked until its lease expires
    role, shared = logged_run(roles, run_backend, tmp_path, prefect_api, key)
    (shared / "go").touch()
    done, console = finished(role)
    took = in_the_run(prefect_api, f"{key!r}: holder", done["flow_run"], logging.WARNING, "took")
    assert "took it over from owner" in took["message"], took
    assert f"{HOLDER_LABEL}=doomed" in took["message"], took
    assert console.count("took it over from") == 1, console[-5000:]


def test_a_loss_in_a_task_run_reaches_its_run_logs(run_backend, roles, tmp_path, prefect_api):
    key = f"loss-{uuid4().hex}"
    role, shared = logged_run(roles, run_backend, tmp_path, prefect_api, key)
    eventually(lambda: (shared / "holding").exists(), "the task running", within=180)
    options = run_backend.storage_options or None
    break_lock(f"{run_backend.root}/{key}", storage_options=options)  # an operator's
    said = f"Prefect lock {key!r} of holder"
    eventually(lambda: api_logs(prefect_api, said), "the loss in the API", within=120)
    (shared / "go").touch()
    done, console = finished(role)  # the write refused, the rollback's release returned
    record = in_the_run(prefect_api, said, done["flow_run"], logging.WARNING)
    assert "was lost while held" in record["message"], record
    assert "it was released at" in record["message"], record  # its cause: the break
    assert console.count("was lost while held") == 1, console[-5000:]
