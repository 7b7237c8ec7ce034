"""The test servers' start (tests/servers/servers.py): with pytest-xdist, a port found free can be
taken before the server binds it; such a server is started again on another port."""

from __future__ import annotations

import socket
import subprocess
import sys

from servers import listening, stop


def test_a_server_that_exits_before_listening_is_started_again_on_another_port():
    asked: list[int] = []

    def argv(port: int) -> list[str]:
        asked.append(port)
        if len(asked) == 1:  # as a server whose port was taken exits
            return [sys.executable, "-c", "raise SystemExit(98)"]
        return [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]

    proc, port = listening(
        argv, "http.server", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        assert len(asked) == 2 and port == asked[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        assert proc.poll() is None
    finally:
        stop(proc)
