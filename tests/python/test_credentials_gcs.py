"""GCS credentials where users keep them: gcloud's authorized user (what `gcloud auth
application-default login` leaves), a service-account file in GOOGLE_APPLICATION_CREDENTIALS,
both through google-auth against the fake GCS and its token endpoint; and none at all."""

from __future__ import annotations

import json
import os
import uuid

import blob_lock
import pytest
from blob_lock import BlobLock, CredentialsError
from conftest import METADATA

# Left out of `make test-fast` (-m "not slow"): credentials through the GCS fake over HTTP
pytestmark = pytest.mark.slow


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
    assert source == "Google application default credentials via google-auth"


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
    with pytest.raises(CredentialsError, match="gcloud auth application-default login"):
        BlobLock(f"gs://{bucket}/lock", storage_options={"google_base_url": fake_gcs.url}).acquire(
            timeout=5
        )
    # The metadata server asked was the trap (google-auth remembers it did not answer).
    assert any(a.endswith(" Google") for a in METADATA.asked), METADATA.asked
