"""The fenced resource of the soak: a process of its own, knowing nothing of blob-lock, that
keeps the highest fencing token it has seen for each resource and refuses a write that
carries a lower one, as a database or a service guarded by the lock's tokens would.

Each section of the workload sends ``KEY TOKEN OWNER`` on a Unix socket while it holds the
lock and is told ``ok`` or ``stale``. A token equal to the highest is accepted, whoever
sends it (a resource cannot tell two holders of one token apart): the checker finds those
in the log, where every accepted write is a line ``KEY TOKEN OWNER`` in the order the
resource took them; refused writes are counted.

Run: ``python tests/soak/fence.py SOCKET LOG``; SIGTERM writes the log's last lines and a
summary line (``# accepted N refused M``) and exits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys


class Fence:
    def __init__(self, log) -> None:
        self.highest: dict[str, int] = {}
        self.accepted = 0
        self.refused = 0
        self.log = log

    def write(self, key: str, token: int, owner: str) -> bool:
        if token < self.highest.get(key, -1):
            self.refused += 1
            return False
        self.highest[key] = token
        self.accepted += 1
        self.log.write(f"{key} {token} {owner}\n")
        return True


async def serve(path: str, fence: Fence) -> None:
    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                key, token, owner = line.decode().split()
                writer.write(b"ok\n" if fence.write(key, int(token), owner) else b"stale\n")
                await writer.drain()
        except (ConnectionError, ValueError, asyncio.CancelledError):
            pass  # a worker killed mid-line; or the resource stopping
        finally:
            writer.close()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    server = await asyncio.start_unix_server(client, path)
    print("listening", flush=True)
    async with server:
        await stop.wait()


def main() -> None:
    path, log_path = sys.argv[1], sys.argv[2]
    if os.path.exists(path):
        os.unlink(path)
    with open(log_path, "w", buffering=1 << 16) as log:
        fence = Fence(log)
        try:
            asyncio.run(serve(path, fence))
        finally:
            os.unlink(path)
        log.write(f"# accepted {fence.accepted} refused {fence.refused}\n")


if __name__ == "__main__":
    main()
