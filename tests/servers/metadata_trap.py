"""A stand-in for the clouds' metadata services on loopback. A client with no credentials
asks the instance metadata service (AWS 169.254.169.254, Azure IMDS, GCE's
metadata.google.internal), which is off this machine and must never be a target: conftest
points every client's metadata endpoint here, and this server remembers what it was asked,
so that a test can tell a chain came here and not there. It closes each connection without
an answer, as an unreachable service fails: a 404 would tell azure-identity that a metadata
service is there, and it would retry for seconds."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class MetadataTrap:
    def __init__(self) -> None:
        self.asked: list[str] = []
        trap = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                flavor = self.headers.get("Metadata-Flavor", "")  # "Google" from GCE clients
                trap.asked.append(f"{self.command} {self.path} {flavor}".rstrip())
                self.close_connection = True  # no answer at all

            do_GET = do_PUT = do_POST = _answer

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The variables that send every metadata client here: botocore's and
        object_store's (AWS), azure-identity's and object_store's (Azure), google-auth's
        and object_store's (GCS)."""
        return {
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": self.url,
            "AWS_METADATA_ENDPOINT": self.url,
            "AZURE_POD_IDENTITY_AUTHORITY_HOST": self.url,
            "AZURE_MSI_ENDPOINT": f"{self.url}/metadata/identity/oauth2/token",
            "GCE_METADATA_HOST": f"127.0.0.1:{self.port}",
            "GCE_METADATA_IP": f"127.0.0.1:{self.port}",
        }
