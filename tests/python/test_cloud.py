"""The lock on real clouds, with the user's own credentials: ``make test-cloud`` runs these
against the buckets named in BLOB_LOCK_TEST_S3, BLOB_LOCK_TEST_AZURE and BLOB_LOCK_TEST_GCS
(``s3://bucket/some/prefix``), through the default credential chains, and skips a cloud
whose variable is missing, naming it. Inside ``make test`` the same tests run against moto
(reached through an AWS profile only), Azurite (through a connection string only) and the
fake GCS, so that this code path does not rot while no machine here can reach a cloud."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import blob_lock
import pytest
from blob_lock import BlobLock, keep_alive, write_once
from conftest import METADATA
from servers import AZURITE_ACCOUNT, AZURITE_KEY, boto3_s3

# Left out of `make test-fast` (-m "not slow"): real clouds' code paths against moto, Azurite
# and the GCS fake.
pytestmark = pytest.mark.slow

VARIABLES = {
    "s3": "BLOB_LOCK_TEST_S3",
    "azure": "BLOB_LOCK_TEST_AZURE",
    "gcs": "BLOB_LOCK_TEST_GCS",
}
SCHEMES = {"s3": "s3", "azure": "az", "gcs": "gs"}
CLOUD_ONLY = "BLOB_LOCK_CLOUD_ONLY"  # set by make test-cloud: no local stand-ins


def _local_s3(request, monkeypatch, home: Path) -> tuple[str, dict | None]:
    endpoint = request.getfixturevalue("moto_endpoint")
    bucket = f"cloud-{uuid.uuid4().hex[:12]}"
    boto3_s3(endpoint).create_bucket(Bucket=bucket)
    for k in list(os.environ):
        if k.startswith("AWS_") and k not in METADATA.environment():
            monkeypatch.delenv(k)
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text(
        "[default]\naws_access_key_id = testing\naws_secret_access_key = testing\n"
    )
    (home / ".aws" / "config").write_text(
        f"[default]\nregion = us-east-1\nendpoint_url = {endpoint}\n"
    )
    monkeypatch.setenv("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false")
    return f"s3://{bucket}/cloud", None


def _local_azure(request, monkeypatch) -> tuple[str, dict | None]:
    from azure.storage.blob import BlobServiceClient

    url = request.getfixturevalue("azurite_url")
    conn = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={url}/{AZURITE_ACCOUNT};"
    )
    container = f"cloud-{uuid.uuid4().hex[:12]}"
    BlobServiceClient.from_connection_string(conn).create_container(container)
    for k in list(os.environ):
        if k.startswith("AZURE_") and k not in METADATA.environment():
            monkeypatch.delenv(k)
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
    return f"az://{container}/cloud", None


def _local_gcs(request) -> tuple[str, dict | None]:
    fake = request.getfixturevalue("fake_gcs")
    bucket = f"cloud-{uuid.uuid4().hex[:12]}"
    fake.create_bucket(bucket)
    return f"gs://{bucket}/cloud", fake.storage_options()


@pytest.fixture(params=sorted(VARIABLES))
def target(request, monkeypatch, tmp_path) -> tuple[str, dict | None]:
    """A prefix on one cloud and its storage options: real, or a local stand-in."""
    cloud, variable = request.param, VARIABLES[request.param]
    real = os.environ.get(variable)
    if real:
        return f"{real.rstrip('/')}/{uuid.uuid4().hex}", None
    if os.environ.get(CLOUD_ONLY):
        pytest.skip(f"set {variable} to a prefix on {cloud} (such as "
                    f"{SCHEMES[cloud]}://bucket/"
                    "blob-lock-tests) to run against the real cloud")  # fmt: skip
    monkeypatch.setenv("HOME", str(tmp_path))
    if cloud == "s3":
        return _local_s3(request, monkeypatch, tmp_path)
    if cloud == "azure":
        return _local_azure(request, monkeypatch)
    return _local_gcs(request)


def test_a_lock_cycle_with_contention_fencing_and_a_remote(target):
    prefix, options = target
    uri = f"{prefix}/memo/lock"
    first = BlobLock(uri, storage_options=options, expire=3)
    with first:
        token = first.token
        assert token is not None
        other = BlobLock(uri, storage_options=options, expire=3)
        assert not other.try_acquire(), "a held lock excludes"
        with keep_alive(uri, first.owner, storage_options=options) as kept:
            assert kept.token == token
        seen = blob_lock.inspect(uri, storage_options=options)
        assert seen.owner == first.owner and seen.token == token
    assert other.acquire(timeout=30)
    try:
        assert other.token > token, "fencing tokens grow"
    finally:
        other.release()
    listed = [s.uri for s in blob_lock.list_locks(prefix, storage_options=options)]
    assert listed == [uri]


def test_write_once_and_the_store_check(target):
    prefix, options = target
    result = f"{prefix}/memo/result"
    assert write_once(result, b"first", storage_options=options)
    assert not write_once(result, b"second", storage_options=options)
    report = blob_lock.doctor(f"{prefix}/doctor", storage_options=options)
    assert report.cas_safe, report.verdict()
    assert report.credentials
