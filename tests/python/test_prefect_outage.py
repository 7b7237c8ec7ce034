"""A store outage while a Prefect task holds its key, on S3 (moto) and Azure (Azurite)
behind a fault proxy that resets every connection: the loss is logged once, with its
cause; the transaction's commit is refused the write, and its rollback's ``release_lock``,
with the store still out of reach, returns instead of failing the task with the store's
error; once the store is back, the key frees by itself after its lease."""

from __future__ import annotations

import json
import logging
from uuid import uuid4

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
    assert any("did not reach the store" in r.getMessage() for r in caplog.records)
    proxy.heal()
    # Nothing was released in the store: the key frees when its lease runs out.
    assert manager.acquire_lock(k, "next", acquire_timeout=30)
    assert not store.exists(k)
    manager.release_lock(k, "next")
