"""A pytest plugin (``-p selection``) that keeps, of the tests collected, those a platform
run checks: on local files and on S3 (the moto of platforms/with_moto.py), and not the
heavy ones (thousands of locks: they measure the machine, and under emulation it is slow).
Left out, said in pytest's count of deselected tests: memory:// (the same Rust on every
platform), Azurite, the GCS fake and s3rver (servers that only this machine's npm and Python
run), and the moto servers a test starts itself; and the tests that send a signal to a
blob-lock process. qemu-user keeps each thread's signal mask in software: the host kernel
hands a signal to any thread, and where that thread blocks it, as blob-lock's own threads
do (src/thread_signals.rs), qemu leaves it pending there instead of giving it to a thread
that takes it. Such a signal was lost in one run of six (2026-11-28); on x86_64 these tests
run in `make test`."""

from __future__ import annotations

import pytest

LEFT_OUT_STORES = {"memory", "az", "gs"}
LEFT_OUT_FIXTURES = {
    *("azurite_url", "own_azurite", "fake_gcs", "s3rver"),
    *("plain_moto", "racy_moto", "recorder", "aws_home"),
}

SIGNALLED = {
    "test_ctrl_c_ends_a_wait_that_logs",
    "test_run_passes_signals_on_then_releases",
    "test_a_signal_while_waiting_for_the_lock_ends_the_wait",
}


def _left_out(item: pytest.Item) -> bool:
    params = getattr(getattr(item, "callspec", None), "params", {})
    stores = {params.get(name) for name in ("backend", "shared_backend", "proxied")}
    return bool(
        LEFT_OUT_STORES & stores
        or LEFT_OUT_FIXTURES & set(getattr(item, "fixturenames", ()))
        or item.get_closest_marker("heavy")
        or getattr(item, "originalname", item.name) in SIGNALLED
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    dropped = [item for item in items if _left_out(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not _left_out(item)]
