"""Bad input, through every public entry point: a clear error that names the thing, never
a panic (pyo3's PanicException escapes ``except Exception``), a hang, or a traceback from
the command line; and nothing accepted that a later reader would reject."""

from __future__ import annotations

import asyncio
import json
import math
import pathlib
import re
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from blob_lock import (
    BlobLock,
    LockError,
    StoreError,
    break_lock,
    claim_memo,
    claim_memo_async,
    doctor,
    inspect,
    inspect_async,
    keep_alive,
    keep_alive_async,
    list_locks,
    locked,
    prune_locks,
    wait_free,
    wait_free_async,
    write_once,
    write_once_async,
)
from conftest import cli, option_args

# Left out of `make test-fast` (-m "not slow"): the command line's bad input, a process per case
pytestmark = pytest.mark.slow

UNREACHABLE = "http://127.0.0.1:1"
S3 = {
    "aws_allow_http": "true",
    "aws_region": "us-east-1",
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
    "aws_endpoint": UNREACHABLE,
}

BAD_ENDPOINTS = [
    "localhost:9000",
    "127.0.0.1:9000",
    "http://",
    "http://:9000",
    "http://127.0.0.1:99999",
    "http://127.0.0.1:port",
    "http://exa mple.com",
    "ftp://example.com",
    "http://[::1",
    "http://host/?q=1",
    "",
    "http://ünïcode.example",
    "s3://bucket",
]

# (URI, storage options): stores or options that cannot work.
BAD_STORES: list[tuple[str, dict[str, str]]] = [
    *[("s3://bucket/lock", {**S3, "aws_endpoint": e}) for e in BAD_ENDPOINTS],
    ("s3://bucket/lock", {**S3, "aws_region": "us east"}),
    ("s3://bucket/lock", {**S3, "aws_allow_http": "maybe"}),
    ("s3://bucket/lock", {**S3, "no_such_option": "1"}),
    ("s3://bucket/lock", {**S3, "aws_bucket": "other"}),
    ("s3://bucket/lock", {**S3, "timeout": "soon"}),
    ("s3://bucket/lock", {**S3, "aws_access_key_id": "key\n"}),
    ("s3://bucket/lock", {**S3, "aws_session_token": "tok\r\nX-Injected: 1"}),
    ("s3://bucket/lock", {**S3, "proxy_url": "not a url"}),
    ("s3://bucket/lock", {**S3, "blob_lock_conditional_writes": "yes"}),
    ("s3://bucket/lock", {**S3, "blob_lock_no_such_option": "1"}),
    ("az://container/lock", {"azure_storage_account_name": "bad name"}),
    (
        "az://container/lock",
        {"azure_storage_use_emulator": "true", "azure_storage_account_key": "!"},
    ),
    ("az://container/lock", {"azure_storage_account_name": "a", "azure_storage_endpoint": "x:1"}),
    ("gs://bucket/lock", {"google_base_url": "localhost:1"}),
    ("memory://store/lock", {"aws_region": "us-east-1"}),
    ("/tmp/blob-lock-bad-input/lock", {"aws_region": "us-east-1"}),
]

BAD_URIS: list[object] = [
    "",
    "   ",
    "s3://",
    "s3:///lock",
    "s3://Bucket/lock",
    "s3://bucket/lock?version=2",
    "s3://bucket/lock#frag",
    "file:///tmp/m#f",
    "s3://bucket//lock",
    "s3://bucket/./lock",
    "s3://bucket/../lock",
    "s3://../lock",
    "s3://b/lock",
    "s3://bucket:9000/lock",
    "s3://user@bucket/lock",
    "file://host/tmp/lock",
    "memory://",
    "ftp://host/lock",
    "s3:bucket/lock",
    "/tmp/a\x00b",
    "s3://bucket/a\x01b",
    "az://container/a%20b",
    "~nobody-such-user/lock",
    None,
    42,
    3.5,
    b"/tmp/lock",
    ["s3://bucket/lock"],
]

BAD_TIMINGS: list[dict[str, Any]] = [
    {"expire": 1e10},
    {"expire": 0},
    {"expire": -1},
    {"expire": math.nan},
    {"expire": math.inf},
    {"expire": 0.1},
    {"expire": "30"},
    {"expire": True},
    {"heartbeat": 0.001},
    {"heartbeat": 1e9},
    {"settle": 1e9},
    {"settle": -1},
    {"timeout": 1e10},
    {"timeout": -1},
    {"timeout": math.nan},
    {"clock_skew": 1e12},
    {"clock_skew": -5},
    {"protocol": "fast"},
    {"protocol": None},
    {"on_lost": "not callable"},
    {"storage_options": ["aws_region"]},
    {"storage_options": {1: "x"}},
    {"storage_options": {"aws_region": None}},
]


