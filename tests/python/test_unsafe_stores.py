"""Stores whose conditional writes cannot be trusted: s3rver ignores If-None-Match and
If-Match, plain moto checks them and then writes in a second step. blob-lock must never run
cas on them by default, must refuse cas when asked, and its doctor must say so."""

from __future__ import annotations

import json
import logging
import os
import time
import uuid

import pytest
from blob_lock import BlobLock, UnsafeStore, doctor, keep_alive
from conftest import (
    S3Server,
    assert_first_token,
    cli,
    count_in_processes,
    micros_now,
    proxied_moto,
)
from count_proxy import CountProxy
from servers import boto3_s3

# Left out of `make test-fast` (-m "not slow"): s3rver and plain moto over HTTP
pytestmark = pytest.mark.slow


def s3_client(server: S3Server):
    return boto3_s3(server.endpoint, server.options["aws_access_key_id"])


def keys_under(server: S3Server, prefix: str) -> list[str]:
    listed = s3_client(server).list_objects_v2(Bucket=server.bucket, Prefix=prefix)
    return [o["Key"] for o in listed.get("Contents", [])]


@pytest.mark.heavy
def test_auto_runs_lww_on_s3rver_and_processes_count_exactly(s3rver, workers, tmp_path):
    uri = s3rver.uri()
    n_proc, n_each = 8, 25
    # The lockfile exists before the processes start. Each process's probe deletes its
    # scratch key beside the lock, and s3rver then removes the folder if it looks empty,
    # racing another process's first PUT into it: s3rver crashed here once (ENOENT, an
    # unhandled error event), which no real S3, having no folders, can do.
    with BlobLock(uri, protocol="lww", storage_options=s3rver.options) as first:
        first_token = first.token
    count, done, procs = count_in_processes(
        workers, uri, s3rver.options_json(), tmp_path, n_proc, n_each, expire=2
    )
    assert all(d == {"event": "done", "protocols": ["lww"]} for d in done), done
    # cas would have let several in at once (s3rver, 2026-11-24: 2 of 400, each acquisition
    # creating the lockfile afresh).
    assert count == n_proc * n_each
    key = uri.split("/", 3)[3] + "/lock.json"
    body = json.loads(s3_client(s3rver).get_object(Bucket=s3rver.bucket, Key=key)["Body"].read())
    assert first_token is not None
    assert body["protocol"] == "lww" and body["token"] > first_token
    # Each process said why, once.
    for p in procs:
        p.wait(60)
        warned = p.stderr()
        assert warned.count('protocol "auto" uses lww on this store') == 1, warned
        assert "If-None-Match" in warned and "blob_lock_conditional_writes=trust" in warned


def test_cas_on_s3rver_raises_unsafe_store_and_writes_no_lock(s3rver):
    name = uuid.uuid4().hex
    lock = BlobLock(s3rver.uri(name), protocol="cas", storage_options=s3rver.options)
    with pytest.raises(UnsafeStore, match="If-None-Match") as info:
        lock.acquire(timeout=10)
    assert info.value.uri == s3rver.uri(name)
    assert "blob_lock_conditional_writes=trust" in str(info.value)
    with pytest.raises(UnsafeStore):
        lock.try_acquire()
    with pytest.raises(UnsafeStore):
        keep_alive(s3rver.uri(name), "someone", protocol="cas", storage_options=s3rver.options)
    # No lockfile, and the probe's scratch key is gone.
    assert keys_under(s3rver, name) == []


def test_trusting_a_store_skips_the_check(s3rver):
    # The user's own decision (after doctor --race): cas, as asked, and no probe.
    options = {**s3rver.options, "blob_lock_conditional_writes": "trust"}
    lock = BlobLock(s3rver.uri(), protocol="cas", storage_options=options)
    assert lock.protocol == "cas"
    since = micros_now()
    with lock as held:
        assert_first_token(held.token, since)


def test_doctor_says_cas_is_not_safe_on_s3rver(s3rver):
    done = cli("doctor", s3rver.uri(), *s3rver.options_args())
    assert done.returncode == 3, done.stdout + done.stderr
    assert "cas is NOT safe" in done.stdout and "If-None-Match" in done.stdout
    raced = cli("doctor", s3rver.uri(), *s3rver.options_args(), "--race", "--json")
    assert raced.returncode == 3, raced.stdout + raced.stderr
    report = json.loads(raced.stdout)
    assert report["race"]["cas_safe"] is False
    assert report["race"]["first_double"].startswith("round 1:")


@pytest.mark.timeout(900)
def test_doctor_race_finds_plain_moto_unsafe(plain_moto, racy_moto):
    # Each conditional write alone is refused as it should be, so the probe passes it...
    probes = doctor(plain_moto.uri(), storage_options=plain_moto.options)
    assert probes.cas_safe, probes.verdict()
    # ...but two racers over one condition can both land. Plain moto meets that now and
    # then; with its check-to-write window widened (racy_moto), every race does.
    raced = cli(
        "doctor",
        racy_moto.uri(),
        *racy_moto.options_args(),
        "--race",
        "--racers",
        "8",
        "--rounds",
        "20",
        "--json",
        timeout=300,
    )
    report = json.loads(raced.stdout)
    assert raced.returncode == 3, raced.stdout + raced.stderr
    assert report["create_is_conditional"] and report["update_is_conditional"]
    assert report["race"]["cas_safe"] is False, report["race"]
    assert report["race"]["rounds"] == 1, "the race stops at the first round with two winners"
    assert "landed" in report["race"]["first_double"]
    assert "not atomic under races" in report["verdict"]


