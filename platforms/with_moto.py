"""Runs a command with moto's S3 server up on a free loopback port of this machine, its
address in ``BLOB_LOCK_TEST_MOTO`` (where tests/python/conftest.py's ``moto_endpoint`` takes
it): the tests of another platform, run under emulation (platforms/test_arm64.sh) or by
another interpreter (platforms/test_musl.sh), reach a moto that runs at native speed.

    python platforms/with_moto.py COMMAND [ARG...]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "servers"))
from servers import running_moto


def main(command: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="blob-lock-moto-") as work:
        with running_moto(Path(work)) as endpoint:
            env = {**os.environ, "BLOB_LOCK_TEST_MOTO": endpoint}
            return subprocess.run(command, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