def fails_cleanly(call: Callable[[], object], what: str) -> BaseException:
    """Calls ``call``; it must raise a ValueError, TypeError or LockError (never a panic,
    which is a BaseException) within a liveness bound."""
    began = time.monotonic()
    try:
        call()
    except BaseException as e:  # what we check: the kind of error
        assert type(e).__name__ != "PanicException", f"{what}: panic: {e}"
        assert isinstance(e, (ValueError, TypeError, LockError)), f"{what}: {type(e)}: {e}"
        assert time.monotonic() - began < 30, f"{what}: took {time.monotonic() - began:.1f}s"
        return e
    raise AssertionError(f"{what}: accepted")


async def _awaited(x: Any) -> object:
    return await x


async def _entered(manager: Any) -> object:
    async with manager as value:
        return value


def _never() -> bool:
    return False


def entry_points(uri: object, options: Any) -> dict[str, Callable[[], object]]:
    """Every public call that takes a lock URI and storage options."""

    def acquired() -> object:
        return BlobLock(uri, storage_options=options, expire=2).acquire()  # type: ignore[arg-type]

    return {
        "BlobLock": lambda: BlobLock(uri, storage_options=options),  # type: ignore[arg-type]
        "acquire (timeout None)": acquired,
        "locked": lambda: locked(uri, storage_options=options).__enter__(),  # type: ignore[arg-type]
        "keep_alive": lambda: keep_alive(uri, "owner", storage_options=options),  # type: ignore[arg-type]
        "keep_alive_async": lambda: asyncio.run(
            _awaited(keep_alive_async(uri, "owner", storage_options=options))  # type: ignore[arg-type]
        ),
        "inspect": lambda: inspect(uri, storage_options=options),  # type: ignore[arg-type]
        "inspect_async": lambda: asyncio.run(inspect_async(uri, storage_options=options)),  # type: ignore[arg-type]
        "wait_free": lambda: wait_free(uri, timeout=5, storage_options=options),  # type: ignore[arg-type]
        "wait_free_async": lambda: asyncio.run(
            wait_free_async(uri, timeout=5, storage_options=options)  # type: ignore[arg-type]
        ),
        "break_lock": lambda: break_lock(uri, storage_options=options),  # type: ignore[arg-type]
        "claim_memo": lambda: claim_memo(
            uri,  # type: ignore[arg-type]
            done=_never,
            timeout=5,
            storage_options=options,
        ).__enter__(),
        "claim_memo_async": lambda: asyncio.run(
            _entered(claim_memo_async(uri, done=_never, timeout=5, storage_options=options))  # type: ignore[arg-type]
        ),
        "write_once": lambda: write_once(uri, b"x", storage_options=options),  # type: ignore[arg-type]
        "write_once_async": lambda: asyncio.run(
            write_once_async(uri, b"x", storage_options=options)  # type: ignore[arg-type]
        ),
        "acquire_async": lambda: asyncio.run(
            BlobLock(uri, storage_options=options).acquire_async(timeout=5)  # type: ignore[arg-type]
        ),
        "list_locks": lambda: list(list_locks(uri, storage_options=options)),  # type: ignore[arg-type]
        "prune_locks": lambda: list(
            prune_locks(uri, older_than=86400, storage_options=options)  # type: ignore[arg-type]
        ),
        "doctor": lambda: doctor(uri, storage_options=options),  # type: ignore[arg-type]
    }


@pytest.mark.parametrize(("uri", "options"), BAD_STORES, ids=[f"{u} {o}" for u, o in BAD_STORES])
def test_bad_stores_and_options_fail_cleanly_everywhere(uri, options):
    for name, call in entry_points(uri, options).items():
        e = fails_cleanly(call, name)
        if isinstance(e, ValueError):
            # It names what is wrong: the option, or the value.
            assert any(k in str(e) or (v and v in str(e)) for k, v in options.items()), (name, e)


@pytest.mark.parametrize("uri", BAD_URIS, ids=repr)
def test_bad_uris_fail_cleanly_everywhere(uri):
    for name, call in entry_points(uri, None).items():
        e = fails_cleanly(call, name)
        if isinstance(uri, str):
            # It names the URI (a prefix, for listings; the memo, for a claim's).
            named = {"list_locks": "prefix", "prune_locks": "prefix"}.get(name, "URI")
            said = str(e).replace("memo_uri", "memo URI")
            assert isinstance(e, ValueError) and named in said, (name, e)
        else:
            assert isinstance(e, TypeError), (name, e)


