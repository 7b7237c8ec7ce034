"""blob_lock.prefect across processes, on local files, S3 on moto and Azure on Azurite: a
SERIALIZABLE cached task started in several processes at once runs once and every process
gets its result (and, without the lock manager, runs in each); a result store shipped with
cloudpickle to another process sees the lock taken here; a holder killed with SIGKILL
frees its lock after its expiry; a lock lost in a store outage is logged and the task's
write under it refused. The flows report to one Prefect server of this module's own, on
loopback (tests/processes/prefect_roles.py)."""

from __future__ import annotations

import logging
import time
from uuid import uuid4

import cloudpickle
import pytest
from blob_lock import inspect
from blob_lock.prefect import BlobLockManager
from conftest import _make_backend, eventually
from prefect.filesystems import LocalFileSystem
from prefect.results import ResultStore
from prefect_server import prefect_env, started_roles

# Left out of `make test-fast` (-m "not slow"): Prefect flows in many processes, against a
# Prefect server.
pytestmark = pytest.mark.slow


@pytest.fixture(params=["file", "s3", "az"])
def shared_backend(request, tmp_path):
    """Local files, S3 on moto, Azure on Azurite."""
    return _make_backend(request.param, request, tmp_path)


@pytest.fixture
def roles():
    yield from started_roles()


def run_task_everywhere(roles, backend, tmp_path, api, n: int, locked: bool) -> list[dict]:
    """``n`` processes told to start the flow at once: each one's result."""
    shared = tmp_path / "shared"
    (shared / "keys").mkdir(parents=True)
    (shared / "arrived").write_text("")
    prefix, options = backend.uri(), backend.options_json()
    env = {"PREFECT_LOCAL_STORAGE_PATH": str(shared / "results")}
    procs = [
        roles(
            *("task", prefix, options, str(shared), str(n), "1" if locked else "0"),
            env=prefect_env(tmp_path / f"home-{i}", api, **env),
            stdin=True,
        )
        for i in range(n)
    ]
    for p in procs:
        assert p.line()["event"] == "ready"
    for p in procs:
        p.send("go")
    done = [p.line(timeout=240) for p in procs]
    assert all(d["event"] == "done" for d in done), done
    return done


@pytest.mark.heavy
def test_a_serializable_cached_task_runs_once_among_processes(
    shared_backend, roles, tmp_path, prefect_api
):
    n = 4
    done = run_task_everywhere(roles, shared_backend, tmp_path, prefect_api, n, locked=True)
    ran = (tmp_path / "shared" / "ran").read_text().split()
    assert len(ran) == 1, f"the task ran {len(ran)} times: in {ran}"
    results = [d["result"] for d in done]
    assert results[0]["value"] == 49 and results[0]["pid"] == int(ran[0])
    assert all(r == results[0] for r in results), results  # the one run's result, everywhere


@pytest.mark.heavy
def test_without_the_lock_manager_every_process_runs_it(roles, tmp_path, prefect_api):
    """The race the test above wins is real: under Prefect's default isolation the same
    processes each run the task."""
    backend = _make_backend("file", None, tmp_path)
    n = 3
    done = run_task_everywhere(roles, backend, tmp_path, prefect_api, n, locked=False)
    assert len((tmp_path / "shared" / "ran").read_text().split()) == n
    assert len({d["result"]["token"] for d in done}) == n


def test_a_store_shipped_to_another_process_sees_the_lock(shared_backend, roles, tmp_path):
    options = shared_backend.storage_options or None
    manager = BlobLockManager(shared_backend.uri(), expire=4, storage_options=options)
    store = ResultStore(
        result_storage=LocalFileSystem(basepath=str(tmp_path / "results")), lock_manager=manager
    )
    k = str(uuid4())
    assert store.acquire_lock(k, holder="holder1")
    pickled = tmp_path / "store.pickle"
    pickled.write_bytes(cloudpickle.dumps(store))  # as Prefect ships it to its workers
    seen = roles("look", str(pickled), k, env=prefect_env(tmp_path / "home")).line()
    assert seen.pop("event") == "seen"
    assert seen.pop("holder2_released").startswith(
        f"No lock held by holder2 for transaction with key {k}"
    )
    assert seen.pop("holder2_wrote").startswith(f"Cannot write to result record with key {k}")
    assert seen == {
        "is_locked": True,
        "holder1": True,
        "holder2": False,
        "holder2_takes_it": False,
        "holder1_takes_it_again": True,  # the same holder, elsewhere
        "free_within_0.2s": False,
    }
    assert manager.is_lock_holder(k, holder="holder1")  # nothing changed here
    manager.release_lock(k, holder="holder1")


