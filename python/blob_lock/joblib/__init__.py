"""joblib's ``Memory`` on blob-lock: ``blob_lock.joblib.Memory`` is a ``joblib.Memory`` whose
cached functions compute each call once across processes and machines. Needs
joblib>=1.4.2,<1.7 (``pip install 'blob-lock[joblib]'``); only this module imports it.
docs/joblib.md shows the lines that switch a cache over.

How, and why:

- A hit is joblib's own code, untouched: no lock, no request. On a miss (joblib's
  ``_call``, reached only when the result is missing or invalid), the call takes a claim
  (``claim_memo``) on its lock, ``<lock root>/<function>/<argument hash>/lock``, looks
  again while it waits and once it holds the lock, and computes only if the result is
  still missing; a waiter returns the result the computing process stored. Forced calls
  (``call``) take the lock without looking. joblib writes a result's output, then its
  metadata: a look (a hit's included) that finds the output without metadata takes it for
  a call still being stored, a miss, and never hands it to ``cache_validation_callback``
  (which would read ``{}``) nor deletes it. A wait for another holder is logged once at
  INFO with that holder, a takeover at WARNING (logger ``blob_lock.joblib``).
- The cache is joblib's own, so plain ``joblib.Memory`` on the same location reads every
  result and this one reads plain joblib's. The locks live beside it, at
  ``<location>/joblib-locks`` (``<folder>-locks`` for a ``pathlib.Path`` location, which
  joblib uses as its folder), where neither joblib's ``clear`` nor its ``reduce_size``
  deletes; or at ``lock_prefix`` (an ``s3://``, ``az://`` or ``gs://`` prefix, or a shared
  path), which a cache on a store backend other than joblib's local one must give.
  ``clear`` and ``reduce_size`` also prune the free locks, never a held one.
- Failure: a computing process that dies frees its call ``expire`` after its last renewal;
  an exception in the function releases it at once (so a function that always fails runs
  once per waiter, one after another). A miss while the lock store is out of reach waits
  for it, as any acquire does: for ever unless ``timeout`` is given. A lock lost while
  computing is logged at WARNING (logger ``blob_lock.joblib``) with the call and its
  cause, and ``on_lost`` is called. Just before joblib writes the result, the call checks
  its lease: lost, it renews its own acquisition with ``keep_alive`` (a conditional write
  that fails if anybody took the call since) and writes under it; else the result is not
  written, and the call raises ``LockLost`` (with ``raise_on_lost=False``: returns the
  value it computed). An async function's call awaits that renewal (``keep_alive_async``)
  before joblib's write, which joblib makes synchronously.
- A drop-in where users see it: a cached function shows as joblib's (``MemorizedFunc(...)``),
  a ``Memory`` or a cached function pickled and loaded has the same attributes (the lock
  options compare equal), a result that fails to load is warned about once.
- joblib's hooks used here (``MemorizedFunc._call``, ``_after_call``, ``_before_call``,
  ``_load_item``, ``_get_memorized_result``, ``_is_in_cache_and_valid``,
  ``_check_previous_func_code``) are private: the module refuses to load on a joblib
  outside the range it is tested with (``JOBLIB_VERSIONS``).
"""

from __future__ import annotations

import inspect as _pyinspect
import re
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

try:
    import joblib  # type: ignore[import-not-found,import-untyped,unused-ignore]  # an extra
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("blob_lock.joblib needs joblib: pip install 'blob-lock[joblib]'") from e

from blob_lock._options import signature
from blob_lock.joblib._calls import LOCK_OPTION_NAMES, Calls, Computing, lock_root, never

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from blob_lock._option_types import LockOptions

__all__ = ["JOBLIB_VERSIONS", "Memory"]

JOBLIB_VERSIONS = ((1, 4, 2), (1, 7))
"""The joblib releases this module works with, joblib>=1.4.2,<1.7: from 1.4.2 (the first
whose ``_call`` returns the output with its metadata, async functions included) to before
1.7. Tested with 1.4.2, 1.5.3 and 1.6.0."""

# The one wording of that range, in the extra (pyproject.toml), here and in docs/joblib.md.
_SUPPORTED = "joblib>={},<{}".format(*(".".join(map(str, v)) for v in JOBLIB_VERSIONS))


