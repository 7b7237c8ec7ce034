"""A GCS XML-API server for tests, in memory: no emulator on PyPI or npm serves object_store's
GCS client with generation preconditions (see shared TESTING.md), so this one does just
that: PUT with ``x-goog-if-generation-match`` (0: create only; N: update only generation N),
GET and HEAD with ETag, ``x-goog-generation`` and Last-Modified, DELETE (conditional on
``x-goog-if-generation-match`` as GCS's is), and listing (the XML API's ``list-type=2``, in
pages of ``max-keys``, at most 1000, with continuation tokens). Signatures are not checked;
the service-account key it hands out has a real private key, made for the session, so that
clients can sign URLs (prune's conditional delete)."""

from __future__ import annotations

import hashlib
import threading
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape


class _Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.buckets: set[str] = set()
        self.objects: dict[tuple[str, str], tuple[bytes, int, float]] = {}
        self.generation = 0
        self.authorizations: list[str | None] = []  # each request's Authorization header
        self.tokens = 0  # access tokens handed out by POST /token


class _Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True  # else every request stalls on delayed ACKs
    protocol_version = "HTTP/1.1"
    store: _Store

    def log_message(self, *args) -> None:  # quiet
        pass

    def _target(self) -> tuple[str, str]:
        with self.store.lock:
            self.store.authorizations.append(self.headers.get("Authorization"))
        path = unquote(urlsplit(self.path).path).lstrip("/")
        bucket, _, key = path.partition("/")
        return bucket, key

    def _reply(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: int, code: str) -> None:
        self._reply(status, f"<Error><Code>{code}</Code></Error>".encode())

    def _meta(self, data: bytes, gen: int, mtime: float) -> dict:
        return {
            "ETag": f'"{hashlib.md5(data + str(gen).encode()).hexdigest()}"',
            "x-goog-generation": str(gen),
            "Last-Modified": formatdate(mtime, usegmt=True),
        }

    def do_PUT(self) -> None:
        bucket, key = self._target()
        data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        match = self.headers.get("x-goog-if-generation-match")
        s = self.store
        with s.lock:
            if bucket not in s.buckets:
                return self._error(404, "NoSuchBucket")
            current = s.objects.get((bucket, key))
            if match is not None:
                want = int(match)
                have = current[1] if current else 0
                if want != have:
                    return self._error(412, "PreconditionFailed")
            s.generation += 1
            s.objects[(bucket, key)] = (data, s.generation, time.time())
            self._reply(200, b"", self._meta(data, s.generation, time.time()))

    def _list(self, bucket: str, query: dict[str, list[str]]) -> None:
        prefix = query.get("prefix", [""])[0]
        after = query.get("continuation-token", query.get("start-after", [""]))[0]
        most = min(int(query.get("max-keys", ["1000"])[0]), 1000)
        with self.store.lock:
            if bucket not in self.store.buckets:
                return self._error(404, "NoSuchBucket")
            keys = sorted(
                (k, v)
                for (b, k), v in self.store.objects.items()
                if b == bucket and k.startswith(prefix) and k > after
            )
        page, more = keys[:most], len(keys) > most
        items = "".join(
            f"<Contents><Key>{escape(k)}</Key><Size>{len(data)}</Size>"
            f"<LastModified>{time.strftime('%Y-%m-%dT%H:%M:%S.000Z', time.gmtime(mtime))}"
            f"</LastModified></Contents>"
            for k, (data, _gen, mtime) in page
        )
        # (An empty listing has no last key: a prefix with nothing under it yet.)
        token = (
            f"<NextContinuationToken>{escape(page[-1][0])}</NextContinuationToken>" if more else ""
        )
        body = f"<ListBucketResult>{items}{token}</ListBucketResult>"
        self._reply(200, body.encode(), {"Content-Type": "application/xml"})

    def do_GET(self) -> None:
        bucket, key = self._target()
        query = parse_qs(urlsplit(self.path).query)
        if not key and "list-type" in query:
            return self._list(bucket, query)
        s = self.store
        with s.lock:
            if bucket not in s.buckets:
                return self._error(404, "NoSuchBucket")
            obj = s.objects.get((bucket, key))
        if obj is None:
            return self._error(404, "NoSuchKey")
        data, gen, mtime = obj
        self._reply(200, data, self._meta(data, gen, mtime))

    do_HEAD = do_GET

    def do_POST(self) -> None:
        """An OAuth token endpoint at /token (a fake of Google's, for authorized-user and
        service-account credentials): a new bearer token at each call, valid for an hour."""
        import json

        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if urlsplit(self.path).path != "/token":
            return self._error(404, "NoSuchKey")
        with self.store.lock:
            self.store.tokens += 1
            token = f"ya29.fake-{self.store.tokens}"
        body = {"access_token": token, "expires_in": 3600, "token_type": "Bearer"}
        self._reply(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def do_DELETE(self) -> None:
        bucket, key = self._target()
        match = self.headers.get("x-goog-if-generation-match")
        with self.store.lock:
            current = self.store.objects.get((bucket, key))
            if match is not None and (current is None or current[1] != int(match)):
                return self._error(412, "PreconditionFailed")
            self.store.objects.pop((bucket, key), None)
        self._reply(204)


_KEY: list[str] = []


def _signing_key() -> str:
    """A private key in PEM, made once per process: the fake checks no signature."""
    if not _KEY:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        _KEY.append(pem.decode())
    return _KEY[0]


class FakeGcs:
    """Serves on a free loopback port in a thread until ``close()``."""

    def __init__(self, port: int = 0) -> None:
        """``port``: 0 for a free one (a restart on the same port: tests/soak/gcs_store.py)."""
        store = _Store()
        handler = type("Handler", (_Handler,), {"store": store})
        self.store = store
        self.server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def create_bucket(self, name: str) -> None:
        with self.store.lock:
            self.store.buckets.add(name)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        with self.store.lock:
            self.store.generation += 1
            self.store.objects[(bucket, key)] = (data, self.store.generation, time.time())

    def get(self, bucket: str, key: str) -> bytes | None:
        with self.store.lock:
            obj = self.store.objects.get((bucket, key))
        return obj[0] if obj else None

    def delete(self, bucket: str, key: str) -> None:
        with self.store.lock:
            self.store.objects.pop((bucket, key), None)

    def storage_options(self) -> dict[str, str]:
        import json

        key = {
            "gcs_base_url": self.url,
            "disable_oauth": True,
            "client_email": "test@example.invalid",
            "private_key": _signing_key(),
            "private_key_id": "fake",
        }
        return {"google_service_account_key": json.dumps(key), "allow_http": "true"}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
