"""What the Prefect tests across processes share: a Prefect server of a module's own on
loopback (API only), the environment of a process that reports to it, the processes of
tests/processes/prefect_roles.py and their JSON lines, and the logs the server received.
Each test module makes its fixtures of ``serve`` and ``started_roles``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import roles
from servers import ROOT, free_port, stop

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


def serve(tmp_path_factory) -> Iterator[str]:
    """A Prefect server (API only: no UI, no services) on a free loopback port: its API's
    URL, until the generator is closed."""
    home = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    log = open(home / "server.log", "w")
    command = ["server", "start", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "prefect"), *command, "--no-ui", "--no-services"],
        env=prefect_env(home / "home"),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    api = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 180  # 14 s alone; longer beside the rest of the suite
    while True:
        assert proc.poll() is None, (home / "server.log").read_text()[-5000:]
        assert time.monotonic() < deadline, "the Prefect server did not start in 180 s"
        try:
            with urllib.request.urlopen(f"{api}/health", timeout=2) as answer:
                if answer.status == 200:
                    break
        except OSError:
            time.sleep(0.2)
    yield api
    stop(proc)


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
    body = json.dumps({"limit": 200, "sort": "TIMESTAMP_DESC"}).encode()
    request = urllib.request.Request(
        f"{api}/logs/filter", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        records = json.loads(answer.read())
    return [r for r in reversed(records) if text in r["message"]]


def eventually(check, what: str, within: float = 60.0) -> float:
    """Seconds until ``check()`` holds, polled; fails after a generous liveness bound."""
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < within, f"{what}: not within {within:g} s"
        time.sleep(0.1)
    return time.monotonic() - began
