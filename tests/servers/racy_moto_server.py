"""moto's S3 server as PyPI ships it (conditional PutObject checked, then written in a second
step), with a pause between the two steps, so that racing conditional writes both land in
every race instead of now and then.

The pause changes how often plain moto's race is met, not what it is: a store that checks a
condition and writes later. `blob-lock doctor --race` must find it unsafe, and the test that
says so must not depend on luck (with no pause, 64 racers met a double within 4 rounds once,
and in none of 150 another time).

Run as moto's own server: ``python tests/servers/racy_moto_server.py -H 127.0.0.1 -p PORT``.
"""

from __future__ import annotations

import time

from moto.s3.models import S3Backend
from moto.server import main

# Long beside a loopback request (about a millisecond), short beside the test's timeouts.
PAUSE_S = 0.2
_put_object = S3Backend.put_object


def _paused_put_object(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    time.sleep(PAUSE_S)
    return _put_object(self, *args, **kwargs)


S3Backend.put_object = _paused_put_object  # type: ignore[method-assign]

if __name__ == "__main__":
    main()
