"""Who holds the lock, shown while a command waits for it."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

from blob_lock import Inspection, duration_text, inspect_async

if TYPE_CHECKING:
    import asyncio

# Seconds between progress lines when standard error is not a terminal.
LOG_EVERY = 30.0


class Progress:
    """Shows who holds the lock while we wait for it: on a terminal one line updated in
    place each second, otherwise a line every ``LOG_EVERY`` seconds. Reads the lockfile on
    a thread of its own (one read a second); never writes. Its reads are awaitables on an
    event loop of its own, cancelled at the end: a read hanging on a store that does not
    answer holds up nothing (a Ctrl-C ends the command at once). Each line says how long it
    has waited so far and, given ``timeout``, the most it waits: ``waited 3s of at most 10s
    for URI: held by ...``, never a promise of when the wait ends."""

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, str] | None,
        out: TextIO | None = None,
        timeout: float | None = None,
    ) -> None:
        # None when the command started with standard error closed: then nothing is shown.
        out = sys.stderr if out is None else out
        self._uri, self._storage_options, self._out = uri, storage_options, out
        self._limit = "" if timeout is None else f" of at most {duration_text(timeout)}"
        try:
            self._tty = out is not None and out.isatty()
        except ValueError:  # standard error is closed
            self._tty = False
        self._stop = threading.Event()
        self._began = time.monotonic()
        import asyncio  # only a command that waits needs it (a fifth of a command's start)

        self._loop = asyncio.new_event_loop()
        self._look: asyncio.Future[Any] | None = None
        self._thread = threading.Thread(target=self._run, name="blob-lock progress", daemon=True)

    def __enter__(self) -> Progress:
        if self._out is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        with contextlib.suppress(RuntimeError):  # its loop closed: the thread ended already
            self._loop.call_soon_threadsafe(self._cancel)
        if self._thread.is_alive():
            self._thread.join(1.0)
        elif not self._thread.ident:  # never started
            self._loop.close()
        if self._tty and self._out is not None:
            try:
                self._out.write("\r\x1b[K")
                self._out.flush()
            except (BrokenPipeError, ValueError):
                pass

    def _cancel(self) -> None:
        if self._look is not None:
            self._look.cancel()

    async def _inspect(self) -> Inspection:
        import asyncio

        look = inspect_async(self._uri, storage_options=self._storage_options)
        self._look = asyncio.ensure_future(look)
        return await self._look

    def _run(self) -> None:
        try:
            self._show()
        finally:
            self._loop.close()

    def _show(self) -> None:
        import asyncio

        out = self._out
        if out is None:
            return
        # The first look after a second: an uncontended acquisition shows nothing.
        every = 1.0 if self._tty else LOG_EVERY
        while not self._stop.wait(1.0 if self._tty else min(1.0, every)):
            try:
                line = self._line(self._loop.run_until_complete(self._inspect()))
            except asyncio.CancelledError:
                return
            except Exception as e:  # a failed look must not end the wait
                line = f"{self._waited()}; cannot read the lock: {e}"
            try:
                if self._tty:
                    out.write("\r\x1b[K" + line[:200])
                    out.flush()
                else:
                    stamp = datetime.now().strftime("%H:%M:%S")
                    out.write(f"{stamp} blob-lock: {line}\n")
                    out.flush()
            except (BrokenPipeError, ValueError):  # nobody reads standard error any more
                return
            if not self._tty and self._stop.wait(every - 1.0):
                return

    def _waited(self) -> str:
        """``waited 3s of at most 10s`` (with a timeout), ``waited 3s so far`` (without)."""
        waited = f"waited {time.monotonic() - self._began:.0f}s"
        return waited + (self._limit or " so far")

    def _line(self, seen: Inspection) -> str:
        return f"{self._waited()} for {seen.describe()}"
