"""How long a call may wait: errors that waiting cannot fix fail at once, a store that has
never answered is not waited for, no wait overshoots its timeout by more than one request
timeout, and a signal ends a wait at once."""

from __future__ import annotations

import signal
import subprocess
import time
from urllib.parse import urlsplit

import pytest
from blob_lock import BlobLock, StoreError
from conftest import BLOB_LOCK, _s3_backend, cli
from fault_proxy import FaultProxy


@pytest.mark.parametrize(
    "where",
    ["name too long", "a file in the way", "a folder it may not make", "a folder under /proc"],
)
def test_local_errors_that_waiting_cannot_fix_fail_at_once(tmp_path, where):
    (tmp_path / "file").write_text("not a folder")
    path = {
        "name too long": tmp_path / ("n" * 300) / "lock",
        "a file in the way": tmp_path / "file" / "lock",
        "a folder it may not make": f"/sys/blob-lock-{tmp_path.name}/lock",
        "a folder under /proc": f"/proc/blob-lock-{tmp_path.name}/lock",
    }[where]
    began = time.monotonic()
    with pytest.raises(StoreError) as info:
        BlobLock(path).acquire(timeout=None)  # for ever, were the error retried
    assert time.monotonic() - began < 10
    assert info.value.transient is False
    assert str(path).split("/")[-2][:20] in str(info.value)


def test_the_command_line_reports_an_unreachable_store_as_a_store_error():
    options = [
        "-oaws_endpoint=http://127.0.0.1:1",
        "-oaws_allow_http=true",
        "-oaws_region=us-east-1",
        "-oaws_access_key_id=testing",
        "-oaws_secret_access_key=testing",
    ]
    for command in (["run", "s3://bucket/lock", "--", "true"], ["wait", "s3://bucket/lock"]):
        done = cli(*command[:1], *options, *command[1:], timeout=60)
        assert done.returncode == 1, done.stderr  # not 75, "held by unknown"
        assert "has not answered" in done.stderr and "Traceback" not in done.stderr


@pytest.fixture
def slow_store(moto_endpoint):
    """A store reached through a proxy that can delay every chunk each way; it has answered
    this process before the delay starts (a store that never answered fails at once)."""
    backend = _s3_backend(moto_endpoint)
    where = urlsplit(moto_endpoint)
    proxy = FaultProxy(where.hostname, where.port)
    options = {**backend.storage_options, "aws_endpoint": proxy.url}
    try:
        yield backend, proxy, options
    finally:
        proxy.close()


@pytest.mark.parametrize("protocol", ["cas", "lww"])
def test_no_wait_overshoots_its_timeout_by_more_than_a_request_timeout(slow_store, protocol):
    backend, proxy, options = slow_store
    expire = 6.0  # a heartbeat of 2 s, so one request may take 1 s
    uri = backend.uri()
    with BlobLock(uri, expire=expire, protocol=protocol, storage_options=options):
        pass  # the store answered; the lww settle wait grows with the round trips it sees
    proxy.delay(0.3)  # each request now takes 0.6 s or more, each attempt several of them
    lock = BlobLock(uri, expire=expire, protocol=protocol, storage_options=options)
    for timeout in (0.5, 1.5):
        began = time.monotonic()
        try:
            got: object = lock.acquire(timeout=timeout)
        except StoreError as e:
            got = e
        waited = time.monotonic() - began
        assert waited < timeout + 1.0 + 0.5, f"{protocol}: {waited:.2f}s for {timeout}s ({got})"
        if got is True:
            lock.release()
    proxy.heal()


def test_a_signal_ends_a_wait_on_an_unreachable_store_before_its_request_does(
    moto_endpoint, tmp_path
):
    """SIGINT ends the wait at once, not when the request in flight gives up: at expire
    180 a request is given 30 s (half a heartbeat of 60 s, the most any request is given),
    so a process that heeded the signal only then would exit that long after starting it."""
    request_timeout = 30.0
    backend = _s3_backend(moto_endpoint)
    where = urlsplit(moto_endpoint)
    proxy = FaultProxy(where.hostname, where.port)
    proxy.blackhole()  # connections are taken, and nothing ever answers
    options = [f"-o{k}={v}" for k, v in backend.storage_options.items() if k != "aws_endpoint"]
    try:
        proc = subprocess.Popen(
            [
                BLOB_LOCK,
                "run",
                f"-oaws_endpoint={proxy.url}",
                *options,
                "--expire",
                "180",
                backend.uri(),
                "--",
                "true",
            ],
            stderr=subprocess.PIPE,
            text=True,
        )
        # Its first request is in flight once the proxy has taken its connection.
        deadline = time.monotonic() + 60
        while proxy.accepted == 0:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "blob-lock run never reached the store"
            time.sleep(0.01)
        signalled = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(request_timeout * 2)
        took = time.monotonic() - signalled
    finally:
        proxy.close()
    assert code == 128 + signal.SIGINT, proc.stderr.read() if proc.stderr else ""
    # Its request went out at most 10 ms before the signal and would give up request_timeout
    # after it left: a process that heeded the signal only then would exit about
    # request_timeout after the signal, one that heeds it at once within half of it however
    # slow the machine (a liveness bound for the exit, not a measure of it).
    assert took < request_timeout / 2, f"{took:.1f}s: not before its request timed out"
