"""The stores the soak runs on, each started for one campaign in a folder of its own: local
files; S3 on moto (tests/servers/moto_server.py, conditional writes made atomic), on
LocalStack's own S3 (a second implementation, in a venv of its own under .cache) and on
s3rver (conditions ignored: lww); Azure on Azurite; GCS on the fake. Every store served over
HTTP is reached through the fault proxy (tests/proxies/fault_proxy.py), so that the
nemesis can break the network between the workers and it.

What the nemesis can do to the store itself: ``restart`` one that keeps its data (Azurite on
disk, the GCS fake's snapshot, s3rver on disk), or ``stall`` its process (SIGSTOP, then
SIGCONT: a store that stops answering and then answers from where it was) where a restart
would lose the data (moto and LocalStack keep theirs in memory).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "tests" / "servers"), str(ROOT / "tests" / "proxies")]

from fault_proxy import FaultProxy  # noqa: E402
from servers import (  # noqa: E402
    azurite_command,
    azurite_service,
    boto3_s3,
    free_port,
    npm_command,
    s3_options,
    stop,
    wait_for_port,
)

BUCKET = "soak"

# Every process the soak starts: a client with no credentials asks the clouds' metadata
# services, which are off this machine; here they are a closed loopback port.
CLOSED_METADATA = {
    "AWS_METADATA_ENDPOINT": "http://127.0.0.1:9",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AZURE_MSI_ENDPOINT": "http://127.0.0.1:9/metadata/identity/oauth2/token",
    "IDENTITY_ENDPOINT": "http://127.0.0.1:9/metadata/identity/oauth2/token",
    "GCE_METADATA_HOST": "127.0.0.1:9",
    "GCE_METADATA_IP": "127.0.0.1:9",
}

# LocalStack's S3 (shared TESTING.md): Python 3.13 and these pins, in a venv outside the
# test virtualenv, installed only when its store is asked for.
LOCALSTACK_VENV = ROOT / ".cache" / "localstack"
LOCALSTACK_PACKAGES = [
    "localstack-core[base-runtime]==2026.3.0",
    "cbor2<6",
    "pyopenssl<25",
    "cryptography<45",
    "service-identity",
]


class Unavailable(Exception):
    """A store that cannot run on this machine: the campaign is skipped, saying why."""


class Store:
    """One store for one campaign. ``uri(name)`` is a lock URI on it; ``options`` and
    ``env`` are what the workers reach it with (through the proxy)."""

    name = ""
    protocol = "cas"
    restartable = False  # restart() keeps the data
    stallable = False  # stall() pauses the server's process
    # A request cut in its middle (a reset, an outage, a restart) leaves a torn object that
    # stays so: the store's fault, which no lock survives; the nemesis spares it those.
    tears = False

    def __init__(self, work: Path) -> None:
        self.work = work
        self.proc: subprocess.Popen | None = None
        self.proxy: FaultProxy | None = None
        self.port = 0
        self.options: dict[str, str] = {}
        self.env: dict[str, str] = {}

    def uri(self, name: str) -> str:
        raise NotImplementedError

    def start(self) -> None:
        """Starts the server (if any), its bucket and the proxy before it."""

    def argv(self) -> list[str]:
        raise NotImplementedError

    def launch(self) -> None:
        """Starts the server's process on ``self.port`` and waits until it listens."""
        log = open(self.work / f"{self.name}.log", "a")
        self.proc = subprocess.Popen(
            self.argv(),
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.work,
            env={**os.environ, **CLOSED_METADATA, **self.server_env()},
        )
        wait_for_port(self.port, self.proc, self.name, timeout=90)

    def server_env(self) -> dict[str, str]:
        return {}

    def proxied(self) -> str:
        self.proxy = FaultProxy("127.0.0.1", self.port)
        return self.proxy.url

    def restart(self) -> None:
        assert self.proc is not None
        stop(self.proc)
        self.launch()

    def stall(self, seconds: float) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            self.proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        if self.proxy is not None:
            # Connections cut as it closes are no fault to report (asyncio would print each).
            self.proxy.loop.set_exception_handler(lambda loop, context: None)
            self.proxy.close()
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            stop(self.proc)


class Files(Store):
    name = "files"

    def uri(self, name: str) -> str:
        return str(self.work / "locks" / name)


class Moto(Store):
    name = "moto"
    stallable = True

    def argv(self) -> list[str]:
        server = ROOT / "tests" / "servers" / "moto_server.py"
        return [sys.executable, str(server), "-H", "127.0.0.1", "-p", str(self.port)]

    def start(self) -> None:
        self.port = free_port()
        self.launch()
        boto3_s3(f"http://127.0.0.1:{self.port}").create_bucket(Bucket=BUCKET)
        self.options = s3_options(self.proxied())

    def uri(self, name: str) -> str:
        return f"s3://{BUCKET}/{name}"


