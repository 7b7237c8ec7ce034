"""Credentials where users keep them: AWS profiles (default, named, in files elsewhere),
assumed roles through moto's STS, credential_process with keys that expire while a lock is
held, the profile's region and endpoint_url, credential objects from Python, the CLI with
only a profile, and the errors when there are none. Every request goes to loopback: the
metadata endpoints point at a closed port, and moto records which keys signed what."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import blob_lock
import pytest
from blob_lock import BlobLock, CredentialsError, keep_alive
from conftest import (
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    METADATA,
    ROOT,
    boto3_s3,
    free_port,
    stop,
    wait_for_port,
)

PROFILE_KEY = "AKIAPROFILEKEY000001"
PROFILE_SECRET = "profile-secret-do-not-print-0001"
NAMED_KEY = "AKIANAMEDPROFILE0002"
NAMED_SECRET = "named-secret-do-not-print-0002"


class Recorder:
    """moto's server recording every request (MOTO_ENABLE_RECORDING), so that a test can
    tell which access key signed the S3 requests."""

    def __init__(self, tmp: Path) -> None:
        self.file = tmp / "requests.jsonl"
        port = free_port()
        env = dict(os.environ, MOTO_ENABLE_RECORDING="True", MOTO_RECORDER_FILEPATH=str(self.file))
        self.log = open(tmp / "moto.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "moto_server.py"), "-H", "127.0.0.1", "-p",
             str(port)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
        wait_for_port(port, self.proc, "moto_server")
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


@pytest.fixture(scope="module")
def recorder(tmp_path_factory):
    r = Recorder(tmp_path_factory.mktemp("moto-recorded"))
    yield r
    stop(r.proc)


@pytest.fixture
def aws_home(tmp_path, monkeypatch, recorder):
    """A laptop with no AWS_ACCESS_KEY_ID: HOME and the AWS files in a folder of the
    test's own, the endpoint of moto in the environment, metadata closed."""
    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_ENDPOINT_URL", recorder.endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "false")
    for k, v in METADATA.environment().items():  # deleted above with the rest of AWS_*
        monkeypatch.setenv(k, v)
    return home / ".aws"


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def lock_uri(recorder: Recorder) -> tuple[str, str]:
    name = f"creds/{uuid.uuid4().hex}"
    return f"s3://{recorder.bucket}/{name}", name


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
        deadline = time.monotonic() + 60
        while int(counter.read_text()) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)
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
        BlobLock(uri, storage_options={"aws_profile": "nope"})


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
        BlobLock(uri, storage_options=bad)
    except Exception as e:
        print(repr(e))
def refused():
    raise RuntimeError("refused")
try:
    BlobLock(uri + "x", credential_provider=refused).acquire(timeout=5)
except Exception as e:
    print(repr(e))