def _check_version(version: str) -> None:
    numbers = tuple(int(n) for n in re.findall(r"^(\d+)\.(\d+)(?:\.(\d+))?", version)[0] if n)
    low, high = JOBLIB_VERSIONS
    if not low <= numbers < high:
        raise ImportError(
            f"blob_lock.joblib needs {_SUPPORTED} (it hooks into MemorizedFunc's private "
            f"methods; tested with 1.4.2, 1.5.3 and 1.6.0), and joblib {version} is "
            "installed: pip install 'blob-lock[joblib]'"
        )


try:
    _check_version(joblib.__version__)
except IndexError:  # pragma: no cover - no version number at all
    raise ImportError(
        f"blob_lock.joblib cannot read joblib's version {joblib.__version__!r}: it needs "
        f"{_SUPPORTED}"
    ) from None

from joblib._store_backends import FileSystemStoreBackend  # type: ignore[import-not-found,import-untyped,unused-ignore]  # noqa: E402
from joblib.memory import (  # type: ignore[import-not-found,import-untyped,unused-ignore]  # noqa: E402
    AsyncMemorizedFunc,
    MemorizedFunc,
    NotMemorizedResult,
)

# The call this thread or task computes: joblib's `_call` runs the function, then
# `_after_call` writes the result, which checks the call's lease first.
_computing: ContextVar[Computing | None] = ContextVar("blob_lock_joblib_computing", default=None)

# The call whose stored result this thread or task just failed to load: joblib's hit warns
# of it, then misses, and the miss's own load of it warns no second time.
_unloadable: ContextVar[Any] = ContextVar("blob_lock_joblib_unloadable", default=None)

_JOBLIB_PARAMS = frozenset(_pyinspect.signature(joblib.Memory.__init__).parameters) - {"self"}


class Memory(joblib.Memory):  # type: ignore[misc,unused-ignore]  # Any without joblib
    """A ``joblib.Memory`` whose cached functions compute each call once across processes.

    Takes ``joblib.Memory``'s arguments, then blob-lock's: ``lock_prefix`` (where the locks
    live; default ``<location>/joblib-locks``, required for a store backend other than
    joblib's local one), ``poll`` (seconds between looks for the result while waiting;
    default ``expire / 10``, 50 ms to 3 s) and every option of ``BlobLock`` (``expire``,
    ``timeout``, ``storage_options``, ``on_lost``, ``raise_on_lost``, ...), checked now as
    ``BlobLock`` checks them. ``timeout`` bounds a missed call's wait for the process
    computing it, or for a lock store out of reach (``LockTimeout``, naming the holder);
    by default it waits for as long as that process computes, or until it dies and its
    lease expires, and for as long as the store stays out of reach. Every process sharing
    the cache must use the same lock location.
    """

    def __init__(
        self,
        location: Any = None,
        backend: str = "local",
        mmap_mode: str | None = None,
        compress: Any = False,
        verbose: int = 1,
        backend_options: dict[str, Any] | None = None,
        *,
        lock_prefix: Any = None,
        poll: Any = None,
        **options: Unpack[LockOptions],
    ) -> None:
        # joblib's arguments as 1.5 and 1.6 take them; another of the installed release's
        # own (1.4's bytes_limit) passes by name.
        ours = {k: v for k, v in options.items() if k not in _JOBLIB_PARAMS}
        _refuse_unknown(ours)
        super().__init__(
            location=location,
            backend=backend,
            mmap_mode=mmap_mode,
            compress=compress,
            verbose=verbose,
            backend_options=backend_options,
            **{k: v for k, v in options.items() if k not in ours},
        )
        self.lock_prefix = lock_prefix
        store = self.store_backend
        if store is not None and lock_prefix is None:
            if not isinstance(store, FileSystemStoreBackend):
                raise ValueError(
                    f"joblib's {type(store).__name__} is not a folder beside which the locks "
                    "could live: give lock_prefix, a prefix every process reaches "
                    "(s3://bucket/joblib-locks, az://container/joblib-locks, "
                    "gs://bucket/joblib-locks or a shared path)"
                )
        folder = None if store is None or lock_prefix is not None else store.location
        root = lock_root(folder, lock_prefix)
        # Without a cache (location None) nothing is locked; the options are checked anyway.
        self._calls: Calls | None = None
        check = Calls(root or "memory://joblib", ours, poll)
        if store is not None and root is not None:
            self._calls = check

    @property
    def lock_root(self) -> str | None:
        """Where the locks of the calls are; None without a cache (``location=None``)."""
        return None if self._calls is None else self._calls.root

    def cache(self, func: Any = None, *args: Any, **kwargs: Any) -> Any:
        """``joblib.Memory.cache``: the function, cached, each call computed once across
        processes (an async function's too); as a decorator, with or without arguments."""
        made: Any = super().cache(func, *args, **kwargs)
        if self._calls is not None and type(made) in _LOCKED:
            # joblib builds the MemorizedFunc itself; it becomes ours with its state as is.
            made.__class__ = _LOCKED[type(made)]
            made._blob_lock_calls = self._calls
        return made

    def clear(self, warn: bool = True) -> None:
        """``joblib.Memory.clear``, then the free locks pruned (a held one is kept)."""
        super().clear(warn=warn)
        if self._calls is not None:
            self._calls.prune()

    def reduce_size(self, *args: Any, **kwargs: Any) -> None:
        """``joblib.Memory.reduce_size``; given a limit, the free locks are pruned too."""
        super().reduce_size(*args, **kwargs)
        limited = any(a is not None for a in (*args, *kwargs.values()))
        if self._calls is not None and limited:
            self._calls.prune()


