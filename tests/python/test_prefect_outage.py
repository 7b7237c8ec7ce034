"""A store outage while a Prefect task holds its key, on S3 (moto) and Azure (Azurite)
behind a fault proxy that resets every connection: the loss is logged once, with its
cause; the transaction's commit is refused the write, and its rollback's ``release_lock``,
with the store still out of reach, returns instead of failing the task with the store's
error; once the store is back, the key frees by itself after its lease. An outage that
begins only at the release (no loss) is the same: ``release_lock`` returns within seconds,
the task's own error comes out, one WARNING says when the key frees; on an event loop it
waits a second at most."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from uuid import uuid4

import pytest
from blob_lock.prefect import BlobLockManager
from conftest import eventually
from prefect.filesystems import LocalFileSystem
from prefect.results import ResultStore
from prefect.transactions import IsolationLevel, TransactionState, transaction


def test_the_rollback_after_a_loss_in_an_outage_releases_without_error(
    proxied, tmp_path, caplog, monkeypatch
):
    backend, proxy, options, _ = proxied
    if backend.name == "az":
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", proxy.url)  # this process's client
    lost: list[Exception] = []
    manager = BlobLockManager(
        backend.uri(), expire=2, storage_options=json.loads(options), on_lost=lost.append
    )
    store = ResultStore(
        result_storage=LocalFileSystem(basepath=str(tmp_path / "results")), lock_manager=manager
    )
    k = str(uuid4())
    caplog.set_level(logging.DEBUG, logger="blob_lock.prefect")
    with transaction(
        key=k, store=store, isolation_level=IsolationLevel.SERIALIZABLE, write_on_commit=True
    ) as txn:
        assert manager.is_lock_holder(k, txn._holder)
        proxy.reset()  # the store out of reach past the lease, and until the end
        eventually(lambda: bool(lost), "the loss reported")
        txn.stage({"late": True})
    # Prefect refused the write under the lost lock and rolled back; the rollback's
    # release_lock met the outage and returned.
    assert txn.state is TransactionState.ROLLED_BACK
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    (loss,) = [r for r in warnings if r.name == "blob_lock.prefect"]  # once
    said = loss.getMessage()
    assert f"Prefect lock {k!r} of holder {txn._holder} was lost while held" in said
    assert str(lost[0]) in said  # its cause, as the LockLost says it
    assert any("frees itself" in r.getMessage() for r in caplog.records)
    proxy.heal()
    # Nothing was released in the store: the key frees when its lease runs out.
    assert manager.acquire_lock(k, "next", acquire_timeout=30)
    assert not store.exists(k)
    manager.release_lock(k, "next")


# The release's patience at expire 30 s: two request timeouts of 5 s. The old release
# retried until the lease's deadline (23.7 s measured on moto), then raised StoreError.
RELEASE_BOUND = 20.0


def frees(caplog) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "blob_lock.prefect" and r.levelno == logging.WARNING
        and "frees itself" in r.getMessage()
    ]  # fmt: skip


def test_a_task_that_fails_as_the_store_goes_away_fails_with_its_own_error(
    proxied, tmp_path, caplog, monkeypatch
):
    backend, proxy, options, _ = proxied
    if backend.name == "az":
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", proxy.url)
    manager = BlobLockManager(backend.uri(), expire=30, storage_options=json.loads(options))
    store = ResultStore(
        result_storage=LocalFileSystem(basepath=str(tmp_path / "results")), lock_manager=manager
    )
    caplog.set_level(logging.WARNING, logger="blob_lock.prefect")
    k = str(uuid4())
    began = 0.0
    with pytest.raises(ValueError, match="the task's own"):
        with transaction(key=k, store=store, isolation_level=IsolationLevel.SERIALIZABLE):
            proxy.blackhole()  # from here to the end: the release meets it
            began = time.monotonic()
            raise ValueError("the task's own")
    took = time.monotonic() - began
    assert took < RELEASE_BOUND, f"the rollback's release took {took:.1f}s"
    eventually(lambda: frees(caplog), "one WARNING saying when the key frees")
    (said,) = frees(caplog)
    assert repr(k) in said, said


def test_release_lock_in_an_outage_returns_and_on_an_event_loop_waits_a_second_at_most(
    proxied, caplog, monkeypatch
):
    backend, proxy, options, _ = proxied
    if backend.name == "az":
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", proxy.url)
    manager = BlobLockManager(backend.uri(), expire=30, storage_options=json.loads(options))
    caplog.set_level(logging.WARNING, logger="blob_lock.prefect")
    a, b = str(uuid4()), str(uuid4())
    assert manager.acquire_lock(a, "ha", acquire_timeout=30)
    assert manager.acquire_lock(b, "hb", acquire_timeout=30)
    proxy.blackhole()
    began = time.monotonic()
    manager.release_lock(a, "ha")  # before any loss: the store simply does not answer
    assert time.monotonic() - began < RELEASE_BOUND
    eventually(lambda: frees(caplog), "one WARNING saying when the key frees")

    async def on_the_loop() -> float:
        began = time.monotonic()
        manager.release_lock(b, "hb")  # as an async transaction calls it
        return time.monotonic() - began

    # Its one second of patience (ON_LOOP_PATIENCE), not two request timeouts (generous bound).
    assert asyncio.run(on_the_loop()) < 3.0
    eventually(lambda: len(frees(caplog)) == 2, "the second key's WARNING too")
