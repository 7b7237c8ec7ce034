"""What BlobLockManager refuses, as BlobLock refuses the same values: a prefix that is a
typoed URI (``s3:/bucket``) instead of a local folder of that name, and timeouts that are
not zero or more finite seconds, each error naming its own argument. No request is made."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from blob_lock import BlobLock
from blob_lock.prefect import BlobLockManager

TYPOS = ["s3:/locks/x", "s3:locks/x", "s3//locks/x", "az:/container/x", "gs:/bucket/x"]


@pytest.mark.parametrize("prefix", TYPOS)
def test_a_typoed_uri_is_refused_as_blob_lock_refuses_it(prefix, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as lock_said:
        BlobLock(prefix)
    with pytest.raises(ValueError, match="invalid prefix") as said:
        BlobLockManager(prefix)
    # The same advice: the URI as it should be written, or a Path for a local folder.
    assert said.value.args[0].split(": ", 1)[1] == lock_said.value.args[0].split(": ", 1)[1]
    assert "pathlib.Path" in str(said.value)
    assert list(tmp_path.iterdir()) == []  # no local folder made for it
    # Asked for as a Path, it is the local folder of that name, as for BlobLock.
    local = BlobLockManager(Path(prefix))
    assert local.prefix == str(tmp_path / prefix)
    assert local.acquire_lock("k", "holder1", acquire_timeout=0)
    local.release_lock("k", "holder1")


BAD = [-1, -0.5, math.nan, math.inf, 10**9]


def blob_lock_says(value: float) -> str:
    """What BlobLock says of ``value`` as its timeout, less the argument's name."""
    with pytest.raises(ValueError) as said:
        BlobLock("memory://x", timeout=value)
    message = str(said.value)
    assert message.startswith("timeout ")
    return message.removeprefix("timeout ")


@pytest.mark.parametrize("value", BAD)
def test_the_managers_timeout_is_checked_as_blob_locks(value, tmp_path):
    with pytest.raises(ValueError) as said:
        BlobLockManager(tmp_path, timeout=value)
    assert str(said.value) == "timeout " + blob_lock_says(value)


@pytest.mark.parametrize("argument", ["acquire_timeout", "hold_timeout"])
@pytest.mark.parametrize("value", BAD)
def test_acquire_lock_refuses_bad_timeouts_naming_them(argument, value, tmp_path):
    manager = BlobLockManager(tmp_path)
    expected = f"{argument} " + blob_lock_says(value)
    with pytest.raises(ValueError) as said:
        manager.acquire_lock("k", "holder1", **{argument: value})
    assert str(said.value) == expected
    assert not manager.is_locked("k")  # refused before anything was taken
    assert manager.acquire_lock("k", "holder1", acquire_timeout=0)
    with pytest.raises(ValueError) as again:  # the holder's acquisition again: refused too
        manager.acquire_lock("k", "holder1", **{argument: value})
    assert str(again.value) == expected
    manager.release_lock("k", "holder1")


@pytest.mark.parametrize("value", BAD)
def test_wait_for_lock_refuses_a_bad_timeout_naming_it(value, tmp_path):
    manager = BlobLockManager(tmp_path)
    with pytest.raises(ValueError) as said:
        manager.wait_for_lock("k", timeout=value)
    assert str(said.value) == "timeout " + blob_lock_says(value)
