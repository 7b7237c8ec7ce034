"""A fault-injecting TCP proxy for the tests, on a free loopback port in front of one server.

The kernel here has no netem (see shared TESTING.md), so faults are injected in user space,
between the client under test and the real server. Switch them at any time:

- ``delay(s)``: every chunk, each way, waits ``s`` seconds before it is passed on;
- ``throughput(n)``: requests reach the server at most ``n`` a second, all connections
  together, each in its turn: a store that has fallen behind (its own queue grows);
- ``blackhole()``: a partition. Bytes in flight and new connections go nowhere and nothing
  answers; a connection that lost bytes stays dead after ``heal()`` (its HTTP framing is
  gone), so the client must time out and reconnect, as after a real partition;
  ``requests_swallowed`` counts the reads of client bytes it swallowed (a request met it);
- ``reset()``: every open connection is reset (RST), and so is each new one until ``heal()``;
- ``fail_http(n, status)``: open connections are reset, and the next ``n`` requests (on new
  connections, as the client must make) are answered with ``status`` (503 by default)
  without reaching the server; ``http_failures_served`` counts them;
- ``strip_conditions()``: requests reach the server with their ``If-None-Match`` and
  ``If-Match`` headers renamed, so that it ignores them, as some S3-compatible stores do;
  ``conditions_stripped`` counts them;
- ``lose_answer(marker)``: the next request whose bytes hold ``marker`` reaches the server,
  and its answer is dropped and its connection reset; then nothing more is passed on to
  the server until ``let_through()`` (a write that landed, reported lost, and held up in
  the network while others act); ``answers_lost`` counts them;
- ``heal()``: back to passing everything through.

Traffic goes only between loopback addresses; the proxy stops with ``close()``.
"""

from __future__ import annotations

import asyncio
import re
import socket
import struct

from loopback_proxy import LoopbackProxy