def test_doctor_race_passes_stores_whose_conditional_writes_are_atomic(shared_backend):
    options = [f"-o{k}={v}" for k, v in shared_backend.storage_options.items()]
    raced = cli(
        "doctor", shared_backend.uri(), *options, "--race", "--racers", "16", "--rounds", "20"
    )
    assert raced.returncode == 0, raced.stdout + raced.stderr
    assert "20 rounds, 0 with two winners" in raced.stdout, raced.stdout
    # What was seen, and what it does not prove: a rarer race may still find a double.
    verdict = raced.stdout.splitlines()[-1]
    assert "20 rounds of 16 racers: one winner each time" in verdict, verdict
    assert "does not prove the store's conditional writes are atomic" in verdict, verdict
    assert "cas is safe" not in raced.stdout, raced.stdout


def probe_requests(proxy: CountProxy) -> list[str]:
    """The probe's requests: on its scratch key, and its delete (object_store deletes with
    S3's bulk delete, a POST; locks never delete)."""
    return [r.kind for r in proxy.since(0) if ".blob-lock-probe-" in r.path or "?delete" in r.path]


def test_a_process_checks_a_store_once_in_four_requests(moto_endpoint):
    proxy, options, root = proxied_moto(moto_endpoint)
    try:
        first = BlobLock(f"{root}/a", storage_options=options)
        assert first.protocol == "auto", "nothing was asked of the store yet"
        with first:
            assert first.protocol == "cas"
        assert probe_requests(proxy) == ["create", "create", "update", "post"]
        # Every other lock on the store, and a child made by fork, use the verdict.
        second = BlobLock(f"{root}/b", storage_options=options)
        assert second.protocol == "cas"
        with second, BlobLock(f"{root}/c", protocol="cas", storage_options=options):
            pass
        pid = os.fork()
        if pid == 0:
            try:
                with BlobLock(f"{root}/d", storage_options=options):
                    pass
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert len(probe_requests(proxy)) == 4
        assert keys_under_prefix(moto_endpoint, root, ".blob-lock-probe") == []
    finally:
        proxy.close()


def keys_under_prefix(endpoint: str, root: str, needle: str) -> list[str]:
    listed = boto3_s3(endpoint).list_objects_v2(Bucket=root[len("s3://") :])
    return [o["Key"] for o in listed.get("Contents", []) if needle in o["Key"]]


def test_trust_skips_the_check_and_lww_needs_none(moto_endpoint):
    proxy, options, root = proxied_moto(moto_endpoint)
    try:
        trusted = {**options, "blob_lock_conditional_writes": "trust"}
        with BlobLock(f"{root}/a", storage_options=trusted) as held:
            assert held.protocol == "cas"
        with BlobLock(f"{root}/b", protocol="lww", storage_options=options) as held:
            assert held.protocol == "lww"
        assert probe_requests(proxy) == []
    finally:
        proxy.close()


def test_the_fallback_warning_is_logged_once_per_store(s3rver, caplog):
    caplog.set_level(logging.WARNING, logger="blob_lock")
    # A store of its own for this test: the same server under another endpoint spelling.
    options = {**s3rver.options, "aws_endpoint": s3rver.endpoint.replace("127.0.0.1", "localhost")}
    for _ in range(3):
        with BlobLock(s3rver.uri(), storage_options=options) as held:
            assert held.protocol == "lww"
    warnings = [r for r in caplog.records if "uses lww on this store" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]


def test_prune_on_an_lww_store_deletes_within_its_lease_and_keeps_what_is_held(s3rver):
    """s3rver ignores every condition, so blob-lock runs lww there, and prune deletes with
    a plain delete while it holds the lock (docs/guarantees.md, "What prune deletes"): a
    released lock goes, a held one stays held."""
    from blob_lock import PruneOutcome, inspect, prune_locks

    prefix = s3rver.uri("pruned-lww")
    store_options = s3rver.options
    with BlobLock(f"{prefix}/done", protocol="lww", expire=1, storage_options=store_options):
        pass
    time.sleep(1.1)  # prune keeps it until no create of it can be on its way
    held = BlobLock(f"{prefix}/held", protocol="lww", storage_options=store_options)
    assert held.acquire(timeout=30)
    try:
        done = {
            p.uri: p.outcome
            for p in prune_locks(prefix, older_than=0, storage_options=store_options, clock_skew=0)
        }
        assert done == {f"{prefix}/done": PruneOutcome.DELETED, f"{prefix}/held": PruneOutcome.HELD}
        assert inspect(f"{prefix}/done", storage_options=store_options).state == "unlocked"
        assert held.held and not held.lost
    finally:
        held.release()
