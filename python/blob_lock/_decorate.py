"""A lock as a decorator: each call of the function runs holding a lock of its own."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

F = TypeVar("F", bound=Callable[..., Any])


def decorate(func: F, make: Callable[[], Any]) -> F:  # make: a BlobLock, both ways
    """``func`` wrapped so that each call runs inside a fresh ``make()`` (``async with`` for
    a coroutine function)."""
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            async with make():
                return await func(*args, **kwargs)

        return cast(F, run_async)

    @functools.wraps(func)
    def run(*args: Any, **kwargs: Any) -> Any:
        with make():
            return func(*args, **kwargs)

    return cast(F, run)
