"""The release at the end of a ``with`` is best effort: a store that does not answer it (cut
off, or failing) never replaces the block's own exception, never fails a block that
finished, and holds the exit for a few seconds (two request timeouts), not for the lease,
with one WARNING that says when the lock frees itself. A loss is still a loss; ``release()``
called directly still raises, saying when the lock frees itself. On S3 (moto, cut off behind
a proxy) and on local files (the lock's folder replaced by a file: every write fails)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from blob_lock import BlobLock, LockLost, StoreError
from conftest import eventually

# At the default expire (30 s) the exit waits 10 s (two request timeouts of 5 s); the lease's
# deadline, which the release used to retry until, is 27 s after the last renewal.
EXPIRE = 30.0
PATIENCE = 10.0
# Generous: the old exit waited out the lease (21.6 s measured on moto), the new one 10 s.
EXIT_BOUND = 20.0


class Outage:
    """A held lock's store, made to stop answering (``cut``)."""

    def __init__(self, lock: BlobLock, cut) -> None:
        self.lock, self.cut = lock, cut


@contextmanager
def moto_outage(moto_endpoint: str) -> Iterator[Outage]:
    from urllib.parse import urlsplit

    from conftest import _s3_backend
    from fault_proxy import FaultProxy

    backend = _s3_backend(moto_endpoint)
    where = urlsplit(moto_endpoint)
    proxy = FaultProxy(where.hostname or "127.0.0.1", where.port or 80)
    try:
        options = dict(backend.storage_options, aws_endpoint=proxy.url)
        lock = BlobLock(backend.uri(), expire=EXPIRE, storage_options=options)
        yield Outage(lock, proxy.blackhole)
    finally:
        proxy.close()


@contextmanager
def files_outage(tmp_path) -> Iterator[Outage]:
    folder = tmp_path / "lock"
    lock = BlobLock(str(folder), expire=EXPIRE)

    def cut() -> None:
        # Every write of the lockfile now fails: its folder is a file.
        shutil.rmtree(folder)
        folder.write_text("not a folder")

    yield Outage(lock, cut)


@pytest.fixture(params=["file", "s3"])
def outage(request, tmp_path):
    if request.param == "file":
        with files_outage(tmp_path) as o:
            yield o
    else:
        with moto_outage(request.getfixturevalue("moto_endpoint")) as o:
            yield o


def warned(caplog, uri: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING
        and uri in r.getMessage()
        and "frees itself" in r.getMessage()
    ]


def test_the_blocks_own_exception_comes_out_when_the_store_does_not_answer_the_release(
    outage, caplog
):
    caplog.set_level(logging.WARNING, logger="blob_lock")
    began = None
    with pytest.raises(KeyError, match="the block's own"):
        with outage.lock:
            outage.cut()
            began = time.monotonic()
            raise KeyError("the block's own")
    took = time.monotonic() - began
    assert took < EXIT_BOUND, f"the exit waited {took:.1f}s for a release nobody answered"
    assert not outage.lock.held and not outage.lock.lost
    eventually(lambda: warned(caplog, outage.lock.uri), "a WARNING saying when the lock frees")


def test_a_finished_block_is_not_failed_by_a_release_the_store_does_not_answer(outage, caplog):
    caplog.set_level(logging.WARNING, logger="blob_lock")
    with outage.lock:
        outage.cut()
        began = time.monotonic()
    took = time.monotonic() - began
    assert took < EXIT_BOUND, f"the exit waited {took:.1f}s for a release nobody answered"
    eventually(lambda: warned(caplog, outage.lock.uri), "a WARNING saying when the lock frees")
    (line,) = warned(caplog, outage.lock.uri)
    assert "is not failed" in line, line


def test_async_with_keeps_the_blocks_exception_and_its_finished_work(outage, caplog):
    caplog.set_level(logging.WARNING, logger="blob_lock")

    async def body(fail: bool) -> None:
        async with outage.lock:
            outage.cut()
            if fail:
                raise KeyError("the block's own")

    with pytest.raises(KeyError, match="the block's own"):
        asyncio.run(body(True))
    eventually(lambda: warned(caplog, outage.lock.uri), "a WARNING saying when the lock frees")


def test_release_called_directly_still_says_the_store_did_not_answer(tmp_path):
    with files_outage(tmp_path) as o:
        assert o.lock.acquire()
        o.cut()
        with pytest.raises(StoreError, match="the lock frees itself when its last write expires"):
            o.lock.release()


def test_a_loss_is_still_a_loss_at_the_end_of_a_block(tmp_path):
    import json

    folder = tmp_path / "lock"
    with pytest.raises(LockLost):
        with BlobLock(str(folder), expire=EXPIRE) as held:
            body = json.loads((folder / "lock.json").read_text())
            body.update(writer_id="thief", token=held.token + 1)
            (folder / "lock.json").write_text(json.dumps(body))
