"""A private asyncio event loop on a thread of its own, where async credential providers
run: blob-lock fetches credentials from its runtime's threads, where no loop of the
caller's runs (a heartbeat needs a token while the caller's loop may be blocked or gone)."""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio

_guard = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_pid: int | None = None


def _running() -> asyncio.AbstractEventLoop:
    import asyncio  # here, not at import: most processes never need it

    global _loop, _pid
    with _guard:
        if _loop is None or _pid != os.getpid():  # a child made by fork has no such thread
            loop = asyncio.new_event_loop()
            threading.Thread(
                target=loop.run_forever, name="blob-lock-credentials", daemon=True
            ).start()
            _loop, _pid = loop, os.getpid()
        return _loop


def run(awaitable: Awaitable[Any], timeout: float) -> Any:
    """Waits for ``awaitable`` on the private loop, at most ``timeout`` seconds."""

    async def wrapped() -> Any:
        return await awaitable

    import asyncio

    return asyncio.run_coroutine_threadsafe(wrapped(), _running()).result(timeout)
