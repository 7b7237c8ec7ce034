"""What the tests' TCP proxies share: a server on a free loopback port in front of one
target, run on an event loop of its own thread, so that tests switch or read it from any
thread, and stopped whole by ``close()``. A proxy says what to do with each client
connection (``_client``)."""

from __future__ import annotations

import asyncio
import ssl
import threading


class LoopbackProxy:
    def __init__(
        self, target_host: str, target_port: int, tls: ssl.SSLContext | None = None
    ) -> None:
        """``tls``: the proxy's clients reach it over TLS with this server context."""
        self.target = (target_host, target_port)
        self._tls = tls
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError(f"{type(self).__name__} did not start")
        self.port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    def close(self) -> None:
        async def stop() -> None:
            self._server.close()
            self._closing()
            # Connections still open end here, not when the stopped loop is collected
            # ("Task was destroyed but it is pending").
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in others:
                t.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def _closing(self) -> None:
        """Called on the proxy's loop as it closes, before its connections are cancelled."""

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self._server = self.loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", 0, ssl=self._tls)
        )
        started.set()
        self.loop.run_forever()


async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copies ``src`` to ``dst`` until ``src`` ends, then closes ``dst``."""
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    finally:
        dst.close()
