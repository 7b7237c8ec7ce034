"""Writes ``_option_types.py``, the typing of the lock's keyword arguments (``LockOptions``,
``KeepAliveOptions``), from their one definition (``_options.py``, read from the native
core). ``make options`` runs ``write()``; tests/python/test_options.py compares ``render()``
with ``current()``. The package does not import it."""

from __future__ import annotations

import pathlib
import textwrap

from blob_lock._options import KEEP_ALIVE, LOCK_OPTIONS, TYPES, LockOption

__all__ = ["current", "render", "write"]

#: The file this writes.
PATH = pathlib.Path(__file__).with_name("_option_types.py")

# Its opening, before the classes: written here, as the rest is.
_HEAD = '''"""The typing of the lock's keyword arguments, written by ``make options``
(``_make_option_types.py``) from their one definition in ``src/lease/settings.rs``: do not
edit; tests/python/test_options.py fails until it is current."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Literal, TypedDict

if TYPE_CHECKING:
    from blob_lock._args import Seconds
    from blob_lock._credentials import CredentialProvider
    from blob_lock.exceptions import LockLost

__all__ = ["KeepAliveOptions", "LockOptions"]


'''


def _typed_dict(name: str, doc: str, options: list[LockOption]) -> str:
    lines = [f"class {name}(TypedDict, total=False):", f'    """{doc}"""', ""]
    for o in options:
        default = "" if o.default is None else f" Default ``{o.default!r}``."
        text = textwrap.wrap(o.doc.replace("`", "``") + default, width=92)
        lines.append(f"    {o.name}: {TYPES[o.kind]}")
        if len(text) == 1:
            lines.append(f'    """{text[0]}"""')
        else:
            lines += [f'    """{text[0]}'] + [f"    {t}" for t in text[1:]] + ['    """']
    return "\n".join(lines)


def render() -> str:
    """``_option_types.py`` as the definition makes it."""
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
    return f"{_HEAD}{lock}\n\n\n{keep}\n"


def current(path: pathlib.Path = PATH) -> str:
    """``_option_types.py`` as it stands."""
    return path.read_text(encoding="utf-8")


def write(path: pathlib.Path = PATH) -> bool:
    """Rewrites ``_option_types.py``; True if it changed."""
    new = render()
    if new == current(path):
        return False
    path.write_text(new, encoding="utf-8")
    return True