class _Locked(MemorizedFunc):  # type: ignore[misc,unused-ignore]
    """A ``MemorizedFunc`` whose misses take the call's claim (made by ``Memory.cache``)."""

    _blob_lock_calls: Calls

    def __repr__(self) -> str:
        # joblib's own, under the name of the joblib class this one stands in for.
        shown: str = super().__repr__()
        return shown.replace(type(self).__name__, _JOBLIB_NAMES[type(self)], 1)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Forces the computation (``MemorizedFunc.call``), holding the call's lock."""
        call_id = (self.func_id, self._get_args_id(*args, **kwargs))
        return self._compute(call_id, args, kwargs, False, look=False)

    def _call(self, call_id: Any, args: Any, kwargs: Any, shelving: bool = False) -> Any:
        # joblib's miss: computed here only if the result is still missing under the lock.
        return self._compute(call_id, args, kwargs, shelving, look=True, warned=_warned(call_id))

    def _is_in_cache_and_valid(self, call_id: Any) -> bool:
        # joblib's look, in its order, but for an output without metadata: joblib writes the
        # output first, so that is a call still being stored (a miss), not a result for the
        # validation callback to judge (it would read {}) or to delete.
        if not self._check_previous_func_code(stacklevel=4):
            return False
        # joblib types the backend as its base, without the item methods every backend has.
        store: Any = self.store_backend
        if store is None or not store.contains_item(call_id):
            return False
        metadata = store.get_metadata(call_id)
        if not metadata:
            return False
        validate = self.cache_validation_callback
        if validate is not None and not validate(metadata):
            store.clear_item(call_id)
            return False
        return True

    def _load_item(self, call_id: Any, metadata: Any = None) -> Any:
        try:
            return super()._load_item(call_id, metadata)
        except Exception:
            _unloadable.set(call_id)  # joblib's hit warns of it, then misses
            raise

    def _compute(
        self, call_id: Any, args: Any, kwargs: Any, shelving: bool, look: bool,
        warned: bool = False,
    ) -> Any:  # fmt: skip
        calls = self._blob_lock_calls
        with calls.claim(call_id, self._done(call_id) if look else never) as claim:
            if claim.launch:
                token = _computing.set(Computing(call_id, claim, calls))
                try:
                    return MemorizedFunc._call(self, call_id, args, kwargs, shelving)
                finally:
                    _computing.reset(token)
            stored = self._stored(call_id, shelving, warned)
        if stored is not None:
            return stored
        return self._compute(call_id, args, kwargs, shelving, look=False)

    def _done(self, call_id: Any) -> Any:
        return lambda: self._is_in_cache_and_valid(call_id)

    def _stored(self, call_id: Any, shelving: bool, warned: bool) -> Any:
        """The result another process stored, as joblib's hit returns it; None when it
        cannot be loaded (joblib's hit then computes the call again, and so does this),
        with a warning unless joblib's hit warned of this call already."""
        if shelving:
            return self._get_memorized_result(call_id), {}
        try:
            return MemorizedFunc._load_item(self, call_id), {}
        except Exception as e:
            if not warned:
                self.warn(f"Exception while loading results for {call_id}: {e!r}; computing it")
            return None

    def _after_call(
        self, call_id: Any, args: Any, kwargs: Any, shelving: bool, output: Any, start_time: Any
    ) -> Any:
        def write() -> Any:  # joblib's write of the result and its metadata
            return super(_Locked, self)._after_call(
                call_id, args, kwargs, shelving, output, start_time
            )

        computing = _computing.get()
        if computing is None or computing.call_id != call_id:
            return write()
        return computing.store(write, ((NotMemorizedResult(output) if shelving else output), {}))

    # Not `clear`: joblib clears a function's cache itself when its code changed, inside the
    # call; a prune there would list every lock of the function first. The Memory's prune.


