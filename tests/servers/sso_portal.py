"""A stand-in for the AWS SSO portal's GetRoleCredentials on loopback (moto does not serve
it): botocore reaches it through AWS_ENDPOINT_URL_SSO with the bearer token that `aws sso
login` cached, and gets role keys for an hour."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROLE_KEY = "ASIASSOROLEKEY000001"


class SsoPortal:
    """A stand-in for the AWS SSO portal (GetRoleCredentials) on loopback: moto does not
    serve it. Hands out role keys for the bearer token that `aws sso login` cached."""

    def __init__(self, token: str) -> None:
        portal = self
        self.calls: list[str] = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                portal.calls.append(self.path)
                if self.headers.get("x-amz-sso_bearer_token") != token:
                    body, status = b'{"message": "Session token not found or invalid"}', 401
                else:
                    expires = int((time.time() + 3600) * 1000)
                    keys = {
                        "accessKeyId": ROLE_KEY,
                        "secretAccessKey": "sso-secret",
                        "sessionToken": "sso-session",
                        "expiration": expires,
                    }
                    body = json.dumps({"roleCredentials": keys}).encode()
                    status = 200
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
