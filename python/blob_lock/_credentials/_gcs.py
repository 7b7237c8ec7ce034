"""GCS credentials as gcloud finds them, through google-auth (``pip install
'blob-lock[gcp]'``): GOOGLE_APPLICATION_CREDENTIALS, the gcloud application-default file
(service-account and authorized-user), external accounts, then the metadata server. A
service account given as a storage option or GOOGLE_SERVICE_ACCOUNT* goes to object_store
unchanged."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import timezone
from typing import Any

from blob_lock._credentials._found import GCS_SCOPE, Found, FoundAtFirstFetch, epoch
from blob_lock.exceptions import CredentialsError

_EXPLICIT = (
    "google_service_account", "service_account", "google_service_account_path",
    "service_account_path", "google_service_account_key", "service_account_key",
    "google_application_credentials", "google_skip_signature", "skip_signature",
)  # fmt: skip


def _fix() -> str:
    return (
        "run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS "
        "to a key file, or pass credential_provider"
    )


def fetcher(credentials: Any) -> Callable[[], tuple[Any, ...]]:
    """The fetch function over google-auth credentials: refreshed at each fetch."""
    from google.auth.transport.requests import Request  # type: ignore[import-not-found,unused-ignore]  # an extra

    request = Request()

    def fetch() -> tuple[Any, ...]:
        try:
            credentials.refresh(request)
        except Exception as e:
            raise CredentialsError(
                f"refreshing the Google credentials failed ({type(e).__name__}: {e}); {_fix()}"
            ) from None
        expiry = credentials.expiry
        if expiry is not None and expiry.tzinfo is None:
            expiry = expiry.replace(tzinfo=timezone.utc)  # google-auth's expiry is naive UTC

        return (credentials.token, epoch(expiry))

    return fetch


def default(options: dict[str, str]) -> Found:
    """As ``_aws.default``, for GCS."""
    if any(k in options for k in _EXPLICIT) or any(
        k.startswith("GOOGLE_SERVICE_ACCOUNT") for k in os.environ
    ):
        return Found(options, None, "a service account given (object_store)")
    try:
        import google.auth  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return Found(
            options,
            None,
            "object_store's chain (pip install 'blob-lock[gcp]' for gcloud's)",
            tried="looked in the storage options and GOOGLE_SERVICE_ACCOUNT*; google-auth is "
            "not installed",
            fix=_fix() + ", or pip install 'blob-lock[gcp]'",
        )
    source = "Google application default credentials via google-auth"
    return Found(options, (FoundAtFirstFetch(_find), source), source)


def _find() -> Callable[[], tuple[Any, ...]]:
    import google.auth  # type: ignore[import-not-found,unused-ignore]  # an extra
    import google.auth.exceptions  # type: ignore[import-not-found,unused-ignore]  # an extra

    try:
        credentials, _project = google.auth.default(scopes=[GCS_SCOPE])
    except google.auth.exceptions.DefaultCredentialsError as e:
        raise CredentialsError(
            "no Google credentials found: looked in GOOGLE_APPLICATION_CREDENTIALS, the gcloud "
            f"application-default file and the metadata server ({e}); {_fix()}"
        ) from None
    return fetcher(credentials)
