"""First contact on a default install (``pip install blob-lock``, no extras) on a laptop
where ``aws s3 ls`` works through ``~/.aws``: the default or named profile's static keys,
region and endpoint_url are used; a profile that needs botocore names the extra; no
credentials at all is a credentials error that says what was looked at, never the store's;
a boto3 Session brings its profile's endpoint and region; an ``http://`` endpoint is
allowed from every source, and refused before sending where plain HTTP is turned off.
Each script runs in a process of its own with botocore hidden, as if it were not
installed. Every request goes to loopback (moto, and the metadata trap of conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from blob_lock import BlobLock
from conftest import METADATA
from recorded_moto import NAMED_KEY, NAMED_SECRET, PROFILE_KEY, PROFILE_SECRET, lock_uri, write

BARE = """
import json, sys
sys.modules["botocore"] = None  # a default install: blob-lock[aws] not installed
sys.modules["boto3"] = None
import blob_lock
from blob_lock._credentials import credential_source
uri, options = sys.argv[1], json.loads(sys.argv[2])
out = {"source": None, "held": False, "error": None}
try:
    out["source"] = credential_source(uri, options)
    with blob_lock.BlobLock(uri, storage_options=options or None, timeout=5) as held:
        out["held"] = held.held
except Exception as e:
    out["error"] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""


def bare(uri: str, options: dict[str, str] | None = None) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", BARE, uri, json.dumps(options or {})],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def signed_region(recorder, name: str) -> str:
    """The region in the signature of the first request for ``name``."""
    line = next(json.loads(x) for x in recorder.file.read_text().splitlines() if name in x)
    return line["headers"]["Authorization"].split("Credential=", 1)[1].split("/")[2]


@pytest.fixture
def laptop(aws_home, monkeypatch):
    """No endpoint and no plain-HTTP setting in the environment: only the AWS files say
    where the store is."""
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.delenv("AWS_ALLOW_HTTP")
    return aws_home


def test_a_default_install_uses_the_default_profile_as_the_aws_cli_does(laptop, recorder):
    write(
        laptop / "credentials",
        f"[default]\naws_access_key_id = {PROFILE_KEY}\naws_secret_access_key = {PROFILE_SECRET}\n",
    )
    write(laptop / "config", f"[default]\nregion = eu-west-1\nendpoint_url = {recorder.endpoint}\n")
    uri, name = lock_uri(recorder)
    asked = len(METADATA.asked)
    got = bare(uri)
    assert got["error"] is None and got["held"], got
    assert recorder.keys(name) == {PROFILE_KEY}
    assert signed_region(recorder, name) == "eu-west-1"
    assert "AWS profile 'default'" in got["source"] and "static keys" in got["source"]
    assert len(METADATA.asked) == asked, "instance metadata was asked though a profile had keys"


def test_a_named_profile_with_its_s3_section_and_files_elsewhere(laptop, recorder, tmp_path,
                                                                 monkeypatch):  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(
        elsewhere / "config",
        f"""
        [default]
        region = us-east-1
        [profile prod]
        region = eu-west-2
        aws_access_key_id = {NAMED_KEY}
        aws_secret_access_key = {NAMED_SECRET}
        s3 =
          endpoint_url = {recorder.endpoint}
        [profile staging]
        services = local-s3
        aws_access_key_id = {PROFILE_KEY}
        aws_secret_access_key = {PROFILE_SECRET}
        [services local-s3]
        s3 =
          endpoint_url = {recorder.endpoint}
        """,
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(elsewhere / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(elsewhere / "missing"))
    monkeypatch.setenv("AWS_PROFILE", "prod")
    uri, name = lock_uri(recorder)
    got = bare(uri)
    assert got["error"] is None and got["held"], got
    assert recorder.keys(name) == {NAMED_KEY}
    assert signed_region(recorder, name) == "eu-west-2"
    # The storage option names a profile over AWS_PROFILE; its [services] section's endpoint.
    uri, name = lock_uri(recorder)
    got = bare(uri, {"aws_profile": "staging"})
    assert got["error"] is None and got["held"], got
    assert recorder.keys(name) == {PROFILE_KEY}
    got = bare(uri, {"aws_profile": "nope"})
    assert got["error"][0] == "CredentialsError"
    assert "profile 'nope' does not exist" in got["error"][1]


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ("sso_session = corp\nsso_account_id = 123456789012\nsso_role_name = R\n", "SSO"),
        ("role_arn = arn:aws:iam::123456789012:role/r\nsource_profile = default\n", "role_arn"),
        ("credential_process = /bin/false\n", "credential_process"),
    ],
)
def test_a_profile_that_needs_botocore_names_the_extra(laptop, recorder, settings, named):
    write(
        laptop / "config",
        f"[default]\nregion = us-east-1\n[profile p]\nendpoint_url = {recorder.endpoint}\n"
        + settings,
    )
    uri, name = lock_uri(recorder)
    asked = len(METADATA.asked)
    got = bare(uri, {"aws_profile": "p"})
    assert got["error"] is not None and got["error"][0] == "CredentialsError", got
    message = got["error"][1]
    assert named in message and "pip install 'blob-lock[aws]'" in message, message
    assert recorder.keys(name) == set() and len(METADATA.asked) == asked


