"""The lock's options have one definition (src/lease/settings.rs): every entry point, the
typing, the signatures, the CLI's flags and the docs agree with it."""

from __future__ import annotations

import inspect
import pathlib
import re
import subprocess
import sys
from datetime import timedelta

import blob_lock
import pytest
from blob_lock import (
    LOCK_OPTIONS,
    BlobLock,
    KeepAliveOptions,
    LockOptions,
    _make_option_types,
    claim_memo,
    keep_alive,
    locked,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMES = [o.name for o in LOCK_OPTIONS]


def test_the_typing_is_made_from_the_definition():
    assert _make_option_types.current() == _make_option_types.render(), (
        "python/blob_lock/_option_types.py is out of date with src/lease/settings.rs: "
        "run `make options`"
    )
    assert list(LockOptions.__annotations__) == NAMES
    assert set(KeepAliveOptions.__annotations__) == set(blob_lock._blob_lock.KEEP_ALIVE_OPTIONS)


@pytest.mark.parametrize("entry", [BlobLock, locked, claim_memo])
def test_signatures_show_every_option_with_its_default(entry):
    params = inspect.signature(entry).parameters
    for o in LOCK_OPTIONS:
        assert params[o.name].kind is inspect.Parameter.KEYWORD_ONLY, o.name
        assert params[o.name].default == o.default, o.name


def test_a_lock_made_with_no_options_uses_the_defaults(tmp_path):
    defaults = {o.name: o.default for o in LOCK_OPTIONS}
    assert defaults["expire"] == 30.0 and defaults["clock_skew"] == 60.0
    plain, spelled = BlobLock(tmp_path / "a"), BlobLock(tmp_path / "b", **defaults)
    for lock in (plain, spelled):
        assert lock.expire == defaults["expire"]
        assert lock.heartbeat == pytest.approx(defaults["expire"] / 3)
        assert lock.protocol in ("auto", "cas")
        assert lock._timeout is None and lock._raise_on_lost is True


def test_a_fresh_lock_like_one_made_before_is_a_lock_of_its_own(tmp_path):
    """A fresh BlobLock on a local URI made before with the same options starts from that
    one's native lock: each still has an owner id of its own, takes its own options, and
    excludes the others."""
    uri = str(tmp_path / "lock")
    locks = [BlobLock(uri, expire=7.0, timeout=0) for _ in range(50)]
    assert len({lock.owner for lock in locks}) == 50
    assert all(lock.expire == 7.0 and lock._timeout == 0 for lock in locks)
    with locks[0] as first:
        assert not any(lock.try_acquire() for lock in locks[1:])
        token = first.token
    with locks[-1]:
        assert locks[0].try_acquire() is False
    with BlobLock(uri, expire=9.0) as other:  # other options: not a copy of the first
        assert other.expire == 9.0 and other.token > token


def test_locks_on_many_local_uris_keep_a_bounded_number_of_templates(tmp_path):
    """Thousands of locks on distinct URIs in one process: each is its own lock, and the
    native locks kept to make later ones from stay a few dozen."""
    from blob_lock import _templates

    locks = [BlobLock(str(tmp_path / f"lock-{i}"), expire=7.0) for i in range(200)]
    assert len(_templates._TEMPLATES) <= 64
    assert all(lock.try_acquire() for lock in locks)
    assert BlobLock(str(tmp_path / "lock-0"), expire=7.0).try_acquire() is False
    for lock in locks:
        lock.release()


@pytest.mark.parametrize(
    "made, given",
    [
        ({"raise_on_lost": True}, {"raise_on_lost": 1}),
        ({"expire": 30}, {"expire": True}),
        ({"expire": 1.0}, {"expire": True}),
    ],
)
def test_equal_options_of_another_type_are_still_checked(tmp_path, made, given):
    """``1 == True`` and ``True == 1.0`` in Python; a lock made with one does not let the
    other through unchecked."""
    uri = str(tmp_path / "lock")
    BlobLock(uri, **made)
    with pytest.raises(TypeError):
        BlobLock(uri, **given)


class _UnhashableCallback:
    __hash__ = None  # type: ignore[assignment]

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, error: Exception) -> None:
        self.calls += 1