def test_a_bad_cloud_uri_is_refused_before_a_cloud_library_is_imported():
    """A typo in a URI fails in milliseconds: checking it does not wait for azure-identity
    (a third of a second to import) or another cloud's credential chain."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from blob_lock import BlobLock, inspect\n"
        "for call in (lambda: inspect('az://container/a%20b'), lambda: BlobLock('az://c/a%b')):\n"
        "    try:\n"
        "        call()\n"
        "    except ValueError:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit('accepted')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('azure', 'boto3', 'google')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout


@pytest.mark.parametrize("timing", BAD_TIMINGS, ids=repr)
def test_bad_settings_are_refused_at_construction(tmp_path, timing):
    fails_cleanly(lambda: BlobLock(tmp_path / "lock", **timing), f"BlobLock {timing}")
    assert not (tmp_path / "lock").exists(), "nothing was written"


def test_a_path_is_a_uri_and_spellings_of_one_object_are_one_lock(tmp_path):
    as_path = BlobLock(tmp_path / "lock")
    with as_path:
        for spelling in (str(tmp_path / "lock"), f"file://{tmp_path}/lock", f"{tmp_path}/lock/"):
            assert BlobLock(spelling).try_acquire() is False, spelling
    assert pathlib.Path(as_path.uri) == tmp_path / "lock"


def test_an_unreachable_store_fails_fast_even_without_a_timeout():
    for endpoint in (UNREACHABLE, "http://no-such-host.invalid"):
        options = {**S3, "aws_endpoint": endpoint}
        began = time.monotonic()
        with pytest.raises(StoreError) as info:
            BlobLock("s3://bucket/lock", storage_options=options).acquire(timeout=None)
        assert time.monotonic() - began < 15
        assert info.value.transient is False
        assert "has not answered" in str(info.value) and endpoint in str(info.value)


def test_an_endpoint_that_resets_every_connection_fails_fast():
    """Connections accepted and then reset are retried a few times at first contact (a
    flaky path), never waited on for ever: a server that never answers still fails."""
    from fault_proxy import FaultProxy

    proxy = FaultProxy("127.0.0.1", 9)
    # A bucket of its own: the process keeps one client per bucket and options, with what
    # it learnt of the store, and an earlier test's proxy may have had this port.
    uri = f"s3://bucket-{uuid.uuid4().hex[:12]}/lock"
    try:
        proxy.reset()
        began = time.monotonic()
        with pytest.raises(StoreError) as info:
            BlobLock(uri, storage_options={**S3, "aws_endpoint": proxy.url}).acquire(timeout=None)
        assert time.monotonic() - began < 30
        assert info.value.transient is False
        assert "has not answered" in str(info.value) and proxy.url in str(info.value)
        assert proxy.accepted > 1, f"the dropped connections were not retried: {info.value}"
    finally:
        proxy.close()


def cli_fails_cleanly(args: list[str], env: dict[str, str] | None = None) -> None:
    done = cli(*args, env=env, timeout=60)
    what = f"blob-lock {args} {env or ''}: exit {done.returncode}\n{done.stderr}"
    assert done.returncode in (1, 2), what
    assert "Traceback" not in done.stderr and "panicked" not in done.stderr, what
    # The error, named. A command that waits may show its progress line first, when the
    # machine is slow enough that a second passes before the error.
    error = PROGRESS.sub("", done.stderr)
    assert error.startswith("blob-lock:"), what


PROGRESS = re.compile(r"^\d\d:\d\d:\d\d blob-lock: waited \d+s.*\n", re.M)


COMMANDS = [
    ["run", "--timeout", "5", "{uri}", "--", "true"],
    ["status", "{uri}"],
    ["wait", "--timeout", "5", "{uri}"],
    ["break", "--yes", "{uri}"],
    ["doctor", "{uri}"],
    ["ls", "{uri}"],
    ["prune", "--older-than", "1d", "--yes", "{uri}"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_the_command_line_reports_bad_input_without_a_traceback(command: list[str]):
    cases: list[tuple[list[str], dict[str, str] | None]] = []
    for uri in [u for u in BAD_URIS if isinstance(u, str) and u.strip() and "\x00" not in u]:
        cases.append(([a.replace("{uri}", uri) for a in command], None))
    for uri, options in BAD_STORES:
        if "\n" in json.dumps(options) or "\r" in "".join(options.values()):
            continue  # not something a shell passes as one argument
        args = [a.replace("{uri}", uri) for a in command]
        cases.append(([*args[:1], *option_args(options), *args[1:]], None))
    # The environment, as users set it: an endpoint without its scheme.
    env = {"AWS_ENDPOINT_URL": "localhost:9000", "AWS_REGION": "us-east-1"}
    cases.append(([a.replace("{uri}", "s3://bucket/lock") for a in command], env))
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda case: cli_fails_cleanly(*case), cases))


def test_run_refuses_an_expiry_that_readers_would_reject(tmp_path):
    done = cli("run", "--expire", "1e10", str(tmp_path / "lock"), "--", "true")
    assert done.returncode == 2, done.stderr
    assert "expire must be at most" in done.stderr
    assert not (tmp_path / "lock").exists()


def test_a_mistyped_storage_option_gets_the_key_meant():
    with pytest.raises(ValueError) as e:
        BlobLock("s3://bucket/lock", storage_options={**S3, "aws_secret_acces_key": "x"}).acquire(
            timeout=5
        )
    assert 'did you mean "aws_secret_access_key"' in str(e.value), str(e.value)