class FaultProxy(LoopbackProxy):
    def __init__(self, target_host: str, target_port: int) -> None:
        self._mode = "pass"
        self._delay = 0.0
        self._http_failures = 0
        self._http_status = 503
        self._writers: set[asyncio.StreamWriter] = set()
        self.http_failures_served = 0
        self.conditions_stripped = 0
        self.accepted = 0  # connections taken from clients, for a test to wait on
        self.requests_swallowed = 0  # reads of client bytes lost in a blackhole
        self._strip = False
        self._refuse_updates = False
        self.updates_refused = 0
        self._interval = 0.0  # throughput(): seconds between two requests passed on
        self._lose: bytes | None = None
        self._holding = False
        self.answers_lost = 0
        self._next_at = 0.0
        super().__init__(target_host, target_port)

    # -- switching faults (from any thread) ---------------------------------------------

    def delay(self, seconds: float) -> None:
        self._delay = seconds

    def throughput(self, per_second: float) -> None:
        self._interval = 1.0 / per_second if per_second else 0.0

    def blackhole(self) -> None:
        self._mode = "blackhole"

    def reset(self) -> None:
        self._mode = "reset"
        self.loop.call_soon_threadsafe(self._reset_all)

    def fail_http(self, n: int, status: int = 503) -> None:
        self._http_status, self._http_failures = status, n
        # Pooled keep-alive connections would bypass the failures: drop them first.
        self.loop.call_soon_threadsafe(self._reset_all)

    def lose_answer(self, marker: bytes) -> None:
        self._lose = marker

    def let_through(self) -> None:
        self._holding = False

    def strip_conditions(self) -> None:
        self._strip = True

    def refuse_updates(self) -> None:
        """Answers every update-if-match (``If-Match``) with 412, as a store (or a proxy before
        it) that rewrites ETags does; everything else passes. One request per connection
        from now on, so that none rides a pooled connection past the check."""
        self._refuse_updates = True
        self.loop.call_soon_threadsafe(self._reset_all)

    def heal(self) -> None:
        self._mode, self._delay, self._http_failures = "pass", 0.0, 0
        self._lose, self._holding = None, False
        self._strip = self._refuse_updates = False
        self._interval = 0.0

    # -- the proxy ---------------------------------------------------------------------

    def _closing(self) -> None:
        self._reset_all()

    def _reset_all(self) -> None:
        for w in list(self._writers):
            _abort(w)
        self._writers.clear()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        self.accepted += 1
        try:
            if self._mode == "reset":
                _abort(writer)
                return
            if self._http_failures > 0:
                self._http_failures -= 1
                await self._answer_http(reader, writer)
                return
            if self._mode == "blackhole":
                # Accept, never answer: the client times out.
                while await reader.read(65536):
                    self.requests_swallowed += 1
                return
            first = b""
            if self._refuse_updates:
                first = await _request(reader)
                if _UPDATE.search(first.split(b"\r\n\r\n", 1)[0]):
                    self.updates_refused += 1
                    await _answer(writer, 412, "PreconditionFailed")
                    return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
            except OSError:
                _abort(writer)
                return
            self._writers.add(up_writer)
            if first:
                # Answered, the connection closes: the client's next request comes on a new
                # one, which is checked in turn.
                head, _, body = first.partition(b"\r\n\r\n")
                head = _KEEP_ALIVE.sub(b"", head) + b"\r\nConnection: close"
                up_writer.write(head + b"\r\n\r\n" + body)
                await up_writer.drain()
            lose = asyncio.Event()  # set when this connection's answer is to be lost
            await asyncio.gather(
                self._pump(reader, up_writer, upstream=True, lose=lose),
                self._pump(up_reader, writer, lose=lose),
            )
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _pump(
        self,
        src: asyncio.StreamReader,
        dst: asyncio.StreamWriter,
        upstream: bool = False,
        lose: asyncio.Event | None = None,
    ) -> None:
        dead = False  # bytes were swallowed by a blackhole: this connection is broken
        try:
            while data := await src.read(65536):
                if upstream:
                    while self._holding:
                        await asyncio.sleep(0.01)
                    if self._lose is not None and self._lose in data and lose is not None:
                        self._lose = None
                        lose.set()
                elif lose is not None and lose.is_set():
                    # The request landed; its answer goes nowhere, and the client's next
                    # requests wait until the test lets them through.
                    self._holding = True
                    self.answers_lost += 1
                    _abort(dst)
                    return
                if upstream and self._strip:
                    # Request heads arrive whole in one read here (they are small).
                    data, n = _CONDITION.subn(rb"\r\nx-ignored-\1match:", data)
                    self.conditions_stripped += n
                if self._delay:
                    await asyncio.sleep(self._delay)
                if upstream and self._interval:
                    await self._turn()
                if self._mode == "blackhole":
                    dead = True
                if dead:
                    if upstream:
                        self.requests_swallowed += 1
                    continue
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if not dead:
                dst.close()

    async def _turn(self) -> None:
        """Waits for this request's turn under ``throughput`` (one event loop: no race)."""
        now = self.loop.time()
        at = max(now, self._next_at)
        self._next_at = at + self._interval
        if at > now:
            await asyncio.sleep(at - now)

    async def _answer_http(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await _request(reader)
        self.http_failures_served += 1
        await _answer(writer, self._http_status, f"Injected{self._http_status}")


async def _request(reader: asyncio.StreamReader) -> bytes:
    """One whole request: its head and its body (by its Content-Length)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return head + (await reader.readexactly(length) if length else b"")


async def _answer(writer: asyncio.StreamWriter, status: int, code: str) -> None:
    """An error answer of ``status``, the connection closed after it."""
    body = f"<Error><Code>{code}</Code></Error>".encode()
    writer.write(
        f"HTTP/1.1 {status} Injected\r\nContent-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()


_CONDITION = re.compile(rb"\r\nif-(none-)?match:", re.IGNORECASE)
_UPDATE = re.compile(rb"\r\nif-match:", re.IGNORECASE)
_KEEP_ALIVE = re.compile(rb"\r\nconnection:[^\r]*", re.IGNORECASE)


def _abort(writer: asyncio.StreamWriter) -> None:
    """Closes with RST rather than FIN, as a reset connection looks to the client."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()
