"""Test backends: memory, file, S3 (moto's server) and Azure (Azurite), the servers started
here on free loopback ports and stopped after the session. Every test that takes the
``backend`` fixture runs on all four."""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from metadata_trap import MetadataTrap
from recorded_moto import Recorder
from run_order import RunOrder
from servers import (
    ROOT,
    azurite_service,
    boto3_s3,
    listening,
    npm_command,
    running_azurite,
    running_moto,
    s3_options,
    stop,
)

# Before any client is made: every cloud's metadata service is this loopback trap, for this
# process and every process it starts (tests/servers/metadata_trap.py).
METADATA = MetadataTrap()
os.environ.update(METADATA.environment())

# A handler on the root logger before anything imports thds.core (mops), which otherwise
# puts its own console handler there: records logged after their test ended (a loss
# reported late, azure-identity's credential chain) went through it past pytest's capture,
# into the run's output. pytest's own handlers still capture each test's records. Nor do
# the processes the tests start write thds's log files into HOME.
logging.getLogger().addHandler(logging.NullHandler())
os.environ["THDS_CORE_LOG_FILEPATH"] = ""

# Before any test module imports Prefect (test_prefect*.py): its home is a folder of the
# worker's own, it reaches no API server unless a test names one, and sends no telemetry.
# Removed when the process exits (600 had piled up in /tmp, one per worker and run).
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="prefect-home-")
atexit.register(shutil.rmtree, os.environ["PREFECT_HOME"], ignore_errors=True)
os.environ.pop("PREFECT_API_URL", None)
os.environ["DO_NOT_TRACK"] = "1"
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"

# A run started in the background by a shell without job control (`make test &` in a script,
# some CI runners) inherits SIGINT ignored, and so would every process the tests start: the
# tests of what Ctrl-C does would fail (seen 2026-11-28, pytest run without `timeout`, which
# resets it). A handler here is reset to the default in each child at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# What `make test-fast` leaves out (`-m "not slow"`): the stores over HTTP (their tests run
# against moto, Azurite and the GCS fake), found here by their fixtures and parameters; the
# files whose tests start many processes, kill them or hold thousands of locks mark
# themselves (`pytestmark = pytest.mark.slow`). What stays runs on memory:// and local files.
HTTP_FIXTURES = {"moto_endpoint", "azurite_url", "own_azurite", "fake_gcs", "s3rver"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("heavy"):
            # Two lanes for the heavy tests (`make test-python`: -n 2 --dist loadgroup): those on
            # an Azurite of their own, whose node thread is their bottleneck, one after the
            # other; beside them, one after the other, those whose load is this machine's
            # other core (memory, files, moto, s3rver). Mostly holds, so two lanes shorten the
            # wait (docs/development.md has the figures).
            lane = "own_azurite" if "own_azurite" in item.fixturenames else "the_rest"
            item.add_marker(pytest.mark.xdist_group(f"heavy_{lane}"))
        params = getattr(getattr(item, "callspec", None), "params", {})
        over_http = params.get("backend") in {"s3", "az", "gs"} or params.get("shared_backend") in {
            "s3",
            "az",
            "gs",
        }
        if over_http or HTTP_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def pytest_configure(config: pytest.Config) -> None:
    # The longest tests first (tests/python/run_order.py); it sorts after the hook above.
    config.pluginmanager.register(RunOrder(config), "run_order")


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory):
    # A moto already running, at this address: the tests in an emulated arm64 root reach the
    # host's (platforms/test_arm64.sh), which does not run moto at emulated speed.
    given = os.environ.get("BLOB_LOCK_TEST_MOTO")
    if given:
        yield given
        return
    with running_moto(tmp_path_factory.mktemp("moto")) as endpoint:
        yield endpoint


@dataclass
class S3Server:
    """An S3-compatible server for one test session, and a bucket on it."""

    endpoint: str
    bucket: str
    options: dict[str, str]

    def uri(self, name: str | None = None) -> str:
        return f"s3://{self.bucket}/{name or uuid.uuid4().hex}"

    def options_json(self) -> str:
        return json.dumps(self.options)

    def options_args(self) -> list[str]:
        return [f"-o{k}={v}" for k, v in self.options.items()]


