"""An HTTP/1.1 proxy on a free loopback port that counts the requests passing through it.

It parses each request head on the client side of every connection (keep-alive, several
requests per connection), records its method, path and conditional headers, and passes the
bytes on unchanged; responses are pumped back raw. Put it in front of the server, or in
front of tests/proxies/fault_proxy.py to count requests that then meet an injected delay:

    client -> CountProxy -> FaultProxy (delay) -> moto

``connections`` counts the connections clients opened through it. ``snapshot()`` returns
the number of requests so far; ``since(n)`` the requests after the
n-th, each a ``Request`` whose ``kind`` names what it is for a lockfile: ``read`` (GET),
``head``, ``create`` (PUT If-None-Match: *), ``update`` (PUT If-Match), ``overwrite``
(PUT without condition), ``delete`` or the method otherwise.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import dataclass

from loopback_proxy import LoopbackProxy, pump


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    if_match: bool
    if_none_match: bool

    @property
    def kind(self) -> str:
        m = self.method
        if m == "GET":
            return "read"
        if m == "HEAD":
            return "head"
        if m == "DELETE":
            return "delete"
        if m == "PUT":
            if self.if_none_match:
                return "create"
            if self.if_match:
                return "update"
            return "overwrite"
        return m.lower()


def breakdown(requests: list[Request], per: int = 1) -> str:
    """``create 1 + update 1`` for a list of requests, each count divided by ``per``."""
    c = Counter(r.kind for r in requests)
    order = ["read", "head", "create", "update", "overwrite", "delete"]
    keys = [k for k in order if k in c] + sorted(k for k in c if k not in order)
    return " + ".join(f"{k} {c[k] / per:g}" for k in keys) or "none"


class CountProxy(LoopbackProxy):
    def __init__(self, target_host: str, target_port: int) -> None:
        self._requests: list[Request] = []
        self._guard = threading.Lock()
        self.connections = 0
        super().__init__(target_host, target_port)

    # -- counting (from any thread) ------------------------------------------------------

    def snapshot(self) -> int:
        with self._guard:
            return len(self._requests)

    def since(self, mark: int) -> list[Request]:
        with self._guard:
            return list(self._requests[mark:])

    # -- the proxy -----------------------------------------------------------------------

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._guard:
            self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        back = asyncio.ensure_future(pump(up_reader, writer))
        try:
            await self._requests_upstream(reader, up_writer)
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            up_writer.close()
            try:
                await back
            except (ConnectionError, OSError):
                pass
            writer.close()

    async def _requests_upstream(
        self, reader: asyncio.StreamReader, up: asyncio.StreamWriter
    ) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return  # the client closed the connection between requests
            lines = head.split(b"\r\n")
            method, _, rest = lines[0].decode("latin-1").partition(" ")
            path = rest.rpartition(" ")[0]
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, sep, value = line.partition(b":")
                if sep:
                    headers[name.strip().lower().decode("latin-1")] = value.strip().decode(
                        "latin-1"
                    )
            with self._guard:
                self._requests.append(
                    Request(method, path, "if-match" in headers, "if-none-match" in headers)
                )
            # The head first: a client that sent Expect: 100-continue waits for the
            # server's answer before it sends the body.
            up.write(head)
            await up.drain()
            if headers.get("transfer-encoding", "").lower() == "chunked":
                await _copy_chunked(reader, up)
            else:
                left = int(headers.get("content-length", "0") or 0)
                while left > 0:
                    data = await reader.read(min(left, 65536))
                    if not data:
                        return
                    up.write(data)
                    await up.drain()
                    left -= len(data)


async def _copy_chunked(reader: asyncio.StreamReader, up: asyncio.StreamWriter) -> None:
    while True:
        size_line = await reader.readuntil(b"\r\n")
        up.write(size_line)
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            # Trailers (usually none), then the blank line.
            while True:
                line = await reader.readuntil(b"\r\n")
                up.write(line)
                if line == b"\r\n":
                    await up.drain()
                    return
        up.write(await reader.readexactly(size + 2))
        await up.drain()
