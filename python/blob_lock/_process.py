"""This process's held locks and running keep-alives, and what happens to them at
interpreter exit and in a child made by fork. Imports neither lock type: each item says
how it ends (``_end_at_exit``) and what it becomes in a fork child (``_in_fork_child``)."""

from __future__ import annotations

import atexit
import os
import threading
from typing import Protocol

from blob_lock import _blob_lock


class Live(Protocol):
    """A held lock or a running keep-alive."""

    @property
    def owner(self) -> str: ...

    @property
    def lost(self) -> bool: ...

    def _end_at_exit(self) -> _blob_lock.NativeLock | None:
        """Ends what needs no request, and returns the native lock whose release the exit
        makes with the others', if there is one."""

    def _in_fork_child(self) -> None: ...


# Held strongly: a remote that calls keep_alive(uri, owner) and drops the handle must go on
# renewing, and a held lock stays held until it is released. At interpreter exit the locks
# are released and the keep-alives stopped, so that nothing renews into a dying interpreter.
# A dict used as a set: a set's table grows fourfold and keeps a quarter to a third of it
# filled, about twice a dict's bytes per held lock when thousands are held.
# No lock: each use is one call into the dict (an insert, a pop, a copy), which the
# interpreter runs as one step; a lock taken twice per `with` cost it microseconds.
_live: dict[Live, None] = {}

# How many forks made this process; each BlobLock notes the value it was made or renewed
# under (not a registry of every lock: thousands of held locks would each cost one), and
# the guard that makes two threads of a child renew an inherited lock once.
forks = 0
fork_guard = threading.Lock()


def track(item: Live) -> None:
    """Notes a lock now held, or a keep-alive now running."""
    _live[item] = None


def untrack(item: Live) -> None:
    """Forgets a lock released or a keep-alive stopped."""
    _live.pop(item, None)


def owners_here() -> set[str]:
    """Owner ids this process holds or keeps alive now."""
    live = list(_live)
    return {item.owner for item in live if not item.lost}


# The exit's releases, all at once, wait at most this long in all (unless the locks'
# heartbeats are longer): a store that does not answer must not hold the exit up for a
# heartbeat per lock.
EXIT_RELEASES_WITHIN = 10.0


@atexit.register
def _at_exit() -> None:
    # First, so that no awaitable completes into an interpreter that is shutting down.
    _blob_lock.close_async()
    live = list(_live)
    try:
        releases = []
        for item in live:
            try:
                native = item._end_at_exit()
            except Exception:  # exit must go on; the lock then expires by itself
                continue
            if native is not None:
                releases.append(native)
        if releases:
            within = min(max(EXIT_RELEASES_WITHIN, *(n.heartbeat for n in releases)), 30.0)
            _blob_lock.release_all(releases, within)
    finally:
        # What interrupted acquisitions may have written is being released in the
        # background: a moment for that, then the lockfiles the releases replaced.
        _blob_lock.drain(0.5)
        _blob_lock.sweep()
        _blob_lock.close_python_calls()  # no runtime thread calls into Python from now on


def _after_fork_in_child() -> None:
    """A child made by fork neither holds nor renews its parent's locks, and its exit must
    not release them. Each BlobLock it inherited becomes, when the child first uses it, a
    fresh, unheld lock with an owner id of its own (sharing the parent's id would let both
    believe they hold the lock); each KeepAlive reports itself lost here. The parent's
    native state is leaked in the child, never dropped (see NativeLock's Drop). The
    parent's heartbeats go on."""
    global fork_guard, forks
    fork_guard = threading.Lock()
    forks += 1
    _blob_lock.after_fork_in_child()  # log records reach Python from the child's own thread
    for item in list(_live):
        item._in_fork_child()
    _live.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
