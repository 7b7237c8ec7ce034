"""Signals while a command waits for a lock: they end the wait (nothing is held yet)."""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping
from typing import Any

# Windows has no SIGHUP.
PASSED_ON = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGINT", "SIGHUP") if hasattr(signal, name)
)


class Signalled(BaseException):
    """A signal came while waiting for the lock: stop waiting (nothing is held)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def handle_signals(on_signal: Callable[[int, Any], None]) -> Mapping[int, Any]:
    """Installs ``on_signal`` for the signals a command passes on; the previous handlers."""
    return {s: signal.signal(s, on_signal) for s in PASSED_ON}


def restore(previous: Mapping[int, Any]) -> None:
    """Puts back what ``handle_signals`` replaced."""
    for s, handler in previous.items():
        signal.signal(s, handler)


def raise_signalled(signum: int, _frame: object) -> None:
    """A handler that ends the wait."""
    raise Signalled(signum)
