"""The lock's options as Python sees them, made from their one definition in the native core
(``src/lease/settings.rs``: name, kind, default, doc): the typing of the keyword arguments
(``LockOptions``, ``KeepAliveOptions``), the signatures that ``help()`` shows, and the CLI's
flags. ``make options`` rewrites the typing below; a test checks that it is current.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypedDict, TypeVar, cast

from blob_lock import _blob_lock

if TYPE_CHECKING:
    from blob_lock._args import Seconds
    from blob_lock._credentials import CredentialProvider
    from blob_lock.exceptions import LockLost

__all__ = ["LOCK_OPTIONS", "KeepAliveOptions", "LockOption", "LockOptions", "signature"]


class LockOption(NamedTuple):
    """One option of the lock, as its definition gives it."""

    name: str
    kind: str
    default: Any
    doc: str


LOCK_OPTIONS: tuple[LockOption, ...] = tuple(
    LockOption(*row) for row in _blob_lock.option_definitions()
)
KEEP_ALIVE: tuple[str, ...] = tuple(_blob_lock.KEEP_ALIVE_OPTIONS)

# How each kind is typed.
_TYPES = {
    "seconds": "Seconds",
    "seconds_or_none": "Seconds | None",
    "protocol": 'Literal["auto", "cas", "lww"]',
    "flag": "bool",
    "labels": "Mapping[str, str] | None",
    "storage_options": "Mapping[str, str] | None",
    "credentials": "CredentialProvider | object | None",
    "callback": "Callable[[LockLost], object] | None",
}


def signature(
    head: list[inspect.Parameter], names: tuple[str, ...] | None = None
) -> inspect.Signature:
    """``head`` followed by the options (those in ``names``, else all) as keyword-only
    parameters with their defaults: what ``help()`` and ``inspect.signature`` show."""
    return inspect.Signature(
        head
        + [
            inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=o.default,
                              annotation=_TYPES[o.kind])
            for o in LOCK_OPTIONS
            if names is None or o.name in names
        ]
    )  # fmt: skip


def _typed_dict(name: str, doc: str, options: list[LockOption]) -> str:
    lines = [f"class {name}(TypedDict, total=False):", f'    """{doc}"""', ""]
    for o in options:
        default = "" if o.default is None else f" Default ``{o.default!r}``."
        text = textwrap.wrap(o.doc.replace("`", "``") + default, width=92)
        lines.append(f"    {o.name}: {_TYPES[o.kind]}")
        if len(text) == 1:
            lines.append(f'    """{text[0]}"""')
        else:
            lines += [f'    """{text[0]}'] + [f"    {t}" for t in text[1:]] + ['    """']
    return "\n".join(lines)


# The markers of the made block (written in two pieces, so that these lines do not match).
_BEGIN = "# --- made by `make options` " + "from src/lease/settings.rs: do not edit ---"
_END = "# --- end of what `make options` " + "makes ---"


def render() -> str:
    """The typing block of this file, as the definition makes it."""
    lock = _typed_dict(
        "LockOptions",
        "The keyword arguments of ``BlobLock``, ``locked`` and ``claim_memo``.",
        list(LOCK_OPTIONS),
    )
    keep = _typed_dict(
        "KeepAliveOptions",
        "The keyword arguments of ``keep_alive``: the timing is the orchestrator's.",
        [o for o in LOCK_OPTIONS if o.name in KEEP_ALIVE],
    )
    return f"{_BEGIN}\n\n\n{lock}\n\n\n{keep}\n\n\n{_END}"


def write(path: str = __file__) -> bool:
    """Rewrites the typing block of this file; True if it changed."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start, end = text.index(_BEGIN), text.index(_END) + len(_END)
    new = text[:start] + render() + text[end:]
    if new != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(new)
    return new != text


