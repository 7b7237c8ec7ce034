"""AWS credentials where users keep them (Azure and GCS: test_credentials_azure.py and
test_credentials_gcs.py): profiles (default, named, in files elsewhere),
assumed roles through moto's STS, credential_process with keys that expire while a lock is
held, the profile's region and endpoint_url, credential objects from Python, the CLI with
only a profile, and the errors when there are none. Every request goes to loopback: the
metadata endpoints point at a closed port, and moto records which keys signed what."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone

import blob_lock
import pytest
from blob_lock import BlobLock, CredentialsError, keep_alive
from conftest import METADATA
from recorded_moto import (
    NAMED_KEY,
    NAMED_SECRET,
    PROFILE_KEY,
    PROFILE_SECRET,
    lock_uri,
    write,
)
from sso_portal import ROLE_KEY, SsoPortal

# Left out of `make test-fast` (-m "not slow"): credentials through moto over HTTP
pytestmark = pytest.mark.slow


def test_the_default_profile_locks_with_no_options(aws_home, recorder):
    write(
        aws_home / "credentials",
        f"""
        [default]
        aws_access_key_id = {PROFILE_KEY}
        aws_secret_access_key = {PROFILE_SECRET}
        """,
    )
    write(aws_home / "config", "[default]\nregion = us-east-1\n")
    uri, name = lock_uri(recorder)
    with BlobLock(uri) as held:
        assert held.held
    assert recorder.keys(name) == {PROFILE_KEY}


def test_a_named_profile_from_files_elsewhere(aws_home, recorder, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write(
        elsewhere / "creds",
        f"""
        [default]
        aws_access_key_id = {PROFILE_KEY}
        aws_secret_access_key = {PROFILE_SECRET}
        [named]
        aws_access_key_id = {NAMED_KEY}
        aws_secret_access_key = {NAMED_SECRET}
        """,
    )
    write(
        elsewhere / "config", "[default]\nregion = us-east-1\n[profile named]\nregion = us-east-1\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(elsewhere / "creds"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(elsewhere / "config"))
    monkeypatch.setenv("AWS_PROFILE", "named")
    uri, name = lock_uri(recorder)
    with BlobLock(uri):
        pass
    assert recorder.keys(name) == {NAMED_KEY}
    # A profile named in the storage options wins over AWS_PROFILE.
    uri, name = lock_uri(recorder)
    with BlobLock(uri, storage_options={"aws_profile": "default"}):
        pass
    assert recorder.keys(name) == {PROFILE_KEY}


def test_an_assumed_role_signs_with_the_roles_keys(aws_home, recorder):
    write(
        aws_home / "credentials",
        f"""
        [base]
        aws_access_key_id = {PROFILE_KEY}
        aws_secret_access_key = {PROFILE_SECRET}
        """,
    )
    write(
        aws_home / "config",
        """
        [profile role]
        role_arn = arn:aws:iam::123456789012:role/locker
        source_profile = base
        region = us-east-1
        """,
    )
    uri, name = lock_uri(recorder)
    with BlobLock(uri, storage_options={"aws_profile": "role"}):
        pass
    keys = recorder.keys(name)
    assert keys and all(k.startswith("ASIA") for k in keys), keys
    assert PROFILE_KEY not in keys


def process_keys_of_writes(recorder, name: str) -> set[int]:
    """The numbers of the credential_process keys (AKIAPROCESS<n>) that signed PUTs of the
    lockfile at ``name``, as moto recorded them so far."""
    found = set()
    for line in recorder.file.read_text().splitlines() if recorder.file.exists() else []:
        try:
            r = json.loads(line)
        except ValueError:  # a line moto is writing now
            continue
        auth = (r.get("headers") or {}).get("Authorization", "")
        key = auth.split("Credential=", 1)[-1].split("/", 1)[0]
        if r.get("method") == "PUT" and name in r.get("url", "") and key.startswith("AKIAPROCESS"):
            found.add(int(key[len("AKIAPROCESS") :]))
    return found


def test_credential_process_keys_expire_while_a_lock_is_held(aws_home, recorder, tmp_path):
    counter = tmp_path / "count"
    script = write(
        tmp_path / "creds.py",
        f"""
        import json, datetime, pathlib
        p = pathlib.Path({str(counter)!r})
        n = int(p.read_text()) + 1 if p.exists() else 1
        p.write_text(str(n))
        exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=3)
        print(json.dumps({{"Version": 1, "AccessKeyId": f"AKIAPROCESS{{n:09d}}",
            "SecretAccessKey": "process-secret", "SessionToken": "process-token",
            "Expiration": exp.isoformat()}}))
        """,
    )
    write(
        aws_home / "config",
        f"""
        [default]
        region = us-east-1
        credential_process = {sys.executable} {script}
        """,
    )
    uri, name = lock_uri(recorder)
    with BlobLock(uri, expire=2) as held:
        # Several lifetimes of the keys: every renewal must still be signed with live keys.
        # Held until a renewal (a PUT of the lockfile) is signed with the fourth keys or later.
        deadline = time.monotonic() + 60
        while max(process_keys_of_writes(recorder, name), default=0) < 4:
            assert time.monotonic() < deadline, (
                f"no renewal signed with the fourth keys in 60 s (keys fetched: "
                f"{counter.read_text() if counter.exists() else 0})"
            )
            time.sleep(0.05)
        assert held.held and not held.lost
    keys = recorder.keys(name)
    assert len(keys) >= 3, keys  # refetched before each expired
    assert all(k.startswith("AKIAPROCESS") for k in keys)


def test_region_and_endpoint_url_from_the_profile(aws_home, recorder, monkeypatch):
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    write(
        aws_home / "credentials",
        f"[default]\naws_access_key_id = {PROFILE_KEY}\naws_secret_access_key = {PROFILE_SECRET}\n",
    )
    write(
        aws_home / "config", f"[default]\nregion = eu-west-1\nendpoint_url = {recorder.endpoint}\n"
    )
    uri, name = lock_uri(recorder)
    with BlobLock(uri):
        pass
    assert recorder.keys(name) == {PROFILE_KEY}
    line = next(json.loads(x) for x in recorder.file.read_text().splitlines() if name in x)
    assert "/eu-west-1/s3/" in line["headers"]["Authorization"]


def test_no_credentials_says_where_it_looked_and_what_to_do(aws_home, recorder):
    uri, _ = lock_uri(recorder)
    asked = len(METADATA.asked)
    began = time.monotonic()
    with pytest.raises(CredentialsError) as e:
        BlobLock(uri).acquire(timeout=5)
    assert time.monotonic() - began < 30
    assert len(METADATA.asked) > asked, "instance metadata was asked at the loopback trap"
    msg = str(e.value)
    for part in ("AWS", "AWS_ACCESS_KEY_ID", "'default'", "aws configure", "aws sso login",
                 "instance metadata"):  # fmt: skip
        assert part in msg, msg
    assert "has not answered" not in msg
    with pytest.raises(CredentialsError, match="profile 'nope' does not exist"):
        BlobLock(uri, storage_options={"aws_profile": "nope"}).acquire(timeout=5)


def test_an_expired_sso_token_says_log_in_again(aws_home, recorder):
    write(
        aws_home / "config",
        """
        [profile sso]
        sso_session = corp
        sso_account_id = 123456789012
        sso_role_name = Locker
        region = us-east-1
        [sso-session corp]
        sso_start_url = https://corp.awsapps.com/start
        sso_region = us-east-1
        """,
    )
    uri, _ = lock_uri(recorder)
    with pytest.raises(CredentialsError, match=r"aws sso login --profile sso"):
        BlobLock(uri, storage_options={"aws_profile": "sso"}).acquire(timeout=5)


def test_credential_providers_from_python(aws_home, recorder):
    import boto3

    calls = []

    def provider():
        calls.append(1)
        return {
            "access_key_id": NAMED_KEY,
            "secret_access_key": NAMED_SECRET,
            "token": None,
            "expires_at": datetime.now(timezone.utc) + timedelta(hours=1),
        }

    async def async_provider():
        return {"access_key_id": PROFILE_KEY, "secret_access_key": PROFILE_SECRET,
                "expires_at": None}  # fmt: skip

    uri, name = lock_uri(recorder)
    with BlobLock(uri, credential_provider=provider):
        pass
    assert recorder.keys(name) == {NAMED_KEY} and calls
    uri, name = lock_uri(recorder)
    with BlobLock(uri, credential_provider=async_provider) as held:
        with keep_alive(uri, held.owner, credential_provider=async_provider):
            pass
    assert recorder.keys(name) == {PROFILE_KEY}
    session = boto3.Session(
        aws_access_key_id=NAMED_KEY, aws_secret_access_key=NAMED_SECRET, region_name="us-east-1"
    )
    uri, name = lock_uri(recorder)
    assert blob_lock.inspect(uri, credential_provider=session).state.value == "unlocked"
    assert recorder.keys(name) == {NAMED_KEY}
    # Set once for a bucket: every lock there uses it.
    blob_lock.set_credentials(f"s3://{recorder.bucket}/creds", provider)
    try:
        uri, name = lock_uri(recorder)
        with BlobLock(uri):
            pass
        assert recorder.keys(name) == {NAMED_KEY}
    finally:
        blob_lock.set_credentials(f"s3://{recorder.bucket}/creds", None)
    with pytest.raises(ValueError, match="not a cloud store"):
        BlobLock("memory://x/y", credential_provider=provider)


def test_a_provider_that_fails_raises_credentials_error(aws_home, recorder):
    def broken():
        raise RuntimeError("the vault is sealed")

    uri, _ = lock_uri(recorder)
    with pytest.raises(CredentialsError, match="the vault is sealed"):
        BlobLock(uri, credential_provider=broken).acquire(timeout=5)


def test_a_pasted_secret_or_a_naive_expiry_is_refused_clearly(aws_home, recorder):
    uri, name = lock_uri(recorder)
    with pytest.raises(TypeError) as e:
        BlobLock(uri, credential_provider=NAMED_SECRET)  # a secret pasted where a provider goes
    assert NAMED_SECRET not in str(e.value) and "a str of 30 characters" in str(e.value)

    def naive():
        return {"access_key_id": NAMED_KEY, "secret_access_key": NAMED_SECRET,
                "expires_at": datetime.now() + timedelta(hours=1)}  # fmt: skip

    with pytest.raises(CredentialsError, match="timezone-aware") as e:
        BlobLock(uri, credential_provider=naive).acquire(timeout=5)
    assert NAMED_SECRET not in str(e.value)
    assert recorder.keys(name) == set()  # refused before anything was signed with them


def test_the_cli_with_only_a_profile_and_doctor_names_the_source(aws_home, recorder):
    write(
        aws_home / "credentials",
        f"[locker]\naws_access_key_id = {NAMED_KEY}\naws_secret_access_key = {NAMED_SECRET}\n",
    )
    write(aws_home / "config", "[profile locker]\nregion = us-east-1\n")
    uri, name = lock_uri(recorder)
    cli = [sys.executable, "-m", "blob_lock"]
    run = subprocess.run(
        [*cli, "run", "--profile", "locker", uri, "--", "true"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert recorder.keys(name) == {NAMED_KEY}
    doctor = subprocess.run(
        [*cli, "doctor", "--profile", "locker", uri, "-v"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert doctor.returncode == 0, doctor.stderr
    assert "AWS profile 'locker' via botocore" in doctor.stdout
    for out in (run.stdout, run.stderr, doctor.stdout, doctor.stderr):
        assert NAMED_SECRET not in out


SECRETS_SCRIPT = """
import logging, sys
logging.basicConfig(level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
import blob_lock
from blob_lock import BlobLock
uri, key, secret, token = sys.argv[1:5]

def provider():
    return {"access_key_id": key, "secret_access_key": secret, "token": token,
            "expires_at": None}

lock = BlobLock(uri, credential_provider=provider)
with lock:
    print(repr(lock))
with BlobLock(uri):  # the default profile, through botocore
    pass
report = blob_lock.doctor(uri)
print(repr(report), report.credentials)
for bad in ({"aws_profile": "nope"}, {"aws_secret_access_key": secret + "\\n"}):
    try:
        BlobLock(uri, storage_options=bad).acquire(timeout=5)
    except Exception as e:
        print(repr(e))
def refused():
    raise RuntimeError("refused")
try:
    BlobLock(uri + "x", credential_provider=refused).acquire(timeout=5)
except Exception as e:
    print(repr(e))
import os
os.environ.pop("AWS_ENDPOINT_URL")  # with it, the profile's services line is never read
try:  # a services name with no section
    BlobLock(uri, storage_options={"aws_profile": "svc"}).acquire(timeout=5)
except Exception as e:
    print(repr(e))
"""


def test_secrets_never_appear_in_logs_reprs_or_errors(aws_home, recorder):
    write(
        aws_home / "credentials",
        f"""
        [default]
        aws_access_key_id = {PROFILE_KEY}
        aws_secret_access_key = {PROFILE_SECRET}
        [svc]
        aws_access_key_id = {NAMED_KEY}
        aws_secret_access_key = {NAMED_SECRET}
        """,
    )
    write(
        aws_home / "config",
        f"[profile svc]\nservices = nothere\nendpoint_url = {recorder.endpoint}\n",
    )
    secret_token = "provider-token-do-not-print"
    uri, _ = lock_uri(recorder)
    done = subprocess.run(
        [sys.executable, "-c", SECRETS_SCRIPT, uri, NAMED_KEY, NAMED_SECRET, secret_token],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = done.stdout + done.stderr
    assert "DEBUG" in done.stderr and "AWS profile 'default' via botocore" in done.stdout
    assert done.stdout.count("Error(") >= 4, done.stdout
    assert "[services nothere]" in done.stdout, done.stdout
    for secret in (PROFILE_SECRET, NAMED_SECRET, secret_token):
        assert secret not in text


NO_BOTOCORE = """
import sys
sys.modules["botocore"] = None  # as if blob-lock[aws] were not installed
from blob_lock import BlobLock, CredentialsError
try:
    BlobLock(sys.argv[1], storage_options={"aws_profile": "prod"}).acquire(timeout=5)
except CredentialsError as e:
    print(e)
"""


def test_a_profile_without_the_aws_extra_names_the_install(aws_home, recorder):
    write(aws_home / "config", "[profile prod]\nsso_session = corp\nsso_account_id = 1\n")
    uri, _ = lock_uri(recorder)
    done = subprocess.run(
        [sys.executable, "-c", NO_BOTOCORE, uri], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "profile 'prod' uses SSO (sso_session in " in done.stdout, done.stdout
    assert "which needs botocore: pip install 'blob-lock[aws]'" in done.stdout


LOCK_WITH_PROFILE = """
import sys
from blob_lock import BlobLock
with BlobLock(sys.argv[1], storage_options={"aws_profile": sys.argv[2]}):
    pass
"""


@pytest.mark.parametrize("style", ["sso_session", "legacy"])
def test_sso_from_the_token_cache_that_aws_sso_login_leaves(aws_home, recorder, monkeypatch,
                                                            style):  # fmt: skip
    import hashlib

    portal = SsoPortal("cached-sso-access-token")
    monkeypatch.setenv("AWS_ENDPOINT_URL_SSO", portal.url)
    start_url = "https://corp.awsapps.com/start"
    if style == "sso_session":
        profile = """
            [profile dev]
            sso_session = corp
            sso_account_id = 123456789012
            sso_role_name = Locker
            region = us-east-1
            [sso-session corp]
            sso_start_url = https://corp.awsapps.com/start
            sso_region = us-east-1
            """
        cache_key = "corp"
    else:
        profile = """
            [profile dev]
            sso_start_url = https://corp.awsapps.com/start
            sso_region = us-east-1
            sso_account_id = 123456789012
            sso_role_name = Locker
            region = us-east-1
            """
        cache_key = start_url
    write(aws_home / "config", profile)
    cache = aws_home / "sso" / "cache"
    cache.mkdir(parents=True)
    expires = (datetime.now(timezone.utc) + timedelta(hours=8)).strftime("%Y-%m-%dT%H:%M:%SZ")
    (cache / f"{hashlib.sha1(cache_key.encode()).hexdigest()}.json").write_text(json.dumps({
        "startUrl": start_url, "region": "us-east-1",
        "accessToken": "cached-sso-access-token", "expiresAt": expires,
    }))  # fmt: skip
    uri, name = lock_uri(recorder)
    # In a process of its own: botocore fixes the token cache's folder (under HOME) when it
    # is first imported, as it is for a user's process.
    done = subprocess.run(
        [sys.executable, "-c", LOCK_WITH_PROFILE, uri, "dev"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert recorder.keys(name) == {ROLE_KEY}
    assert portal.calls and "role_name=Locker" in portal.calls[0]


def test_a_variable_set_while_the_process_runs_is_seen_by_the_next_lock(monkeypatch):
    """The default chains are cached by the environment they read; the key is compared
    without decoding every variable, and must still change when one is set or removed."""
    from blob_lock import _credentials

    before = _credentials._env_key()
    assert _credentials._env_key() == before  # unchanged: the same key
    monkeypatch.setenv("AWS_PROFILE", f"p-{uuid.uuid4().hex}")
    changed = _credentials._env_key()
    assert changed != before
    monkeypatch.setenv("UNRELATED_VARIABLE_X", "1")
    assert _credentials._env_key() == changed  # only the chains' variables count
    monkeypatch.delenv("AWS_PROFILE")
    assert _credentials._env_key() == before


# Where a reading of ~/.aws could differ from the AWS CLI v2's (its bundled botocore), each
# case on both paths: a default install's reader ("bare") and the `aws` extra's botocore.
CLI_PARITY = """
import json, sys
if sys.argv[2] == "bare":
    sys.modules["botocore"] = None  # as if blob-lock[aws] were not installed
import blob_lock
from blob_lock import BlobLock, CredentialsError
out = {"source": blob_lock.credential_source(sys.argv[1]), "error": None}
try:
    with BlobLock(sys.argv[1]):
        pass
except CredentialsError as e:
    out["error"] = str(e)
print(json.dumps(out))
"""


def lock_as_the_cli_would(recorder, path: str) -> tuple[str, dict]:
    """Takes and releases a lock with no options at all, with or without botocore
    (``path``), in a process of its own: the lock's name, and where its credentials came
    from and the CredentialsError it raised, if any."""
    uri, name = lock_uri(recorder)
    done = subprocess.run(
        [sys.executable, "-c", CLI_PARITY, uri, path], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return name, json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("path", ["bare", "botocore"])
def test_aws_default_profile_names_the_profile_after_aws_profile(
    aws_home, recorder, monkeypatch, path
):
    """The AWS CLI v2 takes AWS_PROFILE, then AWS_DEFAULT_PROFILE (botocore alone takes them
    the other way round: the profile chosen here is the one it is given)."""
    write(
        aws_home / "credentials",
        f"""
        [default]
        aws_access_key_id = {PROFILE_KEY}
        aws_secret_access_key = {PROFILE_SECRET}
        [named]
        aws_access_key_id = {NAMED_KEY}
        aws_secret_access_key = {NAMED_SECRET}
        """,
    )
    monkeypatch.setenv("AWS_DEFAULT_PROFILE", "named")
    name, got = lock_as_the_cli_would(recorder, path)
    assert got["error"] is None and "'named'" in got["source"], got
    assert recorder.keys(name) == {NAMED_KEY}
    monkeypatch.setenv("AWS_PROFILE", "default")  # both set: AWS_PROFILE wins, as in the CLI
    name, got = lock_as_the_cli_would(recorder, path)
    assert got["error"] is None and "'default'" in got["source"], got
    assert recorder.keys(name) == {PROFILE_KEY}
    # An empty AWS_PROFILE counts as unset (the one difference kept: the CLI would look for
    # a profile named "", docs/credentials.md).
    monkeypatch.setenv("AWS_PROFILE", "")
    name, got = lock_as_the_cli_would(recorder, path)
    assert got["error"] is None and "'named'" in got["source"], got
    assert recorder.keys(name) == {NAMED_KEY}
    monkeypatch.delenv("AWS_PROFILE")
    monkeypatch.setenv("AWS_DEFAULT_PROFILE", "nope")  # named, so it must exist
    name, got = lock_as_the_cli_would(recorder, path)
    assert "profile 'nope' does not exist" in got["error"], got
    assert recorder.keys(name) == set()


def signing_regions(recorder, name: str) -> set[str]:
    """The regions in the signatures of the requests on the lock ``name``."""
    return {
        r["headers"]["Authorization"].split("Credential=", 1)[1].split("/")[2]
        for r in recorder.requests(name)
        if "Credential=" in r["headers"].get("Authorization", "")
    }


@pytest.mark.parametrize("path", ["bare", "botocore"])
def test_a_region_in_the_credentials_file_is_the_profiles_region(
    aws_home, recorder, monkeypatch, path
):
    """botocore (and so the AWS CLI) reads a profile's settings from both files, the
    credentials file's over the config file's: a region there is the profile's region."""
    write(
        aws_home / "credentials",
        f"""
        [default]
        aws_access_key_id = {PROFILE_KEY}
        aws_secret_access_key = {PROFILE_SECRET}
        region = eu-west-1
        """,
    )
    name, got = lock_as_the_cli_would(recorder, path)
    assert got["error"] is None, got
    assert recorder.keys(name) == {PROFILE_KEY}
    assert signing_regions(recorder, name) == {"eu-west-1"}
    write(aws_home / "config", "[default]\nregion = us-west-2\n")  # both: the credentials file's
    name, got = lock_as_the_cli_would(recorder, path)
    assert signing_regions(recorder, name) == {"eu-west-1"}, got
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")  # the environment over both files
    name, got = lock_as_the_cli_would(recorder, path)
    assert signing_regions(recorder, name) == {"ap-south-1"}, got


@pytest.mark.parametrize("path", ["bare", "botocore"])
def test_a_services_name_with_no_section_is_refused_as_the_cli_does(
    aws_home, recorder, monkeypatch, path
):
    """The AWS CLI refuses a profile whose ``services = NAME`` has no ``[services NAME]``
    section with settings (InvalidConfigError), when it looks there: after the storage
    options, AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL, unless configured endpoints are
    ignored. The profile's own endpoint_url is moto: were the line ignored, the lock would
    be taken there."""
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    write(
        aws_home / "credentials",
        f"[default]\naws_access_key_id = {PROFILE_KEY}\naws_secret_access_key = {PROFILE_SECRET}\n",
    )
    for missing, extra in (("nothere", ""), ("empty", "[services empty]\n")):
        write(
            aws_home / "config",
            f"[default]\nregion = us-east-1\nservices = {missing}\n"
            f"endpoint_url = {recorder.endpoint}\n{extra}",
        )
        name, got = lock_as_the_cli_would(recorder, path)
        error = got["error"] or ""
        for part in ("AWS profile 'default'", f"services = {missing}",
                     f"[services {missing}]", str(aws_home / "config")):  # fmt: skip
            assert part in error, got
        assert PROFILE_SECRET not in error and PROFILE_KEY not in error
        assert recorder.keys(name) == set()  # refused before any request
    # Where the CLI finds an endpoint before it looks at services, the line is not read.
    monkeypatch.setenv("AWS_ENDPOINT_URL", recorder.endpoint)
    name, got = lock_as_the_cli_would(recorder, path)
    assert got["error"] is None and recorder.keys(name) == {PROFILE_KEY}, got
    # And a section that is there gives its s3 endpoint_url.
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    write(
        aws_home / "config",
        f"[default]\nregion = us-east-1\nservices = here\n"
        f"[services here]\ns3 =\n  endpoint_url = {recorder.endpoint}\n",
    )
    name, got = lock_as_the_cli_would(recorder, path)
    assert got["error"] is None and recorder.keys(name) == {PROFILE_KEY}, got


def test_a_botocore_session_whose_services_section_is_missing_is_refused(
    aws_home, recorder, monkeypatch, caplog
):
    import botocore.session

    monkeypatch.delenv("AWS_ENDPOINT_URL")
    write(
        aws_home / "credentials",
        f"[svc]\naws_access_key_id = {NAMED_KEY}\naws_secret_access_key = {NAMED_SECRET}\n",
    )
    write(
        aws_home / "config",
        "[profile svc]\nregion = us-east-1\nservices = nothere\n"
        f"endpoint_url = {recorder.endpoint}\n",
    )
    uri, name = lock_uri(recorder)
    caplog.set_level("DEBUG")
    with pytest.raises(CredentialsError) as e:
        with BlobLock(uri, credential_provider=botocore.session.Session(profile="svc")):
            pass
    assert "AWS profile 'svc'" in str(e.value) and "[services nothere]" in str(e.value)
    for text in (str(e.value), repr(e.value), caplog.text):
        assert NAMED_SECRET not in text
    assert recorder.keys(name) == set()
