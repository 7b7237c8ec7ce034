"""moto's S3 server for the benchmark, on a free loopback port, with the tests' atomic
conditional PutObject (tests/servers/moto_server.py), and the proxies in front of it:

    blob-lock -> CountProxy (counts requests) -> DelayLine (injected delay) -> moto

``DelayLine`` is tests/proxies/fault_proxy.py's FaultProxy with its ``delay(s)`` made a fixed
one-way latency, as a network link has: every chunk is passed on ``s`` after it arrived.
FaultProxy itself sleeps ``s`` before passing each chunk, one after another, so a response
whose head and body arrive as two chunks takes ``2s`` and a request or response costs
one, two or three delays depending on how the bytes happen to be split: the round trips
of different requests differ by whole delays. ``Moto(link=False)`` uses FaultProxy as it is.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "servers"))
sys.path.insert(0, str(ROOT / "tests" / "proxies"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from count_proxy import CountProxy  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DelayLine(FaultProxy):
    """FaultProxy whose delay is a fixed latency per direction (see the module's doc)."""

    async def _pump(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        upstream: bool = False,
        lose: asyncio.Event | None = None,  # FaultProxy's lost answers: the bench loses none
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()

        async def arrive() -> None:
            try:
                while data := await src.read(65536):
                    queue.put_nowait((loop.time(), data))
            except (ConnectionError, OSError):
                pass
            finally:
                queue.put_nowait(None)

        arriving = asyncio.ensure_future(arrive())
        try:
            while (item := await queue.get()) is not None:
                at, data = item
                wait = at + self._delay - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            arriving.cancel()
            dst.close()


class Moto:
    """A moto server, a bucket in it, and the proxy chain in front of it."""

    def __init__(self, link: bool = True) -> None:
        self.port = free_port()
        self._log = tempfile.NamedTemporaryFile("w", prefix="bench-moto-", suffix=".log")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "servers" / "moto_server.py"),
                "-H",
                "127.0.0.1",
                "-p",
                str(self.port),
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait()
            self.bucket = f"bench-{uuid.uuid4().hex[:12]}"
            self._create_bucket()
            self.faults = (DelayLine if link else FaultProxy)("127.0.0.1", self.port)
            self.counter = CountProxy("127.0.0.1", self.faults.port)
        except BaseException:
            self.close()
            raise

    def _wait(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"moto_server did not listen within {timeout}s")

    def _create_bucket(self) -> None:
        import boto3

        boto3.client(
            "s3",
            endpoint_url=f"http://127.0.0.1:{self.port}",
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        ).create_bucket(Bucket=self.bucket)

    @property
    def storage_options(self) -> dict[str, str]:
        """Options that reach moto through both proxies."""
        return {
            "aws_endpoint": self.counter.url,
            "aws_allow_http": "true",
            "aws_region": "us-east-1",
            "aws_access_key_id": "testing",
            "aws_secret_access_key": "testing",
            "aws_virtual_hosted_style_request": "false",
        }

    def uri(self, name: str | None = None) -> str:
        return f"s3://{self.bucket}/{name or uuid.uuid4().hex}"

    def close(self) -> None:
        for proxy in ("counter", "faults"):
            p = getattr(self, proxy, None)
            if p is not None:
                try:
                    p.close()
                except Exception:
                    pass
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
