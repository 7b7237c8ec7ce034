"""A TLS front for a plain HTTP server: what every cloud's endpoint is and none of the
tests' servers is. Its clients speak HTTPS to it; it passes the bytes on as they are."""

from __future__ import annotations

import asyncio

from loopback_proxy import LoopbackProxy, pump


class TlsProxy(LoopbackProxy):
    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