S3RVER_BUCKET = "s3rver-bucket"


@pytest.fixture(scope="module")
def recorder(tmp_path_factory) -> Recorder:
    """moto recording which keys signed each request (test_credentials.py,
    test_first_contact.py)."""
    r = Recorder(tmp_path_factory.mktemp("moto-recorded"))
    yield r
    stop(r.proc)


@pytest.fixture
def aws_home(tmp_path, monkeypatch, recorder) -> Path:
    """A laptop with no AWS_ACCESS_KEY_ID: HOME and the AWS files in a folder of the
    test's own, the endpoint of moto in the environment, metadata closed."""
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_ENDPOINT_URL", recorder.endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false")
    for k, v in METADATA.environment().items():  # deleted above with the rest of AWS_*
        monkeypatch.setenv(k, v)
    return home / ".aws"


@pytest.fixture(scope="session")
def s3rver(tmp_path_factory) -> S3Server:
    """s3rver (npm): accepts If-None-Match and If-Match and ignores them, and its writes are
    not atomic for readers. The store on which cas would let two owners in."""
    work = tmp_path_factory.mktemp("s3rver")
    log = open(work / "s3rver.log", "w")
    proc, port = listening(
        lambda port: [
            *npm_command("S3RVER", "s3rver", "s3rver"),
            "-d",
            str(work / "data"),
            "-a",
            "127.0.0.1",
            "-p",
            str(port),
            "-s",
            "--configure-bucket",
            S3RVER_BUCKET,
        ],
        "s3rver",
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        endpoint = f"http://127.0.0.1:{port}"
        yield S3Server(endpoint, S3RVER_BUCKET, s3_options(endpoint, "S3RVER"))
    finally:
        stop(proc)


def start_moto(tmp_path_factory, name: str, command: list[str]):
    """A moto server from `command` (plus host and port) on a free loopback port, with one
    bucket; yields its S3Server and stops it after."""
    with running_moto(tmp_path_factory.mktemp(name), command) as endpoint:
        bucket = f"{name}-bucket"
        boto3_s3(endpoint).create_bucket(Bucket=bucket)
        yield S3Server(endpoint, bucket, s3_options(endpoint))


@pytest.fixture(scope="session")
def plain_moto(tmp_path_factory) -> S3Server:
    """moto's own server as PyPI ships it: conditional PutObject checked, then written in a
    second step, so that racing writers can both win."""
    yield from start_moto(
        tmp_path_factory, "plain-moto", [str(Path(sys.executable).parent / "moto_server")]
    )


@pytest.fixture(scope="session")
def racy_moto(tmp_path_factory) -> S3Server:
    """plain moto with a pause between its check and its write (tests/servers/racy_moto_server.py):
    racing conditional writes both land in every race."""
    server = ROOT / "tests" / "servers" / "racy_moto_server.py"
    yield from start_moto(tmp_path_factory, "racy-moto", [sys.executable, str(server)])


@pytest.fixture(scope="session")
def azurite_url(tmp_path_factory):
    with running_azurite(tmp_path_factory.mktemp("azurite")) as url:
        # object_store reads the emulator's address from here only; subprocesses inherit it.
        os.environ["AZURITE_BLOB_STORAGE_URL"] = url
        yield url


@pytest.fixture
def own_azurite(tmp_path):
    """An Azurite of this test's own, empty: the shared one slows with every blob the
    other tests left in it. Reach it with ``AZURITE_BLOB_STORAGE_URL`` set to its URL."""
    with running_azurite(tmp_path) as url:
        yield url


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory) -> str:
    """The URL of the run's one Prefect server, shared by every worker
    (tests/python/prefect_server.py); stopped by pytest_sessionfinish below."""
    from prefect_server import shared_api

    return shared_api(tmp_path_factory)