def test_no_credentials_is_a_credentials_error_naming_what_was_tried(laptop, recorder):
    write(laptop / "config", f"[default]\nregion = us-east-1\nendpoint_url = {recorder.endpoint}\n")
    uri, name = lock_uri(recorder)
    asked = len(METADATA.asked)
    got = bare(uri)
    assert got["error"] is not None and got["error"][0] == "CredentialsError", got
    message = got["error"][1]
    for part in ("no S3 credentials found", "AWS_ACCESS_KEY_ID", "has no keys",
                 f"instance metadata service at {METADATA.url}", "Nothing was sent to the store",
                 "aws configure"):  # fmt: skip
        assert part in message, message
    assert "has not answered" not in message
    assert len(METADATA.asked) > asked, "the chain ends at instance metadata (the trap)"
    assert recorder.keys(name) == set()


def test_a_boto3_session_brings_its_profiles_endpoint_and_region(laptop, recorder):
    import boto3

    write(
        laptop / "credentials",
        f"[prod]\naws_access_key_id = {NAMED_KEY}\naws_secret_access_key = {NAMED_SECRET}\n",
    )
    write(
        laptop / "config",
        f"[profile prod]\nregion = eu-west-2\nendpoint_url = {recorder.endpoint}\n",
    )
    # Guard: anything not for loopback goes to a closed port, never to AWS.
    guard = {"aws_proxy_url": "http://127.0.0.1:9", "aws_proxy_excludes": "127.0.0.1"}
    uri, name = lock_uri(recorder)
    with BlobLock(uri, storage_options=guard, credential_provider=boto3.Session(
            profile_name="prod")) as held:  # fmt: skip
        assert held.held
    assert recorder.keys(name) == {NAMED_KEY}
    assert signed_region(recorder, name) == "eu-west-2"
    # What the caller gives wins over the session's.
    uri, name = lock_uri(recorder)
    options = {**guard, "aws_endpoint": recorder.endpoint, "aws_region": "ap-south-1"}
    with BlobLock(uri, storage_options=options, credential_provider=boto3.Session(
            profile_name="prod")):  # fmt: skip
        pass
    assert signed_region(recorder, name) == "ap-south-1"


def test_plain_http_is_one_rule_for_every_source(aws_home, recorder, monkeypatch):
    monkeypatch.delenv("AWS_ALLOW_HTTP")  # AWS_ENDPOINT_URL is moto's, over http://
    write(
        aws_home / "credentials",
        f"[default]\naws_access_key_id = {PROFILE_KEY}\naws_secret_access_key = {PROFILE_SECRET}\n",
    )
    uri, name = lock_uri(recorder)
    with BlobLock(uri) as held:
        assert held.held
    assert recorder.keys(name) == {PROFILE_KEY}
    monkeypatch.setenv("AWS_ALLOW_HTTP", "false")
    uri, name = lock_uri(recorder)
    with pytest.raises(ValueError) as refused:
        BlobLock(uri).acquire(timeout=5)
    message = str(refused.value)
    for part in (recorder.endpoint, "plain HTTP", "AWS_ALLOW_HTTP", "https://"):
        assert part in message, message
    assert recorder.keys(name) == set()
    with pytest.raises(ValueError, match="aws_allow_http"):
        BlobLock(uri, storage_options={"aws_allow_http": "false"}).acquire(timeout=5)
