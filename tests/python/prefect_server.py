"""What the Prefect tests across processes share: the run's one Prefect server on
loopback (API only), the environment of a process that reports to it, the processes of
tests/processes/prefect_roles.py and their JSON lines, and the logs the server received.
Each test module makes its fixtures of ``shared_api`` and ``started_roles``."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import roles
from servers import ROOT, free_port

ROLES = str(ROOT / "tests" / "processes" / "prefect_roles.py")


def prefect_env(home: Path, api: str | None = None, **more: str) -> dict[str, str]:
    """A process's environment for Prefect: a home of its own, no telemetry, no logs sent to
    the API unless ``more`` says so, the test module's server (a process without one would
    start an ephemeral server of its own: 15 s here)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home),
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_LOGGING_TO_API_ENABLED="false",
        PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180",
    )
    env.update(more)  # may turn logging to the API on
    if api is not None:
        env["PREFECT_API_URL"] = api
    return env


def shared_api(tmp_path_factory) -> str:
    """The URL of the run's one Prefect server (API only: no UI, no services), on a free
    loopback port. The first pytest-xdist worker to ask starts it, under a file lock in the
    run's shared temporary folder; the others find its address there. It outlives that
    worker (a session of its own) and is stopped by ``stop_shared`` at the run's end. One
    server, not one per test module and worker: each takes 10 to 15 s of CPU to start."""
    root = run_folder(tmp_path_factory)
    with open(root / "prefect-server.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        record = root / "prefect-server.json"
        if record.exists():
            api = json.loads(record.read_text())["api"]
            assert healthy(api), f"the run's Prefect server at {api} stopped answering"
            return api
        home = root / "prefect-server"
        home.mkdir()
        port = free_port()
        log = open(home / "server.log", "w")
        command = ["server", "start", "--host", "127.0.0.1", "--port", str(port)]
        proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "prefect"), *command, "--no-ui", "--no-services"],
            env=prefect_env(home / "home"),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        api = f"http://127.0.0.1:{port}/api"
        deadline = time.monotonic() + 180  # 14 s alone; longer beside the rest of the suite
        while not healthy(api):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(
                    "the Prefect server did not start in 180 s: "
                    + (home / "server.log").read_text()[-5000:]
                )
            time.sleep(0.2)
        record.write_text(json.dumps({"api": api, "pid": proc.pid}))
        return api


def run_folder(tmp_path_factory) -> Path:
    """The temporary folder of the whole run: under pytest-xdist, the parent of each
    worker's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def stop_shared(root: Path) -> None:
    """Stops the run's Prefect server, if one was started (from the run's main process)."""
    record = root / "prefect-server.json"
    if not record.exists():
        return
    pid = json.loads(record.read_text())["pid"]
    for sig, within in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.1)


def healthy(api: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api}/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


class Role(roles.Role):
    """tests/processes/prefect_roles.py in a process of its own, its JSON lines read here."""

    def __init__(self, *args: str, env: dict[str, str], stdin: bool = False) -> None:
        super().__init__(ROLES, *args, env=env, stdin=stdin)


def started_roles() -> Iterator[Callable[..., Role]]:
    """What starts Roles; each is ended (killed if still running) when the generator is
    closed."""
    started: list[Role] = []

    def start(*args: str, env: dict[str, str], stdin: bool = False) -> Role:
        started.append(Role(*args, env=env, stdin=stdin))
        return started[-1]

    yield start
    for role in started:
        role.end()


def api_logs(api: str, text: str) -> list[dict]:
    """The log records the server holds whose message contains ``text`` (Prefect's API:
    what its UI shows), oldest first."""
    records: list[dict] = []
    while True:  # page by page (the API gives 200 at most): the run's tests share the server
        body = json.dumps({"limit": 200, "offset": len(records), "sort": "TIMESTAMP_DESC"})
        request = urllib.request.Request(
            f"{api}/logs/filter", data=body.encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            page = json.loads(answer.read())
        records += page
        if len(page) < 200:
            break
    return [r for r in reversed(records) if text in r["message"]]
