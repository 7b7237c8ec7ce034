"""The public API as users write it, for type checkers only:
``pyright tests/python/typing_example.py``.

Never run: pytest does not collect it (not ``test_*.py``), and importing it runs nothing (all
the code is in functions). Each ``assert_type`` fails the type check when a type changes;
each ``# type: ignore`` marks a call that must stay a type error (the pyright comment below
makes an ignore that is no longer needed an error too).
"""
# pyright: reportUnnecessaryTypeIgnoreComment=true

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Optional

import blob_lock
from blob_lock import (
    BlobLock,
    BreakOutcome,
    Broken,
    DoctorReport,
    Inspection,
    KeepAlive,
    LockError,
    LockLost,
    LockState,
    LockTimeout,
    Probe,
    ReleaseStatus,
    StoreError,
)

if TYPE_CHECKING:
    from typing_extensions import assert_type
else:  # never executed; keeps the module importable without typing_extensions

    def assert_type(value, typ, /):
        return value


URI = "s3://bucket/jobs/abc"


def on_lost(error: LockLost) -> None:
    print(error.uri)


def sync_usage() -> None:
    lock = BlobLock(URI, expire=30.0, heartbeat=10, timeout=60.0, clock_skew=None)
    BlobLock(
        URI,
        expire=timedelta(seconds=30),
        heartbeat=timedelta(seconds=5),
        timeout=timedelta(minutes=5),
        protocol="lww",
        storage_options={"aws_region": "eu-west-1"},
        settle=timedelta(seconds=2),
        on_lost=on_lost,
        raise_on_lost=False,
    )
    BlobLock(URI, expire="30")  # type: ignore[arg-type]

    with lock as held:
        assert_type(held, BlobLock)
        assert_type(held.owner, str)
        assert_type(held.uri, str)
        assert_type(held.token, Optional[int])
        assert_type(held.held, bool)
        assert_type(held.lost, bool)
        assert_type(held.lost_reason, Optional[str])
        assert_type(held.state, str)
        assert_type(held.protocol, str)
        assert_type(held.expire, float)
        assert_type(held.heartbeat, float)
        assert_type(held.inspect(), Inspection)

    assert_type(lock.acquire(), bool)
    assert_type(lock.acquire(timeout=timedelta(seconds=1)), bool)
    assert_type(lock.try_acquire(), bool)
    status = lock.release()
    assert_type(status, ReleaseStatus)
    if status is ReleaseStatus.HELD_BY_OTHER or status == "no_lockfile":
        print(str(status))

    with blob_lock.locked(URI, timeout=60) as held:
        assert_type(held, BlobLock)

    try:
        with BlobLock(URI, timeout=0) as held:
            with blob_lock.keep_alive(URI, held.owner, on_lost=on_lost) as alive:
                assert_type(alive, KeepAlive)
                assert_type(alive.owner, str)
                assert_type(alive.token, int)
                assert_type(alive.lost_reason, Optional[str])
    except LockTimeout as e:
        assert_type(e.uri, Optional[str])
    except StoreError as e:
        assert_type(e.transient, bool)
    except LockError as e:
        assert_type(e.message, str)

    kept = blob_lock.keep_alive(URI, "owner-id", storage_options={"aws_region": "eu-west-1"})
    assert_type(kept.stop(), None)