def pytest_sessionfinish(session: pytest.Session) -> None:
    # In the run's main process only (under pytest-xdist the workers' sessions end first).
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        from prefect_server import stop_shared

        # pytest's own factory (a private name): its folder is the one the workers' share.
        stop_shared(session.config._tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def fake_gcs():
    from fake_gcs import FakeGcs

    server = FakeGcs()
    yield server
    server.close()


@dataclass
class Backend:
    """One store as the tests see it."""

    name: str
    root: str
    storage_options: dict = field(default_factory=dict)
    # Writes raw bytes to a lockfile, bypassing the lock (to plant corrupt or foreign files).
    raw_put: Callable[[str, bytes], None] | None = None
    raw_get: Callable[[str], bytes | None] | None = None
    # Deletes the object at a URI under the root (no lock.json added), bypassing the lock.
    raw_delete: Callable[[str], None] | None = None
    # Writes raw bytes to the object at a URI under the root (no lock.json added).
    raw_put_object: Callable[[str, bytes], None] | None = None
    # Whether other processes see the same store (memory:// is per process).
    shared_across_processes: bool = True

    def uri(self, name: str | None = None) -> str:
        return f"{self.root}/{name or uuid.uuid4().hex}"

    def lock(self, uri: str, **kw):
        from blob_lock import BlobLock

        return BlobLock(uri, storage_options=self.storage_options or None, **kw)

    def keep_alive(self, uri: str, owner: str):
        from blob_lock import keep_alive

        return keep_alive(uri, owner, storage_options=self.storage_options or None)

    def key(self, uri: str) -> str:
        """The object key (or path) of ``<uri>/lock.json`` in the bucket."""
        return uri.split("://", 1)[1].split("/", 1)[1] + "/lock.json"

    def options_json(self) -> str:
        return json.dumps(self.storage_options)

    def object_key(self, uri: str) -> str:
        """The key (or path) of the object at ``uri`` in the bucket."""
        return uri.split("://", 1)[1].split("/", 1)[1]


def _s3_backend(endpoint: str) -> Backend:
    bucket = f"b-{uuid.uuid4().hex[:12]}"
    opts = s3_options(endpoint)
    client = boto3_s3(endpoint)
    client.create_bucket(Bucket=bucket)
    b = Backend("s3", f"s3://{bucket}", opts)

    def put(uri: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=b.key(uri), Body=data)

    def get(uri: str) -> bytes | None:
        try:
            return client.get_object(Bucket=bucket, Key=b.key(uri))["Body"].read()
        except client.exceptions.NoSuchKey:
            return None

    b.raw_put, b.raw_get = put, get
    b.raw_delete = lambda uri: client.delete_object(Bucket=bucket, Key=b.object_key(uri))
    b.raw_put_object = lambda uri, data: client.put_object(
        Bucket=bucket, Key=b.object_key(uri), Body=data
    )
    return b


def _az_backend(url: str) -> Backend:
    service = azurite_service(url)
    container = f"c-{uuid.uuid4().hex[:12]}"
    service.create_container(container)
    b = Backend("az", f"az://{container}", {"azure_storage_use_emulator": "true"})
    cc = service.get_container_client(container)

    def put(uri: str, data: bytes) -> None:
        cc.upload_blob(b.key(uri), data, overwrite=True)

    def get(uri: str) -> bytes | None:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return cc.download_blob(b.key(uri)).readall()
        except ResourceNotFoundError:
            return None

    b.raw_put, b.raw_get = put, get
    b.raw_delete = lambda uri: cc.delete_blob(b.object_key(uri))
    b.raw_put_object = lambda uri, data: cc.upload_blob(b.object_key(uri), data, overwrite=True)
    return b


def _gs_backend(server) -> Backend:
    bucket = f"g-{uuid.uuid4().hex[:12]}"
    server.create_bucket(bucket)
    b = Backend("gs", f"gs://{bucket}", server.storage_options())
    b.raw_put = lambda uri, data: server.put(bucket, b.key(uri), data)
    b.raw_get = lambda uri: server.get(bucket, b.key(uri))
    b.raw_delete = lambda uri: server.delete(bucket, b.object_key(uri))
    b.raw_put_object = lambda uri, data: server.put(bucket, b.object_key(uri), data)
    return b


def _file_backend(tmp: Path) -> Backend:
    b = Backend("file", str(tmp))

    def put(uri: str, data: bytes) -> None:
        # Atomic, as every store's put is: a reader never sees half a file.
        p = Path(uri) / "lock.json"
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".raw-{uuid.uuid4().hex}")
        tmp.write_bytes(data)
        tmp.replace(p)

    def get(uri: str) -> bytes | None:
        p = Path(uri) / "lock.json"
        return p.read_bytes() if p.exists() else None

    b.raw_put, b.raw_get = put, get
    b.raw_delete = lambda uri: Path(uri).unlink()
    b.raw_put_object = lambda uri, data: Path(uri).write_bytes(data)
    return b


