"""The servers the tests run against, each on a free loopback port: moto's S3 server (with
atomic conditional writes, tests/servers/moto_server.py), Azurite and the GCS fake
(tests/servers/fake_gcs.py). conftest.py starts them for pytest; run as a program, this module
starts one of each with a bucket on it, runs a command with their addresses in its
environment and stops them after, which is how `make test-rust` gives the Rust store
conformance suite (tests/rust/stores.rs) the same stores the Python tests use:

    python tests/servers/servers.py cargo test --test stores

The command's environment gets ``BLOB_LOCK_TEST_STORES``: a JSON object from store name
(``s3``, ``az``, ``gs``) to ``{"root": URI of an empty bucket, "options": storage
options}``, and ``AZURITE_BLOB_STORAGE_URL``, where object_store finds the emulator.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout}s")


def listening(
    argv: Callable[[int], list[str]], what: str, **popen: object
) -> tuple[subprocess.Popen, int]:
    """Starts ``argv(port)`` on a free port and waits until it listens. A port found free
    can be taken before the server binds it (by another pytest-xdist worker's server, or a
    client's outgoing connection): a server that exits before listening is started again on
    another port."""
    for attempt in range(5):
        port = free_port()
        proc = subprocess.Popen(argv(port), **popen)  # type: ignore[call-overload]
        try:
            wait_for_port(port, proc, what)
            return proc, port
        except RuntimeError:
            exited = proc.poll() is not None  # as on a port in use; not a server too slow
            stop(proc)
            if not exited or attempt == 4:
                raise
    raise AssertionError("unreachable")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def npm_command(variable: str, package: str, program: str) -> list[str]:
    """A program the test command installs with npm into .cache/ (or ``$variable``)."""
    explicit = os.environ.get(variable)
    candidates = [explicit] if explicit else []
    candidates += [
        str(ROOT / ".cache" / package / "node_modules" / ".bin" / program),
        shutil.which(program) or "",
    ]
    for c in candidates:
        if c and Path(c).exists():
            return [c]
    raise RuntimeError(
        f"{program} not found: run the test command of the README (make test), which "
        f"installs it with npm, or set {variable} to its path"
    )


def azurite_command() -> list[str]:
    return npm_command("AZURITE_BLOB", "azurite", "azurite-blob")


def loopback_certificate(work: Path) -> tuple[Path, Path, Path]:
    """A server certificate for 127.0.0.1 and localhost from a test authority (trustme), as
    PEM files in ``work``: the authority's (what a client trusts: ``SSL_CERT_FILE``), the
    certificate's chain, its key."""
    import trustme

    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1", "localhost")
    trusted, chain, key = work / "authority.pem", work / "cert.pem", work / "key.pem"
    authority.cert_pem.write_to_path(str(trusted))
    chain.write_bytes(b"".join(pem.bytes() for pem in issued.cert_chain_pems))
    issued.private_key_pem.write_to_path(str(key))
    return trusted, chain, key


def s3_options(endpoint: str, key: str = "testing") -> dict[str, str]:
    """object_store's options for an S3-compatible server on loopback."""
    return {
        "aws_endpoint": endpoint,
        "aws_allow_http": "true",
        "aws_region": "us-east-1",
        "aws_access_key_id": key,
        "aws_secret_access_key": key,
        "aws_virtual_hosted_style_request": "false",
    }


def boto3_s3(endpoint: str, key: str = "testing"):
    """boto3's S3 client for a server on loopback: the tool users reach S3 with."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=key,
    )


def azurite_service(url: str):
    """azure-storage-blob's client for the Azurite at ``url``."""
    from azure.storage.blob import BlobServiceClient

    conn = (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
        f"AccountKey={AZURITE_KEY};BlobEndpoint={url}/{AZURITE_ACCOUNT};"
    )
    return BlobServiceClient.from_connection_string(conn)


@contextlib.contextmanager
def running_moto(work: Path, command: list[str] | None = None) -> Iterator[str]:
    """A moto server from ``command`` (default: tests/servers/moto_server.py, whose conditional
    writes are atomic) on a free loopback port; yields its endpoint."""
    command = command or [sys.executable, str(ROOT / "tests" / "servers" / "moto_server.py")]
    log = open(work / "moto.log", "w")
    proc, port = listening(
        lambda port: [*command, "-H", "127.0.0.1", "-p", str(port)],
        Path(command[-1]).name,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
        log.close()


@contextlib.contextmanager
def running_azurite(work: Path) -> Iterator[str]:
    """Azurite on a free loopback port, in memory; yields its URL."""
    log = open(work / "azurite.log", "w")
    proc, port = listening(
        lambda port: [
            *azurite_command(),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--silent",  # no access log: a line written per request slows it under load
        ],
        "azurite-blob",
        cwd=work,  # Azurite writes its debug log and temp files into its working folder
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)
        log.close()


@contextlib.contextmanager
def every_store(work: Path) -> Iterator[tuple[dict[str, dict], dict[str, str]]]:
    """moto, Azurite and the GCS fake, each with an empty bucket: yields the stores (name to
    root URI and storage options) and the environment variables that reach them."""
    sys.path.insert(0, str(Path(__file__).parent))
    from fake_gcs import FakeGcs

    bucket = f"conformance-{uuid.uuid4().hex[:8]}"
    with running_moto(work) as moto, running_azurite(work) as azurite:
        gcs = FakeGcs()
        try:
            boto3_s3(moto).create_bucket(Bucket=bucket)
            azurite_service(azurite).create_container(bucket)
            gcs.create_bucket(bucket)
            stores = {
                "s3": {"root": f"s3://{bucket}", "options": s3_options(moto)},
                "az": {
                    "root": f"az://{bucket}",
                    "options": {"azure_storage_use_emulator": "true"},
                },
                "gs": {"root": f"gs://{bucket}", "options": gcs.storage_options()},
            }
            yield stores, {"AZURITE_BLOB_STORAGE_URL": azurite}
        finally:
            gcs.close()


def main(command: list[str]) -> int:
    if not command:
        print("usage: python tests/servers/servers.py COMMAND [ARG...]", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="blob-lock-servers-") as work:
        with every_store(Path(work)) as (stores, env):
            env = {**os.environ, **env, "BLOB_LOCK_TEST_STORES": json.dumps(stores)}
            return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
