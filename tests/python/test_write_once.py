"""write_once: a result published with a create-if-absent write, which a late writer
cannot overwrite (issue 15), on every store, through real servers."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid

import pytest
from blob_lock import BlobLock, UnsafeStore, write_once, write_once_async
from conftest import Backend


def result_uri(backend: Backend) -> str:
    # `<lock uri>/lock.json`, so that the backend's raw reader (which reads a lock's
    # lockfile) reads the result back; write_once takes any object URI.
    return f"{backend.uri()}/lock.json"


def test_the_first_write_lands_and_a_later_one_changes_nothing(backend):
    uri = result_uri(backend)
    opts = backend.storage_options or None
    assert write_once(uri, b"the result", storage_options=opts) is True
    assert write_once(uri, b"a late result", storage_options=opts) is False
    # The same bytes: what this call would publish is there (its own write answered late,
    # a server error the client retried, looks the same): True, and nothing written.
    assert write_once(uri, b"the result", storage_options=opts) is True
    if backend.raw_get is not None:
        assert backend.raw_get(uri.removesuffix("/lock.json")) == b"the result"
    assert asyncio.run(write_once_async(uri, bytearray(b"x"), storage_options=opts)) is False
    other = result_uri(backend)
    assert asyncio.run(write_once_async(other, memoryview(b"y"), storage_options=opts)) is True


def test_racing_writers_publish_exactly_one_result(backend):
    uri = result_uri(backend)
    opts = backend.storage_options or None

    async def race() -> list[bool]:
        runs = [f"run {i}".encode() for i in range(8)]
        return await asyncio.gather(*(write_once_async(uri, r, storage_options=opts) for r in runs))

    won = asyncio.run(race())
    assert won.count(True) == 1, won
    if backend.raw_get is not None:
        assert backend.raw_get(uri.removesuffix("/lock.json")) == f"run {won.index(True)}".encode()


LATE_REMOTE = """
import sys, time
from blob_lock import write_once
time.sleep(float(sys.argv[3]))
print(write_once(sys.argv[1], sys.argv[2].encode()), flush=True)
"""


def test_a_stale_remote_that_finishes_late_cannot_replace_the_published_result(tmp_path):
    # Two real processes: the remote of a run whose lock was taken over finishes after the
    # run that took over has published its result.
    lock_uri, result = str(tmp_path / "memo" / "lock"), str(tmp_path / "memo" / "result")
    late = [sys.executable, "-c", LATE_REMOTE, result, "stale", "1.5"]
    stale = subprocess.Popen(late, stdout=subprocess.PIPE, text=True)
    with BlobLock(lock_uri) as held:
        fresh = f"fresh, token {held.token}".encode()
        assert write_once(result, fresh)
    assert stale.communicate(timeout=60)[0].strip() == "False"
    assert (tmp_path / "memo" / "result").read_bytes() == fresh


def test_on_a_store_that_ignores_conditions_it_refuses_and_writes_nothing(s3rver):
    from test_unsafe_stores import keys_under

    name = uuid.uuid4().hex
    uri = f"s3://{s3rver.bucket}/{name}/result"
    with pytest.raises(UnsafeStore, match=r"write_once .*create-if-absent") as info:
        write_once(uri, b"r", storage_options=s3rver.options)
    assert info.value.uri == uri
    assert keys_under(s3rver, name) == [], "a result was written where it could be replaced"


@pytest.mark.parametrize(
    ("uri", "data", "error", "match"),
    [
        ("RESULT", "text", TypeError, "encode a str first"),
        ("RESULT", None, TypeError, "data must be bytes"),
        (b"/tmp/x", b"d", TypeError, "result URI must be a str"),
        ("memory://store", b"d", ValueError, "names a store, not an object"),
        ("s3://bucket", b"d", ValueError, "names a bucket or container, not an object"),
        ("RESULT/", b"d", ValueError, "names a folder"),
        ("DIR", b"d", ValueError, "names a folder"),
        ("s3://bucket/r?x=1", b"d", ValueError, r"\?"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(tmp_path, uri, data, error, match):
    (tmp_path / "dir").mkdir()
    if isinstance(uri, str):
        uri = uri.replace("RESULT", str(tmp_path / "result")).replace("DIR", str(tmp_path / "dir"))
    with pytest.raises(error, match=match):
        write_once(uri, data)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir"]


def test_the_store_check_passes_on_a_fresh_server_whose_generations_start_at_1(tmp_path):
    # The check updates its scratch key with a version it does not have. It used to send
    # generation 1, which is the scratch key's own on a server that counts generations from
    # 1 (the GCS test server, fresh): the update landed and a sound store was called unsafe.
    from fake_gcs import FakeGcs

    server = FakeGcs()
    try:
        bucket = f"g-{uuid.uuid4().hex[:12]}"
        server.create_bucket(bucket)
        opts = server.storage_options()
        assert write_once(f"gs://{bucket}/memo/result", b"r", storage_options=opts)
        lock = BlobLock(f"gs://{bucket}/memo/lock", storage_options=opts)
        with lock:
            assert lock.protocol == "cas"
    finally:
        server.close()
