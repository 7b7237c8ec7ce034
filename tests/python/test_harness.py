"""The test run's own promises: its output shows what the tests report and nothing logged
outside them, and it writes nothing into HOME."""

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