def looking_usage() -> None:
    seen = blob_lock.inspect(URI, owner="owner-id")
    assert_type(seen, Inspection)
    assert_type(seen.state, LockState)
    assert_type(seen.free, bool)
    assert_type(seen.owner, Optional[str])
    assert_type(seen.token, Optional[int])
    assert_type(seen.written_at, Optional[datetime])
    assert_type(seen.expires_in, Optional[float])
    assert_type(seen.held_for(), Optional[float])
    assert_type(seen.describe(), str)
    assert_type(seen.to_json(), dict[str, Any])

    free = blob_lock.wait_free(URI, timeout=timedelta(seconds=5), storage_options={})
    assert_type(free, Inspection)
    assert_type(blob_lock.write_once(URI + "/result", b"data"), bool)
    with blob_lock.claim_memo(URI, done=lambda: False, timeout=timedelta(minutes=5)) as claim:
        assert_type(claim, blob_lock.MemoClaim)
        assert_type(claim.launch, bool)
        assert_type(claim.owner, Optional[str])
        assert_type(claim.token, Optional[int])
        assert_type(claim.handover, Optional[str])
        assert_type(claim.wait_done(poll=1.0), bool)
        if claim.handover is not None:  # the remote's side: one string keeps all it holds
            with blob_lock.keep_alive(claim.handover, storage_options={}) as whole:
                assert_type(whole, KeepAlive)
                assert_type(whole.uris, tuple[str, ...])
    broken = blob_lock.break_lock(URI, owner="owner-id", token=3)
    assert_type(broken, Broken)
    assert_type(broken.outcome, BreakOutcome)
    assert_type(broken.found, Optional[Inspection])

    report = blob_lock.doctor(URI, storage_options={"aws_region": "eu-west-1"}, expire=10.0)
    assert_type(report, DoctorReport)
    assert_type(report.cas_safe, bool)
    assert_type(report.probes, tuple[Probe, ...])
    assert_type(report.probes[0].seconds, float)
    assert_type(report.verdict(), str)


def decorator_usage() -> None:
    @BlobLock(URI, timeout=timedelta(minutes=1))
    def work(n: int, label: str = "x") -> float:
        return n / 2

    @BlobLock(URI, expire=60)
    async def work_async(n: int) -> list[str]:
        return [str(n)]

    async def caller() -> None:
        assert_type(await work_async(3), list[str])

    assert_type(work(1), float)
    assert_type(work(1, label="y"), float)
    work("one")  # type: ignore[arg-type]
    unawaited = work_async("three")  # type: ignore[arg-type]
    print(caller, unawaited)


async def async_usage() -> None:
    lock = BlobLock(URI, expire=timedelta(seconds=30))
    assert_type(await lock.acquire_async(), bool)
    assert_type(await lock.acquire_async(timeout=2.5), bool)
    assert_type(await lock.try_acquire_async(), bool)
    assert_type(await lock.release_async(), ReleaseStatus)

    async with lock as held:
        assert_type(held, BlobLock)
        assert_type(held.owner, str)

    async with blob_lock.locked(URI, timeout=timedelta(seconds=10)) as held:
        async with await blob_lock.keep_alive_async(URI, held.owner) as alive:
            assert_type(alive, KeepAlive)
            assert_type(alive.lost, bool)
        assert_type(await alive.stop_async(), None)

    assert_type(await blob_lock.inspect_async(URI), Inspection)
    assert_type(await blob_lock.wait_free_async(URI, timeout=1.5), Inspection)
    assert_type(await blob_lock.write_once_async(URI + "/result", bytearray(b"d")), bool)

    async def exists() -> bool:
        return True

    async with blob_lock.claim_memo_async(URI, done=exists, poll=0.5) as claim:
        assert_type(await claim.wait_done_async(), bool)
        if claim.handover is not None:
            async with blob_lock.keep_alive_async(claim.handover) as whole:
                assert_type(whole, KeepAlive)


def credentials_usage() -> None:
    from datetime import datetime, timezone

    import boto3

    def provider() -> dict[str, object]:
        return {"access_key_id": "k", "secret_access_key": "s", "expires_at": None}

    async def async_provider() -> dict[str, object]:
        return {"token": "t", "expires_at": datetime.now(timezone.utc)}

    BlobLock("s3://bucket/lock", credential_provider=provider)
    BlobLock("s3://bucket/lock", credential_provider=boto3.Session(profile_name="prod"))
    blob_lock.inspect("gs://bucket/lock", credential_provider=async_provider)
    blob_lock.set_credentials("s3://bucket", provider)
    blob_lock.set_credentials("s3://bucket", None)
    source: str = blob_lock.credential_source("s3://bucket/memo/abc/lock")
    assert source
    try:
        BlobLock("s3://bucket/lock", storage_options={"aws_profile": "prod"}).acquire()
    except blob_lock.CredentialsError as e:
        assert_type(e.uri, "str | None")