class _HashFails(_UnhashableCallback):
    def __hash__(self) -> int:
        raise RuntimeError("no hash here")


@pytest.mark.parametrize("callback", [_UnhashableCallback, _HashFails])
def test_a_callback_that_cannot_be_hashed_is_taken_as_given(tmp_path, callback):
    """Made locks are looked up by their options; a value that cannot be hashed is not an
    error, and each lock keeps its own callback."""
    uri = str(tmp_path / "lock")
    first, second = callback(), callback()
    a, b = BlobLock(uri, on_lost=first), BlobLock(uri, on_lost=second)
    assert a.owner != b.owner
    with a:
        assert b.try_acquire() is False
    assert b._options is not None and b._options["on_lost"] is second


def test_every_entry_point_takes_each_of_its_options(tmp_path):
    values = {
        "expire": timedelta(seconds=6),
        "heartbeat": 1,
        "timeout": 0.5,
        "protocol": "cas",
        "storage_options": {},
        "credential_provider": None,
        "settle": 0.1,
        "clock_skew": None,
        "on_lost": print,
        "raise_on_lost": False,
        "labels": {"run": "1"},
    }
    assert set(values) == set(NAMES), "a new option needs a value here"
    for name, value in values.items():
        lock = locked(tmp_path / name, **{name: value})
        assert BlobLock(tmp_path / name, **{name: value}).uri == lock.uri
        claim_memo(tmp_path / name, done=lambda: True, **{name: value})
    lock = BlobLock(tmp_path / "x", expire=6, timeout=0.5, raise_on_lost=False, labels={"a": "b"})
    assert (lock.expire, lock._timeout, lock._raise_on_lost, lock.labels) == (
        6.0,
        0.5,
        False,
        {"a": "b"},
    )


def test_an_unknown_option_names_the_nearest_one(tmp_path):
    with pytest.raises(TypeError, match=r'unknown option "expires": did you mean "expire"'):
        BlobLock(tmp_path, expires=5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r'unknown option "timout": did you mean "timeout"'):
        claim_memo(tmp_path, done=lambda: True, timout=5)  # type: ignore[call-arg]


def test_keep_alive_refuses_the_orchestrators_options(tmp_path):
    with BlobLock(tmp_path) as held:
        with pytest.raises(TypeError, match="keep_alive\\(\\) does not take expire"):
            keep_alive(tmp_path, held.owner, expire=5)  # type: ignore[call-arg]
        with keep_alive(tmp_path, held.owner, protocol="cas", on_lost=print) as kept:
            assert not kept.lost


def test_wrong_types_name_the_option(tmp_path):
    for name, value, says in [
        ("expire", "30", "expire must be seconds"),
        ("expire", None, "expire must be seconds"),
        ("heartbeat", True, "heartbeat must be seconds"),
        ("protocol", 1, 'protocol must be "auto", "cas" or "lww"'),
        ("raise_on_lost", 1, "raise_on_lost must be True or False"),
        ("on_lost", 1, "on_lost must be callable"),
        ("labels", ["a"], "labels must be a mapping"),
    ]:
        with pytest.raises(TypeError, match=re.escape(says)):
            BlobLock(tmp_path, **{name: value})


def test_the_cli_has_a_flag_for_each_seconds_and_protocol_option():
    shown = subprocess.run(
        [sys.executable, "-m", "blob_lock", "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for o in LOCK_OPTIONS:
        if o.kind in ("seconds", "seconds_or_none", "protocol"):
            assert f"--{o.name.replace('_', '-')}" in shown, o.name


def test_the_usage_docs_list_every_option():
    table = (ROOT / "docs" / "usage.md").read_text()
    for name in NAMES:
        assert re.search(rf"^\| `{name}` \|", table, re.M), f"docs/usage.md: no row for {name}"