def current(path: str = __file__) -> str:
    """The typing block of this file as it stands."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text[text.index(_BEGIN) : text.index(_END) + len(_END)]


# --- made by `make options` from src/lease/settings.rs: do not edit ---


class LockOptions(TypedDict, total=False):
    """The keyword arguments of ``BlobLock``, ``locked`` and ``claim_memo``."""

    expire: Seconds
    """Seconds after its last write at which a lock nobody renews expires (0.5 s to 7 days).
    Default ``30.0``.
    """
    heartbeat: Seconds | None
    """Seconds between renewals; default ``expire / 3``, below ``expire / 2``."""
    timeout: Seconds | None
    """Seconds a ``with`` block or ``acquire`` waits for the lock before ``LockTimeout``; None
    waits for ever.
    """
    protocol: Literal["auto", "cas", "lww"]
    """``"cas"`` (conditional writes: mutual exclusion), ``"lww"`` (last writer wins after a settle
    wait: best effort, for stores without conditional writes) or ``"auto"`` (``cas`` where the
    store honours conditional writes, else ``lww`` with a warning). Default ``'auto'``.
    """
    storage_options: Mapping[str, str] | None
    """object_store configuration keys (``aws_endpoint``, ``azure_storage_account_name``, ...) on
    top of the environment, and ``blob_lock_conditional_writes="trust"``.
    """
    credential_provider: CredentialProvider | object | None
    """Where credentials come from (a callable returning them, a boto3 session, an azure-identity
    credential, google-auth credentials); None: ``set_credentials``, else the cloud's own chain.
    """
    settle: Seconds | None
    """lww only: seconds a writer waits after writing before reading back; default ``expire / 20``
    within 0.05 to 0.5 s.
    """
    clock_skew: Seconds | None
    """How far machines' wall clocks may disagree, in seconds: a lock last written more than
    ``expire + clock_skew`` ago is taken at once; None switches that off. Default ``60.0``.
    """
    on_lost: Callable[[LockLost], object] | None
    """Called once, on one of blob-lock's callback threads, with the ``LockLost`` error when a held
    lock is lost.
    """
    raise_on_lost: bool
    """Whether leaving a ``with`` block after a loss raises ``LockLost``. Default ``True``."""
    labels: Mapping[str, str] | None
    """Written into the lockfile by every acquisition: who holds the lock and why (at most 32; keys
    of 1 to 63 ASCII letters, digits, ``_-.``; values up to 1,024 characters).
    """


class KeepAliveOptions(TypedDict, total=False):
    """The keyword arguments of ``keep_alive``: the timing is the orchestrator's."""

    protocol: Literal["auto", "cas", "lww"]
    """``"cas"`` (conditional writes: mutual exclusion), ``"lww"`` (last writer wins after a settle
    wait: best effort, for stores without conditional writes) or ``"auto"`` (``cas`` where the
    store honours conditional writes, else ``lww`` with a warning). Default ``'auto'``.
    """
    storage_options: Mapping[str, str] | None
    """object_store configuration keys (``aws_endpoint``, ``azure_storage_account_name``, ...) on
    top of the environment, and ``blob_lock_conditional_writes="trust"``.
    """
    credential_provider: CredentialProvider | object | None
    """Where credentials come from (a callable returning them, a boto3 session, an azure-identity
    credential, google-auth credentials); None: ``set_credentials``, else the cloud's own chain.
    """
    on_lost: Callable[[LockLost], object] | None
    """Called once, on one of blob-lock's callback threads, with the ``LockLost`` error when a held
    lock is lost.
    """


# --- end of what `make options` makes ---


# Options dicts of plain values, one per distinct set: thousands of locks made with the same
# keyword arguments (``expire=30``) keep one dict between them instead of 200 bytes each.
_SHARED: dict[tuple[tuple[tuple[str, object], ...], tuple[type, ...]], Mapping[str, Any]] = {}
_PLAIN = frozenset({str, int, float, bool, type(None)})
_Options = TypeVar("_Options", bound=Mapping[str, Any])


def options_key(options: Mapping[str, Any]) -> tuple[Any, ...]:
    """What tells ``options`` from other sets, compared with their types (``1`` is not
    ``True``). Unhashable when a value is (a dict); see ``is_plain``."""
    # map and tuple, not a generator: a fresh BlobLock per `with` makes this call each time.
    return (tuple(options.items()), tuple(map(type, options.values())))


def is_plain(key: tuple[Any, ...]) -> bool:
    """Whether the options of ``key`` (``options_key``) are all plain values: no callback, no
    provider, no dict, which are never kept beyond the lock they were given to."""
    return _PLAIN.issuperset(key[1])


def shared(options: _Options, key: tuple[Any, ...]) -> _Options:
    """``options``, or an equal dict kept for locks made with the same options before (never
    to be changed: it is read when a lock is pickled or decorates a function). ``key`` is
    ``options_key(options)``, of plain values only, and only a few dozen sets are kept, so
    user objects (callbacks, providers) are never kept alive here."""
    kept = _SHARED.get(key)
    if kept is not None:
        return cast(_Options, kept)
    if len(_SHARED) < 64:
        _SHARED[key] = options
    return options