def test_a_killed_holders_lock_is_taken_after_its_expiry(shared_backend, roles, tmp_path, caplog):
    """The next holder waits (said once, at INFO, naming the holder) and takes the lock
    over (a WARNING naming the holder it took it from): with no Prefect run active, both
    on the module's logger."""
    prefix, expire, k = shared_backend.uri(), 2.0, str(uuid4())
    caplog.set_level(logging.INFO, logger="blob_lock.prefect")
    args = ("hold", prefix, shared_backend.options_json(), k, "doomed", str(expire))
    holder = roles(*args, env=prefect_env(tmp_path / "home"))
    assert holder.line()["event"] == "ready"
    options = shared_backend.storage_options or None
    manager = BlobLockManager(prefix, expire=expire, storage_options=options)
    assert manager.is_locked(k) and manager.is_lock_holder(k, holder="doomed")
    seen_owner = inspect(f"{manager.prefix}/{k}", storage_options=options).owner
    holder.end()  # SIGKILL: nothing released
    killed = time.monotonic()
    assert manager.is_lock_holder(k, holder="doomed")  # until it expires
    # Free within expire plus a poll (expire / 10) after the last renewal, which came before
    # the kill; the bound here is a generous one for a loaded machine.
    assert manager.acquire_lock(k, holder="next", acquire_timeout=expire * 5 + 5)
    waited = time.monotonic() - killed
    assert waited >= expire * 0.5  # watched, not taken at once
    assert manager.is_lock_holder(k, holder="next")
    assert not manager.is_lock_holder(k, holder="doomed")
    said = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    said = [r for r in said if repr(k) in r[2]]
    assert len(said) == 2, said
    (wait, took) = said
    assert wait[:2] == ("blob_lock.prefect", logging.INFO), wait
    assert "holder next waits; held by holder doomed (owner " in wait[2], wait
    assert took[:2] == ("blob_lock.prefect", logging.WARNING), took
    assert f"holder next took it over from owner {seen_owner}" in took[2], took
    assert "prefect.holder=doomed" in took[2], took
    manager.release_lock(k, holder="next")


def test_a_lock_lost_in_an_outage_is_logged_and_its_write_refused(moto_endpoint, tmp_path, caplog):
    """Nobody has taken the lock when its holder learns it lost it: Prefect would write,
    as the lock looks free, but the manager says it is locked until the holder releases."""
    from urllib.parse import urlsplit

    from conftest import _s3_backend
    from fault_proxy import FaultProxy

    backend = _s3_backend(moto_endpoint)
    where = urlsplit(moto_endpoint)
    proxy = FaultProxy(where.hostname or "127.0.0.1", where.port or 80)
    try:
        options = dict(backend.storage_options, aws_endpoint=proxy.url)
        lost: list[Exception] = []
        manager = BlobLockManager(
            backend.uri(), expire=2, storage_options=options, on_lost=lost.append
        )
        results = LocalFileSystem(basepath=str(tmp_path / "results"))
        store = ResultStore(result_storage=results, lock_manager=manager)
        k = str(uuid4())
        caplog.set_level(logging.WARNING, logger="blob_lock.prefect")
        assert store.acquire_lock(k, holder="holder1")
        proxy.reset()  # every connection reset: the store is out of reach past the lease
        eventually(lambda: bool(lost), "the loss reported")
        proxy.heal()
        # Logged on blob-lock's notice thread, the user's on_lost on its callback threads:
        # neither waits for the other.
        said = f"Prefect lock {k!r} of holder holder1 was lost while held"
        eventually(lambda: said in caplog.text, "the loss logged")
        assert not manager.is_lock_holder(k, holder="holder1")
        assert manager.is_locked(k)
        with pytest.raises(RuntimeError, match=f"Cannot write to result record with key {k}"):
            store.write(key=k, obj={"late": True}, holder="holder1")
        store.release_lock(k, holder="holder1")  # the rollback's release
        assert not manager.is_locked(k)
        assert manager.acquire_lock(k, holder="holder2", acquire_timeout=30)
        manager.release_lock(k, holder="holder2")
    finally:
        proxy.close()


def test_a_lock_broken_and_taken_over_refuses_the_first_holders_write(tmp_path, caplog):
    from blob_lock import break_lock

    manager = BlobLockManager(tmp_path / "locks", expire=2)
    store = ResultStore(
        result_storage=LocalFileSystem(basepath=str(tmp_path / "results")), lock_manager=manager
    )
    k = str(uuid4())
    caplog.set_level(logging.WARNING, logger="blob_lock.prefect")
    assert store.acquire_lock(k, holder="holder1")
    break_lock(f"{manager.prefix}/{k}")  # an operator's: holder1 learns it at its next renewal
    eventually(lambda: "was lost while held" in caplog.text, "the loss logged")
    assert manager.acquire_lock(k, holder="holder2", acquire_timeout=0)
    with pytest.raises(RuntimeError, match=f"Cannot write to result record with key {k}"):
        store.write(key=k, obj={"late": True}, holder="holder1")
    with pytest.raises(ValueError, match=r"No lock held by holder1 .*: holder2 holds it"):
        store.release_lock(k, holder="holder1")
    store.write(key=k, obj={"on": "time"}, holder="holder2")
    store.release_lock(k, holder="holder2")
    assert store.read(k).result == {"on": "time"}