class LocalStack(Moto):
    name = "localstack"

    def argv(self) -> list[str]:
        return [str(LOCALSTACK_VENV / "bin" / "python"), "-m", "localstack.runtime.main"]

    def server_env(self) -> dict[str, str]:
        return {
            "SERVICES": "s3",
            "EAGER_SERVICE_LOADING": "1",
            "GATEWAY_LISTEN": f"127.0.0.1:{self.port}",
            "GATEWAY_SERVER": "hypercorn",  # the default listens on 0.0.0.0 whatever it is told
            "DNS_ADDRESS": "0",  # else it binds port 53 on every address
            "PERSISTENCE": "0",
            "DISABLE_EVENTS": "1",
            "LOCALSTACK_CLI": "0",
        }

    def start(self) -> None:
        # (Its SIGTERM can hang: close()'s stop() kills it after a grace.)
        install_localstack(self.work)
        super().start()


def install_localstack(work: Path) -> None:
    python = LOCALSTACK_VENV / "bin" / "python"
    if python.exists():
        return
    base = python_313()
    log = work / "localstack-install.log"
    with open(log, "w") as out:
        steps = [
            [base, "-m", "venv", str(LOCALSTACK_VENV)],
            [str(python), "-m", "pip", "install", "--quiet", *LOCALSTACK_PACKAGES],
        ]
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT).returncode:
                shutil.rmtree(LOCALSTACK_VENV, ignore_errors=True)
                raise Unavailable(f"installing LocalStack failed: see {log}")


def python_313() -> str:
    """A Python 3.13 that runs: ``$LOCALSTACK_PYTHON``, python3.13 on PATH, or pyenv's (whose
    shim on PATH fails where 3.13 is not the version pyenv has selected)."""
    candidates = [os.environ.get("LOCALSTACK_PYTHON"), shutil.which("python3.13")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.13*/bin/python3.13")))
    for c in candidates:
        if c and subprocess.run([c, "-c", ""], capture_output=True).returncode == 0:
            return c
    raise Unavailable(
        "LocalStack's S3 needs Python 3.13: none runs here (set LOCALSTACK_PYTHON to one)"
    )


class S3rver(Store):
    """Conditions ignored: the lock runs lww on it, and the soak measures lww's overlaps."""

    name = "s3rver"
    protocol = "lww"
    # Seen: a PUT held up by the proxy and given up by its client left a lockfile of 0
    # bytes, refused as invalid by every waiter from then on.
    tears = True

    def argv(self) -> list[str]:
        return [
            *npm_command("S3RVER", "s3rver", "s3rver"),
            "-d", str(self.work / "s3rver-data"), "-a", "127.0.0.1", "-p", str(self.port),
            "-s", "--configure-bucket", BUCKET,
        ]  # fmt: skip

    def start(self) -> None:
        self.port = free_port()
        self.launch()
        self.options = s3_options(self.proxied(), "S3RVER")

    def uri(self, name: str) -> str:
        return f"s3://{BUCKET}/{name}"


class Azurite(Store):
    name = "azurite"
    restartable = True
    stallable = True

    def argv(self) -> list[str]:
        return [
            *azurite_command(),
            "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
            "--location", str(self.work / "azurite-data"),  # on disk: a restart keeps it
            "--skipApiVersionCheck", "--disableTelemetry", "--silent",
        ]  # fmt: skip

    def start(self) -> None:
        self.port = free_port()
        self.launch()
        azurite_service(f"http://127.0.0.1:{self.port}").create_container(BUCKET)
        # object_store takes the emulator's address from the environment only.
        self.env = {"AZURITE_BLOB_STORAGE_URL": self.proxied()}
        self.options = {"azure_storage_use_emulator": "true"}

    def uri(self, name: str) -> str:
        return f"az://{BUCKET}/{name}"


class Gcs(Store):
    name = "gcs"
    restartable = True
    stallable = True

    def argv(self) -> list[str]:
        snapshot = self.work / "gcs.snapshot"
        return [sys.executable, str(HERE / "gcs_store.py"), str(self.port), str(snapshot), BUCKET]

    def start(self) -> None:
        self.port = free_port()
        self.launch()
        self.options = {
            "google_service_account_key": json.dumps(
                {**json.loads(self.gcs_key()), "gcs_base_url": self.proxied()}
            ),
            "allow_http": "true",
        }

    def gcs_key(self) -> str:
        """The fake's service-account key (its storage options, printed when it listens)."""
        for _ in range(100):
            for line in (self.work / f"{self.name}.log").read_text().splitlines():
                if line.startswith("{"):
                    return json.loads(line)["google_service_account_key"]
            time.sleep(0.1)
        raise RuntimeError("the GCS fake printed no storage options")

    def uri(self, name: str) -> str:
        return f"gs://{BUCKET}/{name}"


STORES: dict[str, type[Store]] = {
    s.name: s for s in (Files, Moto, Azurite, Gcs, LocalStack, S3rver)
}