BACKENDS = ["memory", "file", "s3", "az", "gs"]


def _make_backend(name: str, request, tmp_path: Path) -> Backend:
    if name == "memory":
        return Backend(
            "memory", f"memory://t-{uuid.uuid4().hex[:8]}", shared_across_processes=False
        )
    if name == "file":
        return _file_backend(tmp_path)
    if name == "s3":
        return _s3_backend(request.getfixturevalue("moto_endpoint"))
    if name == "az":
        return _az_backend(request.getfixturevalue("azurite_url"))
    return _gs_backend(request.getfixturevalue("fake_gcs"))


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path) -> Backend:
    """Every store: memory, file, S3 on moto, Azure on Azurite, GCS on tests/fake_gcs.py."""
    return _make_backend(request.param, request, tmp_path)


@pytest.fixture(params=[b for b in BACKENDS if b != "memory"])
def shared_backend(request, tmp_path) -> Backend:
    """The stores that several processes can share."""
    return _make_backend(request.param, request, tmp_path)


def eventually(check, what: str, within: float = 60.0) -> float:
    """Seconds until ``check()`` holds, polled; fails after a generous liveness bound (the
    tests' waits for something another thread or process does)."""
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < within, f"{what}: not within {within:g} s"
        time.sleep(0.02)
    return time.monotonic() - began


