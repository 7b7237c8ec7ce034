"""Azure credentials where users keep them: `az login` (a fake `az` on PATH) through
azure-identity's DefaultAzureCredential and, without azure-identity, through object_store's
own CLI support; azure-identity credential objects, sync and aio; a token that expires while
a lock is held; connection strings and account keys; no credentials at all. Bearer tokens
need Azurite over HTTPS with OAuth, with a certificate of a test authority that the test
trusts (SSL_CERT_FILE)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import blob_lock
import pytest
from blob_lock import BlobLock, CredentialsError
from conftest import METADATA
from servers import (
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    azurite_command,
    listening,
    loopback_certificate,
    stop,
)

# Left out of `make test-fast` (-m "not slow"): credentials through Azurite over HTTP
pytestmark = pytest.mark.slow

SERVERS = Path(__file__).resolve().parents[1] / "servers"


class HttpsAzurite:
    """Azurite over HTTPS with basic OAuth (bearer tokens), its certificate from a test
    authority (servers.loopback_certificate)."""

    def __init__(self, work: Path) -> None:
        self.ca, cert, key = loopback_certificate(work)
        self.log = open(work / "azurite.log", "w")
        self.proc, port = listening(
            lambda port: [*azurite_command(), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                          "--inMemoryPersistence", "--skipApiVersionCheck", "--disableTelemetry",
                          "--silent", "--oauth", "basic", "--cert", str(cert), "--key", str(key)],
            "azurite-blob (https)", cwd=work, stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.url = f"https://127.0.0.1:{port}/{AZURITE_ACCOUNT}"

    def container(self) -> str:
        from azure.storage.blob import BlobServiceClient

        conn = (
            f"DefaultEndpointsProtocol=https;AccountName={AZURITE_ACCOUNT};"
            f"AccountKey={AZURITE_KEY};BlobEndpoint={self.url};"
        )
        name = f"oauth-{uuid.uuid4().hex[:12]}"
        service = BlobServiceClient.from_connection_string(conn, connection_verify=str(self.ca))
        service.create_container(name)
        return name

    def options(self) -> dict[str, str]:
        """The account and its endpoint: no credentials."""
        return {"azure_storage_account_name": AZURITE_ACCOUNT, "azure_storage_endpoint": self.url}


@pytest.fixture(scope="module")
def https_azurite(tmp_path_factory):
    server = HttpsAzurite(tmp_path_factory.mktemp("azurite-https"))
    yield server
    stop(server.proc)


@pytest.fixture
def az_login(monkeypatch, tmp_path, https_azurite):
    """A laptop after `az login`: a fake `az` first on PATH, no AZURE_* credentials, the
    test CA trusted. Yields the file the fake `az` appends each token it hands out to."""
    for k in list(os.environ):
        if k.startswith(("AZURE_", "AZURITE_")) and k not in METADATA.environment():
            monkeypatch.delenv(k)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    az = bin_dir / "az"
    az.write_text(f'#!/bin/sh\nexec {sys.executable} {SERVERS / "fake_az.py"} "$@"\n')
    az.chmod(0o755)
    tokens = tmp_path / "tokens"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SSL_CERT_FILE", str(https_azurite.ca))
    monkeypatch.setenv("FAKE_AZ_TOKENS", str(tokens))
    return tokens


def fetched(tokens: Path) -> list[str]:
    return tokens.read_text().split() if tokens.exists() else []


def test_az_login_through_the_default_chain(az_login, https_azurite):
    container = https_azurite.container()
    uri = f"az://{container}/lock"
    with BlobLock(uri, storage_options=https_azurite.options()) as held:
        assert held.held
    assert fetched(az_login), "the token came from `az`"
    report = blob_lock.doctor(f"az://{container}/d", storage_options=https_azurite.options())
    assert report.credentials == "azure-identity DefaultAzureCredential"


def test_azure_identity_objects_sync_and_aio(az_login, https_azurite):
    from azure.identity import AzureCliCredential
    from azure.identity.aio import AzureCliCredential as AsyncAzureCliCredential

    container = https_azurite.container()
    options = https_azurite.options()
    for credential in (AzureCliCredential(), AsyncAzureCliCredential()):
        before = len(fetched(az_login))
        uri = f"az://{container}/{type(credential).__module__.replace('.', '-')}"
        with BlobLock(uri, storage_options=options, credential_provider=credential):
            pass
        assert len(fetched(az_login)) > before, credential


def test_an_azure_token_that_expires_while_a_lock_is_held(az_login, https_azurite, monkeypatch):
    monkeypatch.setenv("FAKE_AZ_LIFETIME", "4")  # Azurite refuses a token once it expired
    container = https_azurite.container()
    with BlobLock(f"az://{container}/lock", storage_options=https_azurite.options(),
                  expire=2) as held:  # fmt: skip
        # Held across several token lifetimes: four tokens fetched, then the lock renews
        # twice more (its write_count grows by one at each renewal) and is still held.
        deadline = time.monotonic() + 60
        while len(fetched(az_login)) < 4:
            assert time.monotonic() < deadline, f"{len(fetched(az_login))} tokens in 60 s"
            time.sleep(0.05)
        renewed = (held.inspect().write_count or 0) + 2
        while (held.inspect().write_count or 0) < renewed:
            assert time.monotonic() < deadline, "no renewal after the fourth token in 60 s"
            time.sleep(0.1)
        assert held.held and not held.lost
    assert len(set(fetched(az_login))) >= 4  # renewed before each expired


WITHOUT_AZURE_IDENTITY = """
import logging, sys
logging.basicConfig(level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
sys.modules["azure.identity"] = None  # as if blob-lock[azure] were not installed
import json
import blob_lock
uri, options = sys.argv[1], json.loads(sys.argv[2])
with blob_lock.BlobLock(uri, storage_options=options) as held:
    print(repr(held))
print(blob_lock.doctor(uri + "-doctor", storage_options=options).credentials)
"""


def test_az_login_without_azure_identity_and_no_token_in_any_output(az_login, https_azurite):
    import json

    container = https_azurite.container()
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_AZURE_IDENTITY, f"az://{container}/lock",
         json.dumps(https_azurite.options())],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "the Azure CLI (`az login`), through object_store" in done.stdout
    tokens = fetched(az_login)
    assert tokens, "object_store ran `az`"
    text = done.stdout + done.stderr
    assert "DEBUG" in text
    for token in tokens:
        assert token not in text
        assert token.split(".")[1] not in text  # not even the claims


# -- keys, connection strings, none ----------------------------------------------------


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
    given = blob_lock.doctor(f"az://{container}/c").credentials
    assert "an Azure connection string given in AZURE_STORAGE_CONNECTION_STRING" in given, given
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
    # Managed identity asked the trap (once per process: azure-identity remembers that no
    # metadata service answered), never the real address.
    assert any("/metadata/identity/oauth2/token" in a for a in METADATA.asked)


def test_a_store_that_refuses_the_credentials_says_so(azure_env):
    container = new_container(azure_env)
    wrong = {
        "azure_storage_account_name": AZURITE_ACCOUNT,
        "azure_storage_account_key": "d3Jvbmcta2V5LW5vdC10aGUtYWNjb3VudHM=",
        "azure_storage_endpoint": f"{azure_env}/{AZURITE_ACCOUNT}",
        "azure_allow_http": "true",
    }
    with pytest.raises(blob_lock.StoreError) as e:
        BlobLock(f"az://{container}/x", storage_options=wrong).acquire(timeout=5)
    msg = str(e.value)
    source = "Azure credentials given in the storage option azure_storage_account_key"
    assert f"refused the credentials, which came from {source}" in msg, msg
    assert "has not answered" not in msg and "<?xml" not in msg
    assert not isinstance(e.value, CredentialsError)
    # The command line names them too: ls in its error, doctor before its first request.
    cli = [sys.executable, "-m", "blob_lock"]
    args = [f"-o{k}={v}" for k, v in wrong.items()]
    ls = subprocess.run([*cli, "ls", f"az://{container}", *args], capture_output=True,
                        text=True, timeout=120)  # fmt: skip
    assert ls.returncode == 1 and f"which came from {source}" in ls.stderr
    doctor = subprocess.run([*cli, "doctor", f"az://{container}/x", *args], capture_output=True,
                            text=True, timeout=120)  # fmt: skip
    assert doctor.returncode == 1 and "refused the credentials" in doctor.stderr
    assert f"credentials: {source}" in doctor.stdout, doctor.stdout
    for out in (msg, ls.stdout, ls.stderr, doctor.stdout, doctor.stderr):
        assert wrong["azure_storage_account_key"] not in out


def test_no_account_says_where_an_account_comes_from(azure_env):
    """No account anywhere (no variable, option, connection string or URL host): a
    CredentialsError that names what to set and how to sign in, from Python and the CLI."""
    with pytest.raises(CredentialsError) as e:
        BlobLock("az://container/x")
    cli = [sys.executable, "-m", "blob_lock", "status", "az://container/x"]
    status = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert status.returncode != 0
    for said in (str(e.value), status.stderr):
        for part in ("AZURE_STORAGE_ACCOUNT_NAME", "AZURE_STORAGE_CONNECTION_STRING", "az login"):
            assert part in said, said
        assert "Generic MicrosoftAzure error" not in said, said


def test_a_wrong_key_in_the_connection_string_variable_is_named(azure_env, monkeypatch):
    # Refused by the store (403): the error names the variable to fix.
    container = new_container(azure_env)
    wrong = azurite_string(azure_env).replace(AZURITE_KEY, "d3Jvbmcta2V5LW5vdC10aGUtYWNjb3VudHM=")
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", wrong)
    with pytest.raises(blob_lock.StoreError) as e:
        BlobLock(f"az://{container}/x").acquire(timeout=5)
    msg = str(e.value)
    assert "refused the credentials" in msg and "AZURE_STORAGE_CONNECTION_STRING" in msg, msg
    assert "d3Jvbmcta2V5" not in msg


def test_a_connection_string_from_the_environment_is_named_as_such(azure_env, monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", "AccountName=acct;AccountKey=not*b64")
    with pytest.raises(ValueError) as e:
        BlobLock("az://container/x").acquire(timeout=5)
    msg = str(e.value)
    assert "storage options given: none" in msg, msg
    assert "a connection string from the environment's AZURE_STORAGE_CONNECTION_STRING" in msg


def test_the_command_line_keeps_the_cloud_libraries_quiet_unless_verbose(azure_env):
    """azure-identity warns a paragraph per source it tries; the command prints one line,
    blob-lock's, which says what was tried and what to do. -v shows theirs."""
    container = new_container(azure_env)
    args = [f"-oazure_storage_account_name={AZURITE_ACCOUNT}",
            f"-oazure_storage_endpoint={azure_env}/{AZURITE_ACCOUNT}"]  # fmt: skip
    cli = [sys.executable, "-m", "blob_lock", "status", f"az://{container}/x", *args]
    quiet = subprocess.run(cli, capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 1, quiet.stderr
    assert quiet.stderr.startswith("blob-lock: ") and "az login" in quiet.stderr, quiet.stderr
    assert len(quiet.stderr.strip().splitlines()) == 1, quiet.stderr
    verbose = subprocess.run([*cli, "-v"], capture_output=True, text=True, timeout=120)
    assert "azure.identity" in verbose.stderr, verbose.stderr


def test_the_mops_adapter_authenticates_as_mops_does(az_login, https_azurite, monkeypatch):
    """adls:// through blob_lock.mops takes thds.adls's SharedCredential, the credential
    mops itself uses (here azure-identity reaching the fake `az`)."""
    import blob_lock.mops as adapter

    container = https_azurite.container()
    monkeypatch.setenv("AZURE_STORAGE_ENDPOINT", https_azurite.url)  # not a credential
    credential = adapter._credential({"azure_storage_account_name": AZURITE_ACCOUNT})
    assert type(credential).__module__.startswith("thds.adls"), credential
    before = len(fetched(az_login))
    lease = adapter.acquire(f"adls://{AZURITE_ACCOUNT}/{container}/memo/abc/lock")
    assert lease is not None
    lease.release()
    assert len(fetched(az_login)) > before, "the token came through mops's credential"
    # Credentials of the environment's own win, as they would for object_store.
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_KEY", AZURITE_KEY)
    assert adapter._credential({"azure_storage_account_name": AZURITE_ACCOUNT}) is None
