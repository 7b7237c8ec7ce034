"""The order in which the tests start: the longest first, by what each took in the last run
on this checkout (pytest's cache, .pytest_cache), so that under pytest-xdist (`--dist load
--maxschedchunk 2`: one queue, each worker taking the next test as it frees) no long test
starts near the end and keeps the run waiting for it alone.

A test the cache does not know (a fresh clone, a new test) counts as a guess: those over
HTTP or many processes (marked slow) as a few seconds, the rest as short. Registered by
conftest.py; pytest-slowest-first and pytest-slow-first do the same, but the first
reassigns xdist groups (the heavy tests' lanes use them) and neither is kept up."""

from __future__ import annotations

import os

import pytest

KEY = "blob_lock/durations"

# Seconds: what an unknown test is taken to last.
GUESS_SLOW = 5.0
GUESS_OTHER = 0.1


class RunOrder:
    def __init__(self, config: pytest.Config) -> None:
        self.cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
        self.took: dict[str, float] = {}

    def _known(self) -> dict[str, float]:
        if self.cache is None:
            return {}
        known = self.cache.get(KEY, {})
        return known if isinstance(known, dict) else {}

    # Last, after conftest.py has marked the slow tests. Every xdist worker sorts alike: they
    # read the same cache, written only when the run before them ended.
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        known = self._known()

        def took(item: pytest.Item) -> float:
            seconds = known.get(item.nodeid)
            if isinstance(seconds, (int, float)):
                return float(seconds)
            return GUESS_SLOW if item.get_closest_marker("slow") else GUESS_OTHER

        items.sort(key=took, reverse=True)  # stable: ties keep pytest's order

    # In the run's main process, which sees every worker's reports; a worker's own run
    # ends before the main one's and would write a part.
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not os.environ.get("PYTEST_XDIST_WORKER"):
            self.took[report.nodeid] = self.took.get(report.nodeid, 0.0) + report.duration

    def pytest_sessionfinish(self) -> None:
        if os.environ.get("PYTEST_XDIST_WORKER") or self.cache is None or not self.took:
            return
        known = self._known()
        known.update({nodeid: round(seconds, 2) for nodeid, seconds in self.took.items()})
        self.cache.set(KEY, known)
