"""moto's S3 server recording which keys signed each request, and the keys the credential
tests (test_credentials.py, test_first_contact.py) write into a laptop's AWS files;
conftest.py makes the fixtures (``recorder``, ``aws_home``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from servers import ROOT, boto3_s3, listening

PROFILE_KEY = "AKIAPROFILEKEY000001"
PROFILE_SECRET = "profile-secret-do-not-print-0001"
NAMED_KEY = "AKIANAMEDPROFILE0002"
NAMED_SECRET = "named-secret-do-not-print-0002"


class Recorder:
    """moto's server recording every request (MOTO_ENABLE_RECORDING), so that a test can
    tell which access key signed the S3 requests."""

    def __init__(self, tmp: Path) -> None:
        self.file = tmp / "requests.jsonl"
        env = dict(os.environ, MOTO_ENABLE_RECORDING="True", MOTO_RECORDER_FILEPATH=str(self.file))
        self.log = open(tmp / "moto.log", "w")
        self.proc, port = listening(
            lambda port: [sys.executable, str(ROOT / "tests" / "servers" / "moto_server.py"), "-H",
                          "127.0.0.1", "-p", str(port)],
            "moto_server", stdout=self.log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        self.endpoint = f"http://127.0.0.1:{port}"
        self.bucket = "creds-bucket"
        boto3_s3(self.endpoint).create_bucket(Bucket=self.bucket)

    def keys(self, path_part: str) -> set[str]:
        """The access keys that signed requests whose URL contains ``path_part``."""
        found = set()
        if not self.file.exists():
            return found
        for line in self.file.read_text().splitlines():
            r = json.loads(line)
            url = r.get("url", "") or r.get("path", "")
            auth = (r.get("headers") or {}).get("Authorization", "")
            if path_part in url and "Credential=" in auth:
                found.add(auth.split("Credential=", 1)[1].split("/", 1)[0])
        return found

    def requests(self, path_part: str) -> list[dict]:
        """The recorded requests whose URL contains ``path_part``: method, url, headers."""
        if not self.file.exists():
            return []
        found = []
        for line in self.file.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a line moto is still writing
            url = r.get("url", "") or r.get("path", "")
            if path_part in url:
                headers = r.get("headers") or {}
                found.append({"method": r.get("method"), "url": url, "headers": headers})
        return found


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def lock_uri(recorder: Recorder) -> tuple[str, str]:
    name = f"creds/{uuid.uuid4().hex}"
    return f"s3://{recorder.bucket}/{name}", name
