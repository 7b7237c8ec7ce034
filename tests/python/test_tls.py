"""The cloud clients over HTTPS, as every cloud is reached: rustls with ring's cryptography
(src/store/cloud/tls.rs), the server's certificate checked against the roots the process
trusts. A TLS front (tests/proxies/tls_proxy.py) with a certificate from a test authority
(servers.loopback_certificate) stands before the tests' moto; the command line runs in a
process of its own, which reads the roots it trusts from ``SSL_CERT_FILE`` as users'
processes do."""

from __future__ import annotations

import json
import ssl
from urllib.parse import urlsplit

import pytest
from conftest import _s3_backend, cli, option_args
from servers import loopback_certificate
from tls_proxy import TlsProxy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def https_moto(moto_endpoint, tmp_path_factory):
    """moto behind TLS: the backend, its storage options through the front, and a file of
    the roots that trust its certificate."""
    roots, cert, key = loopback_certificate(tmp_path_factory.mktemp("tls"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    where = urlsplit(moto_endpoint)
    proxy = TlsProxy(where.hostname or "127.0.0.1", where.port or 80, tls=context)
    backend = _s3_backend(moto_endpoint)
    options = {**backend.storage_options, "aws_endpoint": proxy.url}
    options.pop("aws_allow_http", None)
    try:
        yield backend, options, roots
    finally:
        proxy.close()


def test_a_lock_is_taken_and_released_over_https(https_moto):
    backend, options, roots = https_moto
    uri = backend.uri()
    done = cli("run", *option_args(options), uri, "--", "true", env={"SSL_CERT_FILE": str(roots)})
    assert done.returncode == 0, done.stderr
    body = json.loads(backend.raw_get(uri) or b"null")
    assert body and body["released_at"], body  # taken, then released, through the front


def test_a_certificate_from_an_authority_not_trusted_is_refused(https_moto):
    backend, options, _ = https_moto
    uri = backend.uri()
    done = cli("status", *option_args(options), uri, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "certificate" in done.stderr.lower(), done.stderr
    assert "Traceback" not in done.stderr and "panicked" not in done.stderr, done.stderr
    assert backend.raw_get(uri) is None
