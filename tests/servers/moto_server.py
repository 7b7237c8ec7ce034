"""moto's S3 server with atomic conditional writes, as S3 has them.

moto 5.2.5 checks PutObject's If-Match / If-None-Match and then stores the object in a
second step, on a threaded server: two requests racing on the same ETag can both succeed.
Seen here: 16 clients racing an If-Match on one ETag, 100 rounds, one round with two
winners; and a lost increment in the counter test. S3 itself never allows that, and the
lock relies on it, so the tests run moto's server with every PutObject under one lock.

Run as moto's own server: ``python tests/servers/moto_server.py -H 127.0.0.1 -p PORT``.
"""

from __future__ import annotations

import threading

from moto.core.common_models import BaseModel
from moto.s3.responses import S3Response
from moto.server import main

_puts = threading.Lock()
_put_object = S3Response.put_object


def _atomic_put_object(self: S3Response):  # type: ignore[no-untyped-def]
    with _puts:
        return _put_object(self)


S3Response.put_object = _atomic_put_object  # type: ignore[method-assign]


def _untracked_new(cls, *args, **kwargs):  # type: ignore[no-untyped-def]
    return object.__new__(cls)


# moto keeps every model it makes (each object ever written, with its buffer and ACL) in
# BaseModel's instances_tracked, for its dashboard, and never lets one go: a long run on one
# lock grew the server by 3.4 KB a write. Nothing here reads the dashboard.
BaseModel.__new__ = staticmethod(_untracked_new)  # type: ignore[method-assign]

if __name__ == "__main__":
    main()
