"""A credential source of any shape the clouds' Python libraries give, as the one plain
function the native side calls (``NativeCredentials``): obstore-style providers (a callable,
sync or async, returning a mapping), a boto3 or botocore session, an azure-identity
credential (sync or aio), google-auth credentials."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from blob_lock import _blob_lock
from blob_lock._credentials import _loop
from blob_lock._credentials._found import AZURE_SCOPE, epoch
from blob_lock.exceptions import CredentialsError

#: How long a fetch (one call of a provider) may take.
FETCH_TIMEOUT = 60.0
#: Fetched again this long before they expire (at most half their lifetime).
REFRESH = {"s3": 300.0, "azure": 300.0, "gcs": 225.0}


def _awaited(value: Any) -> Any:
    return _loop.run(value, FETCH_TIMEOUT) if inspect.isawaitable(value) else value


def _item(got: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in got:
        raise CredentialsError(f"{what} returned no {key!r}: it returns a mapping with {key!r}")
    return got[key]


def _from_mapping(cloud: str, got: object, what: str) -> tuple[Any, ...]:
    """The native tuple for an obstore-style provider's mapping."""
    if not isinstance(got, Mapping):
        raise CredentialsError(f"{what} returned {type(got).__name__}, not a mapping")
    expires = epoch(got.get("expires_at"))
    if cloud == "s3":
        return (
            str(_item(got, "access_key_id", what)),
            str(_item(got, "secret_access_key", what)),
            got.get("token"),
            expires,
        )
    if cloud == "azure":
        for key, kind in (("token", "token"), ("access_key", "access_key"), ("sas_token", "sas")):
            if got.get(key):
                value = got[key]
                if kind == "sas" and not isinstance(value, str):
                    value = "&".join(f"{k}={v}" for k, v in value)
                return (kind, str(value), expires)
        raise CredentialsError(f"{what} returned none of 'token', 'access_key', 'sas_token'")
    return (str(_item(got, "token", what)), expires)


def _kind(obj: object) -> str:
    """What ``obj`` is, without its value: ``a str of 40 characters``, ``an int``."""
    name = type(obj).__name__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    if isinstance(obj, (str, bytes)):
        return f"{article} {name} of {len(obj)} characters"
    return f"{article} {name}"


def _name(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


def is_boto(obj: object) -> bool:
    return _name(obj).startswith(("boto3.", "botocore.")) and hasattr(obj, "get_credentials")


def _is_google(obj: object) -> bool:
    return _name(obj).startswith("google.") and hasattr(obj, "refresh")


def _fetcher(cloud: str, provider: object) -> tuple[Callable[[], tuple[Any, ...]], str]:
    """The plain fetch function for ``provider``, and where its credentials come from."""
    if cloud == "s3" and is_boto(provider):
        from blob_lock._credentials import _aws

        session: Any = getattr(provider, "_session", provider)  # boto3.Session wraps botocore's
        return _aws.fetcher(session.get_credentials(), "the boto3/botocore session given")
    if cloud == "azure" and hasattr(provider, "get_token"):

        def azure() -> tuple[Any, ...]:
            token = _awaited(provider.get_token(AZURE_SCOPE))  # type: ignore[attr-defined]
            return ("token", token.token, float(token.expires_on))

        return azure, f"the Azure credential given ({type(provider).__name__})"
    if cloud == "gcs" and _is_google(provider):
        from blob_lock._credentials import _gcs

        return _gcs.fetcher(provider), f"the google-auth credentials given ({_name(provider)})"
    function: Any = provider  # checked below: callable, or a TypeError
    if not callable(function):
        raise TypeError(
            f"credential_provider for {_blob_lock.STORE_NAMES[cloud]} must be a callable returning "
            f"credentials (obstore's credential_provider shape), "
            f"{'a boto3/botocore session' if cloud == 's3' else ''}"
            f"{'an azure-identity credential' if cloud == 'azure' else ''}"
            f"{'google-auth credentials' if cloud == 'gcs' else ''}, got "
            f"{_kind(provider)} (not shown: it may be a secret)"
        )
    what = f"credential_provider {getattr(provider, '__qualname__', type(provider).__name__)}"

    def call() -> tuple[Any, ...]:
        return _from_mapping(cloud, _awaited(function()), what)

    return call, what


def native(cloud: str, provider: object, source: str | None = None) -> _blob_lock.NativeCredentials:
    """``provider`` as the native side takes it."""
    if isinstance(provider, _blob_lock.NativeCredentials):
        return provider
    fetch, where = _fetcher(cloud, provider)
    refresh = getattr(provider, "refresh_threshold", None)
    seconds = refresh.total_seconds() if isinstance(refresh, timedelta) else REFRESH[cloud]
    return _blob_lock.NativeCredentials(
        cloud, fetch, source=source or where, refresh=max(0.0, seconds)
    )