"""


def test_secrets_never_appear_in_logs_reprs_or_errors(aws_home, recorder):
    write(
        aws_home / "credentials",
        f"[default]\naws_access_key_id = {PROFILE_KEY}\naws_secret_access_key = {PROFILE_SECRET}\n",
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
    assert done.stdout.count("Error(") >= 3, done.stdout
    for secret in (PROFILE_SECRET, NAMED_SECRET, secret_token):
        assert secret not in text


# -- Azure ---------------------------------------------------------------------------------


@pytest.fixture
def azure_env(monkeypatch, tmp_path, azurite_url):
    """No AZURE_* credentials in the environment, no `az` on PATH."""
    for k in list(os.environ):
        if k.startswith("AZURE_") and k not in METADATA.environment():
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    return azurite_url


def azurite_string(url: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"BlobEndpoint={url}/{AZURITE_ACCOUNT};"
    )


def new_container(url: str) -> str:
    from azure.storage.blob import BlobServiceClient

    name = f"cred-{uuid.uuid4().hex[:12]}"
    BlobServiceClient.from_connection_string(azurite_string(url)).create_container(name)
    return name


def test_azure_connection_strings_and_account_keys(azure_env, monkeypatch):
    url = azure_env
    container = new_container(url)
    conn = azurite_string(url)
    # As a storage option ...
    with BlobLock(f"az://{container}/a", storage_options={"azure_storage_connection_string": conn}):
        pass
    # ... in the environment, as the Azure tools read it ...
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
    with BlobLock(f"az://{container}/b") as held:
        assert blob_lock.inspect(f"az://{container}/b").owner == held.owner
    assert "Azure credentials given" in blob_lock.doctor(f"az://{container}/c").credentials
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING")
    # ... and an account name and key.
    keys = {
        "azure_storage_account_name": AZURITE_ACCOUNT,
        "azure_storage_account_key": AZURITE_KEY,
        "azure_storage_endpoint": f"{url}/{AZURITE_ACCOUNT}",
        "azure_allow_http": "true",
    }
    with BlobLock(f"az://{container}/d", storage_options=keys):
        pass
    with pytest.raises(ValueError, match="part 2 has no '='") as e:
        BlobLock(f"az://{container}/e", storage_options={
            "azure_storage_connection_string": "AccountName=x;pastedsecretwithoutkey"})  # fmt: skip
    assert "pastedsecret" not in str(e.value)


def test_no_azure_credentials_says_az_login(azure_env):
    container = new_container(azure_env)
    asked = len(METADATA.asked)
    began = time.monotonic()
    with pytest.raises(CredentialsError) as e:
        BlobLock(
            f"az://{container}/x",
            storage_options={"azure_storage_account_name": AZURITE_ACCOUNT,
                             "azure_storage_endpoint": f"{azure_env}/{AZURITE_ACCOUNT}",
                             "azure_allow_http": "true"},
        ).acquire(timeout=5)  # fmt: skip
    assert time.monotonic() - began < 60
    msg = str(e.value)
    for part in ("Azure", "managed identity", "Azure CLI", "az login", "CONNECTION_STRING"):
        assert part in msg, msg
    assert len(METADATA.asked) > asked, "managed identity asked the loopback trap"


# -- GCS -----------------------------------------------------------------------------------


@pytest.fixture
def gcs_home(monkeypatch, tmp_path, fake_gcs):
    for k in list(os.environ):
        if k.startswith(("GOOGLE_", "CLOUDSDK_")):
            monkeypatch.delenv(k)
    monkeypatch.setenv("HOME", str(tmp_path))
    adc = tmp_path / ".config" / "gcloud"
    adc.mkdir(parents=True)
    bucket = f"cred-{uuid.uuid4().hex[:12]}"
    fake_gcs.create_bucket(bucket)
    return adc, bucket


def bearer_tokens_sent(fake_gcs, since: int) -> set[str]:
    return {a for a in fake_gcs.store.authorizations[since:] if a}


def test_gcloud_authorized_user_credentials(gcs_home, fake_gcs, monkeypatch):
    """What `gcloud auth application-default login` leaves. google-auth always sends an
    authorized user's refresh token to Google's own token endpoint, whatever the file
    says: here that address is the fake's /token (a test must not leave this machine)."""
    import google.oauth2.credentials

    monkeypatch.setattr(
        google.oauth2.credentials, "_GOOGLE_OAUTH2_TOKEN_ENDPOINT", f"{fake_gcs.url}/token"
    )
    adc, bucket = gcs_home
    (adc / "application_default_credentials.json").write_text(json.dumps({
        "type": "authorized_user", "client_id": "id.apps.googleusercontent.com",
        "client_secret": "adc-client-secret", "refresh_token": "adc-refresh-token",
    }))  # fmt: skip
    before = len(fake_gcs.store.authorizations)
    options = {"google_base_url": fake_gcs.url, "google_allow_http": "true"}
    with BlobLock(f"gs://{bucket}/lock", storage_options=options):
        pass
    sent = bearer_tokens_sent(fake_gcs, before)
    assert sent and all(a.startswith("Bearer ya29.fake-") for a in sent), sent
    source = blob_lock.doctor(f"gs://{bucket}/d", storage_options=options).credentials
    assert "Google application default credentials (Credentials)" == source


def test_a_service_account_file_in_google_application_credentials(gcs_home, fake_gcs, tmp_path,
                                                                  monkeypatch):  # fmt: skip
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    path = tmp_path / "sa.json"
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "p", "private_key_id": "k1",
        "private_key": pem, "client_email": "locker@p.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": f"{fake_gcs.url}/token",
    }))  # fmt: skip
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    _, bucket = gcs_home
    before = len(fake_gcs.store.authorizations)
    options = {"google_base_url": fake_gcs.url, "google_allow_http": "true"}
    with BlobLock(f"gs://{bucket}/lock", storage_options=options):
        pass
    sent = bearer_tokens_sent(fake_gcs, before)
    assert sent and all(a.startswith("Bearer ya29.fake-") for a in sent), sent


def test_no_gcs_credentials_says_gcloud_login(gcs_home, fake_gcs):
    _, bucket = gcs_home
    asked = len(METADATA.asked)
    with pytest.raises(CredentialsError, match="gcloud auth application-default login"):
        BlobLock(f"gs://{bucket}/lock", storage_options={"google_base_url": fake_gcs.url})
    assert len(METADATA.asked) > asked, "the metadata server asked was the loopback trap"


NO_BOTOCORE = """
import sys
sys.modules["botocore"] = None  # as if blob-lock[aws] were not installed
from blob_lock import BlobLock, CredentialsError
try:
    BlobLock(sys.argv[1], storage_options={"aws_profile": "prod"})
except CredentialsError as e:
    print(e)
"""


def test_a_profile_without_the_aws_extra_names_the_install(aws_home, recorder):
    uri, _ = lock_uri(recorder)
    done = subprocess.run(
        [sys.executable, "-c", NO_BOTOCORE, uri], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "profile 'prod' needs botocore: pip install 'blob-lock[aws]'" in done.stdout