class _LockedAsync(_Locked, AsyncMemorizedFunc):  # type: ignore[misc,unused-ignore]
    """``_Locked`` for a coroutine function: the claim is taken, and a lost lease renewed,
    without blocking the loop."""

    async def call(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        call_id = (self.func_id, self._get_args_id(*args, **kwargs))
        return await self._compute_async(call_id, args, kwargs, False, look=False)

    async def _call(  # type: ignore[override]
        self, call_id: Any, args: Any, kwargs: Any, shelving: bool = False
    ) -> Any:
        warned = _warned(call_id)
        return await self._compute_async(call_id, args, kwargs, shelving, True, warned)

    async def _compute_async(
        self, call_id: Any, args: Any, kwargs: Any, shelving: bool, look: bool,
        warned: bool = False,
    ) -> Any:  # fmt: skip
        calls = self._blob_lock_calls
        done = self._done(call_id) if look else never
        async with calls.claim_async(call_id, done) as claim:
            if claim.launch:
                computing = Computing(call_id, claim, calls)
                token = _computing.set(computing)
                try:
                    return await self._run(computing, call_id, args, kwargs, shelving)
                finally:
                    _computing.reset(token)
            stored = self._stored(call_id, shelving, warned)
        if stored is not None:
            return stored
        return await self._compute_async(call_id, args, kwargs, shelving, look=False)

    async def _run(
        self, computing: Computing, call_id: Any, args: Any, kwargs: Any, shelving: bool
    ) -> Any:
        # AsyncMemorizedFunc._call, with the lease settled (a lost one renewed, awaited)
        # between the function's end and joblib's write, which joblib makes on the loop.
        self._before_call(args, kwargs)
        start_time = time.time()
        output = await self.func(*args, **kwargs)
        await computing.settle_async()
        try:
            return self._after_call(call_id, args, kwargs, shelving, output, start_time)
        finally:
            await computing.end_async()


_LOCKED = {MemorizedFunc: _Locked, AsyncMemorizedFunc: _LockedAsync}
_JOBLIB_NAMES = {_Locked: MemorizedFunc.__name__, _LockedAsync: AsyncMemorizedFunc.__name__}


def _warned(call_id: Any) -> bool:
    """Whether joblib's hit just warned that this call's stored result fails to load (the
    note read once, then cleared)."""
    failed = _unloadable.get()
    if failed is not None:
        _unloadable.set(None)
    return bool(failed == call_id)


def _refuse_unknown(names: dict[str, Any]) -> None:
    import difflib

    known = LOCK_OPTION_NAMES | {"poll"}
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, [*known, "lock_prefix", *_JOBLIB_PARAMS], n=1)
            hint = f' (did you mean "{close[0]}"?)' if close else ""
            raise TypeError(
                f'Memory() got an unknown argument "{name}"{hint}: it takes joblib.Memory\'s '
                f"({', '.join(sorted(_JOBLIB_PARAMS))}), lock_prefix, poll and BlobLock's "
                f"options ({', '.join(o for o in sorted(LOCK_OPTION_NAMES))})"
            )


# help() and inspect.signature show joblib's parameters, then blob-lock's, each option.
_HEAD = [
    p
    for p in _pyinspect.signature(Memory.__init__).parameters.values()
    if p.kind is not _pyinspect.Parameter.VAR_KEYWORD
]
Memory.__init__.__signature__ = signature(_HEAD)  # type: ignore[attr-defined]