def native_stacks(pid: int) -> str:
    """Every thread's native stack in process ``pid`` (gdb attached in batch mode), or why
    there are none."""
    gdb = shutil.which("gdb")
    if gdb is None:
        return "(no gdb on PATH: native stacks not taken)"
    try:
        done = subprocess.run(
            [gdb, "-p", str(pid), "-batch", "-ex", "thread apply all bt 25"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        return "(gdb took over 120 s)"
    return (done.stdout + done.stderr)[-40000:]


class Worker:
    """A real process running tests/processes/worker.py; killed with real signals. ``env`` adds to
    the environment it inherits. Its stderr goes to a file, not a pipe: a worker that logs
    more than a pipe holds (64 KiB of retry warnings under load) would block on a pipe
    nobody reads until the test gives up on it."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self._err = tempfile.TemporaryFile("w+")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "processes" / "worker.py"), *args],
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self._out = b""

    def stderr(self) -> str:
        """What the worker wrote to stderr so far."""
        self._err.flush()
        self._err.seek(0)
        return self._err.read()

    def line(self, timeout: float = 60.0) -> dict:
        """The next JSON line the worker prints (waiting at most ``timeout``)."""
        got = self.poll(timeout)
        if got is None:
            # The worker dumps its Python stacks on SIGUSR1 (faulthandler), and gdb shows
            # every native thread (the runtime's, blocked or not): say where it is.
            native = ""
            if self.proc.poll() is None:
                native = native_stacks(self.proc.pid)
                self.proc.send_signal(signal.SIGUSR1)
                time.sleep(1)
            self.kill()
            raise AssertionError(
                f"worker printed nothing in {timeout}s: {self.stderr()[-20000:]}\n"
                f"native threads:\n{native}"
            )
        return got

    def poll(self, timeout: float) -> dict | None:
        """The next JSON line if the worker prints one within ``timeout``, else None."""
        import select

        # Read the pipe ourselves: a buffered readline could swallow a second line that
        # came in the same chunk, and select would then say there is nothing to read.
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._out:
            left = max(0.0, deadline - time.monotonic())  # 0: look once, do not wait
            if not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise AssertionError(f"worker exited {self.proc.wait()}: {self.stderr()[-20000:]}")
            self._out += chunk
        line, _, self._out = self._out.partition(b"\n")
        return json.loads(line)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        if sig == signal.SIGKILL:
            self.proc.wait()

    def wait(self, timeout: float = 120.0) -> int:
        return self.proc.wait(timeout)


@pytest.fixture
def workers():
    started: list[Worker] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Worker:
        w = Worker(*args, env=env)
        started.append(w)
        return w

    yield start
    for w in started:
        w.kill()


# The installed console script, beside this interpreter (the venv need not be activated).
_beside = Path(sys.executable).parent / "blob-lock"
BLOB_LOCK = str(_beside) if _beside.exists() else shutil.which("blob-lock") or "blob-lock"


def cli(
    *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``blob-lock ARGS...`` as a user runs it: its exit code and output."""
    return subprocess.run(
        [BLOB_LOCK, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def option_args(options: dict[str, str]) -> list[str]:
    """Storage options as the command line takes them (``-okey=value``)."""
    return [f"-o{k}={v}" for k, v in options.items()]


def proxied_moto(moto_endpoint: str):
    """A counting proxy (tests/proxies/count_proxy.py) in front of the tests' moto, the storage
    options that reach moto through it, and a new bucket's root URI: a store that this
    process has never used (its endpoint is new), so it has neither a client nor a
    verdict yet. Close the proxy after."""
    from urllib.parse import urlsplit

    from count_proxy import CountProxy

    backend = _s3_backend(moto_endpoint)
    where = urlsplit(moto_endpoint)
    proxy = CountProxy(where.hostname or "127.0.0.1", where.port or 80)
    options = {**backend.storage_options, "aws_endpoint": proxy.url}
    return proxy, options, backend.root


def count_in_processes(
    workers, uri: str, options_json: str, tmp_path: Path, n_proc: int, n_each: int, expire: float
) -> tuple[int, list[dict], list]:
    """``n_proc`` processes each take the lock ``n_each`` times and, holding it, increment a
    counter file by a read and a write (a race a broken lock would show): the count, each
    process's last line, and the processes."""
    counter = tmp_path / "counter"
    counter.write_text("0")
    args = (str(counter), str(n_each), str(expire))
    procs = [workers("counter", uri, options_json, *args) for _ in range(n_proc)]
    for p in procs:
        assert p.line()["event"] == "ready"
    done = [p.line(timeout=300) for p in procs]
    for p in procs:
        assert p.wait() == 0
    return int(counter.read_text()), done, procs


@pytest.fixture(params=["s3", "az"])
def proxied(request, tmp_path, monkeypatch):
    """A backend, a proxy in front of its server, and how a holder process reaches the
    store through the proxy: (backend, proxy, storage options as JSON, environment).
    Azure gets an Azurite of its own: the shared one slows with every blob the tests before
    left in it, and these deadlines are tight by design (expire 4 s)."""
    if request.param == "s3":
        backend = _make_backend("s3", request, tmp_path)
        server = backend.storage_options["aws_endpoint"]
    else:
        server = request.getfixturevalue("own_azurite")
        backend = _az_backend(server)
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", server)  # for the waiters here
    from urllib.parse import urlsplit

    from fault_proxy import FaultProxy

    where = urlsplit(server)
    proxy = FaultProxy(where.hostname, where.port)
    if backend.name == "s3":
        options, env = dict(backend.storage_options, aws_endpoint=proxy.url), {}
    else:
        # object_store takes the emulator's address from the environment only.
        options, env = backend.storage_options, {"AZURITE_BLOB_STORAGE_URL": proxy.url}
    try:
        yield backend, proxy, json.dumps(options), env
    finally:
        proxy.close()


def micros_now() -> int:
    """The wall clock in microseconds since the epoch: the floor a fresh lockfile's first
    fencing token is taken from."""
    return time.time_ns() // 1000


def assert_first_token(token: int | None, since: int) -> None:
    """``token`` is a fresh lockfile's first: its writer's wall clock (microseconds) between
    ``since`` and now, so that tokens grow across a deleted lockfile too."""
    assert token is not None and since <= token <= micros_now(), (token, since)
