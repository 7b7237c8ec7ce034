"""A program of tests/processes/ in a process of its own, the JSON lines it writes read here:
the Prefect and joblib roles' tests share it."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time


class Role:
    """``script`` run with ``args`` in a process of its own."""

    def __init__(self, script: str, *args: str, env: dict[str, str], stdin: bool = False) -> None:
        self.err = tempfile.TemporaryFile("w+")  # a file: a pipe nobody reads would fill
        self.proc = subprocess.Popen(
            [sys.executable, script, *args],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.err,
            env=env,
        )
        self.out = b""

    def line(self, timeout: float = 120.0) -> dict:
        """The next JSON line, read from the pipe itself (a buffered readline could take two
        lines at once, and select would then see nothing left)."""
        assert self.proc.stdout is not None
        deadline, fd = time.monotonic() + timeout, self.proc.stdout.fileno()
        while b"\n" not in self.out:
            left = max(0.0, deadline - time.monotonic())
            chunk = os.read(fd, 65536) if select.select([fd], [], [], left)[0] else b""
            if not chunk:
                self.end()
                self.err.seek(0)
                raise AssertionError(f"no line in {timeout:g} s:\n{self.err.read()[-8000:]}")
            self.out += chunk
        line, _, self.out = self.out.partition(b"\n")
        return json.loads(line)

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
