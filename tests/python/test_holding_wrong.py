"""Ways to hold it wrong that used to answer wrong: a URI with a typo that became a local
folder, a BlobLock that could not be pickled for a spawned process, async context managers
with two spellings, a doctor that called a store safe after a sequential probe."""

from __future__ import annotations

import asyncio
import gc
import multiprocessing
import pickle
import subprocess
import sys
import weakref
from pathlib import Path

import blob_lock
import pytest
from blob_lock import BlobLock, claim_memo_async, keep_alive_async

TYPOS = [
    ("s3//bucket/memo/lock", "s3://bucket/memo/lock"),
    ("gs:/bucket/memo/lock", "gs://bucket/memo/lock"),
    ("az:container/memo/lock", "az://container/memo/lock"),
    ("S3//bucket/memo/lock", "s3://bucket/memo/lock"),
    ("file:tmp/lock", "file:///tmp/lock"),
]


@pytest.mark.parametrize(("typo", "meant"), TYPOS)
def test_a_mistyped_uri_is_refused_with_the_fix_everywhere(typo, meant, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a typo would have made its folder
    calls = {
        "BlobLock": lambda: BlobLock(typo),
        "inspect": lambda: blob_lock.inspect(typo),
        "keep_alive": lambda: blob_lock.keep_alive(typo, "owner"),
        "write_once": lambda: blob_lock.write_once(typo + "/result", b"x"),
        "list_locks": lambda: list(blob_lock.list_locks(typo)),
        "claim_memo": lambda: blob_lock.claim_memo(typo, done=lambda: False).__enter__(),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError) as e:
            call()
        assert meant in str(e.value) and "pathlib.Path" in str(e.value), (name, str(e.value))
    done = subprocess.run(
        [sys.executable, "-m", "blob_lock", "run", typo, "--", "true"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and meant in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == [], "nothing was made locally"


def test_a_path_that_looks_like_a_uri_is_a_local_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with BlobLock(Path("s3:bucket") / "lock") as held:
        assert held.held
    assert (tmp_path / "s3:bucket" / "lock" / "lock.json").exists()
    with BlobLock(f"file://{tmp_path}/s3/bucket/lock"):
        pass
    assert (tmp_path / "s3" / "bucket" / "lock" / "lock.json").exists()


def _acquire_in_child(lock: BlobLock) -> tuple[str, int | None, str]:
    with lock as held:
        return held.owner, held.token, held.uri


def test_an_unheld_lock_pickles_as_its_configuration_for_spawned_processes(tmp_path):
    lock = BlobLock(tmp_path / "lock", expire=7, labels={"run": "r1"})
    copy = pickle.loads(pickle.dumps(lock))
    assert (copy.uri, copy.expire, copy.labels) == (lock.uri, 7.0, {"run": "r1"})
    assert copy.owner != lock.owner, "a copy is a lock of its own"
    for method in ("spawn", "forkserver"):
        with multiprocessing.get_context(method).Pool(1) as pool:
            owner, token, uri = pool.apply(_acquire_in_child, (lock,))
        assert uri == lock.uri and owner != lock.owner and token is not None
    assert lock.inspect().state.value == "released"


def test_locks_made_with_the_same_options_keep_one_copy_and_merge_nothing_else():
    # Thousands of locks made with expire=30 keep one options dict (200 bytes each
    # otherwise); a pickled or decorated copy must still get exactly what was given.
    a, b = BlobLock("memory://opts/a", expire=30.0), BlobLock("memory://opts/b", expire=30.0)
    assert a._options is b._options
    as_int = BlobLock("memory://opts/c", expire=30)
    assert as_int._options is not a._options and type(as_int._options["expire"]) is int
    flag = BlobLock("memory://opts/d", raise_on_lost=True)
    assert BlobLock("memory://opts/e", raise_on_lost=False)._options == {"raise_on_lost": False}
    assert flag._options == {"raise_on_lost": True}
    copy = pickle.loads(pickle.dumps(as_int))
    assert copy.expire == 30.0 and copy.uri == "memory://opts/c"

    # A callback is the user's object: not kept by any cache once the lock is gone.
    def on_lost(error):
        pass

    seen = weakref.ref(on_lost)
    lock = BlobLock("memory://opts/f", on_lost=on_lost)
    del lock, on_lost
    gc.collect()
    assert seen() is None


def test_a_held_lock_refuses_to_pickle_and_names_keep_alive(tmp_path):
    with BlobLock(tmp_path / "lock") as held:
        with pytest.raises(TypeError, match=r"keep_alive\(uri, owner\)"):
            pickle.dumps(held)
    pickle.dumps(held)  # released: its configuration again


def test_every_async_context_manager_takes_async_with_x_async(tmp_path):
    uri = str(tmp_path / "lock")

    async def main() -> None:
        async with BlobLock(uri) as held:
            async with keep_alive_async(uri, held.owner) as kept:
                assert kept.owner == held.owner and not kept.lost
            assert kept.lost is False
            started = await keep_alive_async(uri, held.owner)  # the other spelling works
            await started.stop_async()
        async with claim_memo_async(str(tmp_path / "memo"), done=lambda: False) as claim:
            assert claim.launch
        with pytest.raises(TypeError, match=r"async with claim_memo_async\("):
            await claim_memo_async(str(tmp_path / "memo2"), done=lambda: False)

    asyncio.run(main())
    with pytest.raises(TypeError, match="owner must be"):
        keep_alive_async(uri, 5)  # type: ignore[arg-type]  # bad arguments raise at once


def test_doctor_says_what_a_sequential_probe_did_not_check(moto_endpoint):
    from servers import boto3_s3, s3_options

    boto3_s3(moto_endpoint).create_bucket(Bucket="doctor-words")
    options = s3_options(moto_endpoint)
    probed = blob_lock.doctor("s3://doctor-words/d", storage_options=options)
    assert probed.cas_safe
    words = probed.verdict()
    assert "one request at a time" in words and "--race" in words, words
    assert "cas is safe here" not in words
    raced = blob_lock.doctor("s3://doctor-words/r", storage_options=options, race=True,
                             racers=4, rounds=3)  # fmt: skip
    said = raced.verdict()
    assert "3 rounds of 4 racers: one winner each time" in said, said
    assert "does not prove" in said and "cas is safe" not in said, said
    cli = subprocess.run(
        [sys.executable, "-m", "blob_lock", "doctor", "s3://doctor-words/c",
         *[f"-o{k}={v}" for k, v in options.items()]],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert "not checked" in cli.stdout and "--race" in cli.stdout, cli.stdout


def test_an_invalid_lockfile_is_reported_after_a_few_reads_not_a_request_timeout(
    moto_endpoint,
):
    """A look from outside reads as lww does (a read may meet a write in flight), but the
    same undecodable version read three times is no write in flight: it used to be read
    again for a whole request timeout (about 100 reads, 5 s) by inspect, status and ls."""
    from servers import boto3_s3, s3_options

    client = boto3_s3(moto_endpoint)
    client.create_bucket(Bucket="invalid-looks")
    client.put_object(Bucket="invalid-looks", Key="bad/lock.json", Body=b"not json")
    options = s3_options(moto_endpoint)
    reads = blob_lock.stats()["requests"]["read"]["ok"]
    with pytest.raises(blob_lock.InvalidLockFile, match="not JSON"):
        blob_lock.inspect("s3://invalid-looks/bad", storage_options=options)
    (listed,) = blob_lock.list_locks("s3://invalid-looks", storage_options=options)
    assert listed.state.value == "invalid" and "not JSON" in (listed.problem or "")
    assert blob_lock.stats()["requests"]["read"]["ok"] - reads <= 6


def test_ls_of_a_missing_bucket_says_so_before_any_header(moto_endpoint):
    from servers import s3_options

    done = subprocess.run(
        [sys.executable, "-m", "blob_lock", "ls", "s3://no-such-bucket-here",
         *[f"-o{k}={v}" for k, v in s3_options(moto_endpoint).items()]],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1, done
    assert done.stdout == "", "no header for a listing that failed"
    assert "the bucket or container does not exist" in done.stderr
    assert "create it first" in done.stderr


def test_a_look_never_says_free_when_it_could_not_see(moto_endpoint, azurite_url, tmp_path):
    """inspect, wait_free and `status` on a bucket or container that does not exist, or
    through an Azure endpoint without the account's path, raise what acquire raises."""
    from servers import AZURITE_ACCOUNT, AZURITE_KEY, s3_options

    cases = [
        ("s3://no-such-bucket-look/lock", s3_options(moto_endpoint), "does not exist"),
        ("az://no-such-container/lock", {"azure_storage_use_emulator": "true"}, "does not exist"),
        (
            "az://some-container/lock",
            {
                "azure_storage_account_name": AZURITE_ACCOUNT,
                "azure_storage_account_key": AZURITE_KEY,
                "azure_storage_endpoint": azurite_url,  # the account's path left out
                "azure_allow_http": "true",
            },
            "check the endpoint",
        ),
    ]
    for uri, options, says in cases:
        looks = {
            "inspect": lambda u=uri, o=options: blob_lock.inspect(u, storage_options=o),
            "wait_free": lambda u=uri, o=options: blob_lock.wait_free(
                u, timeout=5, storage_options=o
            ),
            "acquire": lambda u=uri, o=options: BlobLock(u, storage_options=o).acquire(timeout=5),
        }
        for name, look in looks.items():
            try:
                got = look()
            except blob_lock.StoreError as e:
                assert says in str(e), (uri, name, str(e))
            else:
                raise AssertionError(f"{name} {uri} saw {got!r} where it could not see")
        done = subprocess.run(
            [sys.executable, "-m", "blob_lock", "status", uri,
             *[f"-o{k}={v}" for k, v in options.items()]],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 1 and "unlocked" not in done.stdout, done


def test_keep_alive_on_a_released_lock_says_released_not_held(tmp_path):
    """A remote that starts after its orchestrator released the lock: the error says the
    lock was released and nobody holds it, not that its own owner id holds it."""
    from blob_lock import LockStolen, keep_alive

    uri = tmp_path / "lock"
    with BlobLock(uri) as held:
        owner = held.owner
    with pytest.raises(LockStolen) as e:
        with keep_alive(uri, owner):
            pass
    msg = str(e.value)
    assert "released" in msg and "nobody holds it" in msg and "it is held by" not in msg, msg


def test_a_lock_whose_turn_holder_is_garbage_is_collected_with_it():
    """A task abandoned while it held a lock object's turn (its coroutine holding the lock,
    the lock's turn holding the task) is collected with the lock: the turn's holder is
    visible to Python's cycle collector, not hidden inside the native lock."""

    class Holder:  # stands for the task: it holds the lock, as the task's coroutine does
        lock: BlobLock

    holder = Holder()
    holder.lock = BlobLock("memory://gc-turn/lock")
    assert holder.lock._native.take_turn(holder)
    gone = weakref.ref(holder)
    del holder
    gc.collect()
    assert gone() is None, "the turn kept its holder and the lock alive"
