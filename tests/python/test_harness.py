"""The test run's own promises: its output shows what the tests report and nothing logged
outside them, it writes nothing into HOME, and its longest tests start first."""

from __future__ import annotations

import logging
import os
import sys


def test_no_console_handler_on_the_root_logger():
    """Records logged after their test ended (a loss reported late, azure-identity's and
    botocore's credential chains on a background thread) reach only pytest's handlers,
    which drop them between tests. mops's pytest plugin, loaded before conftest.py, once
    put a console handler there (thds.core's logging set-up), which printed them into the
    run's output, and a log file into HOME for every pytest process."""
    root = logging.getLogger()
    # (pytest's own handlers are StreamHandler's subclasses, writing into its capture.)
    consoles = [h for h in root.handlers if type(h) is logging.StreamHandler]
    assert consoles == [], root.handlers
    into_home = [
        h.baseFilename
        for h in root.handlers
        if isinstance(h, logging.FileHandler)
        and h.baseFilename.startswith(os.path.expanduser("~") + os.sep)
    ]
    assert into_home == [], into_home
    assert "thds.mops.testing.plugin" not in sys.modules


class _Cache:
    """pytest's cache as run_order.py uses it: get and set of JSON values."""

    def __init__(self, values: dict | None = None) -> None:
        self.values = dict(values or {})

    def get(self, key, default):
        return self.values.get(key, default)

    def set(self, key, value) -> None:
        self.values[key] = value


class _Item:
    def __init__(self, nodeid: str, slow: bool = False) -> None:
        self.nodeid, self.slow = nodeid, slow

    def get_closest_marker(self, name: str):
        return object() if name == "slow" and self.slow else None


def test_the_light_tests_start_longest_first_and_the_run_records_what_each_took(monkeypatch):
    """run_order.py: known tests by their last duration, longest first; unknown ones by a
    guess (slow-marked before the rest), so that no long test starts near the end; the
    main process merges what this run took into the cache, keeping tests it did not run."""
    from types import SimpleNamespace

    from run_order import KEY, RunOrder

    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    cache = _Cache({KEY: {"a": 0.5, "b": 30.0, "gone": 2.0}})
    order = RunOrder(SimpleNamespace(cache=cache))
    items = [_Item("a"), _Item("new_short"), _Item("new_slow", slow=True), _Item("b")]
    order.pytest_collection_modifyitems(items)
    assert [i.nodeid for i in items] == ["b", "new_slow", "a", "new_short"]

    for nodeid, seconds in [("a", 1.0), ("a", 3.0), ("new_slow", 12.0)]:  # phases add up
        order.pytest_runtest_logreport(SimpleNamespace(nodeid=nodeid, duration=seconds))
    order.pytest_sessionfinish()
    assert cache.values[KEY] == {"a": 4.0, "b": 30.0, "gone": 2.0, "new_slow": 12.0}

    # A worker's reports are its own part of the run: only the main process writes.
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    worker = RunOrder(SimpleNamespace(cache=cache))
    worker.pytest_runtest_logreport(SimpleNamespace(nodeid="a", duration=99.0))
    worker.pytest_sessionfinish()
    assert cache.values[KEY]["a"] == 4.0
