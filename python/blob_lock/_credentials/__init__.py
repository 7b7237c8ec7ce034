"""Where each store's credentials come from. ``resolve`` is what every entry point calls
with its URI, storage options and ``credential_provider``: the provider given, else one set
for the store with ``set_credentials``, else the cloud's own default chain (the AWS CLI's,
azure-identity's, gcloud's) where its library is installed, else object_store's own chain.
Default chains are resolved once per process and configuration and shared, so that every
lock on a store uses one client."""

from __future__ import annotations

import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from blob_lock import _args, _blob_lock
from blob_lock._credentials import _aws, _azure, _bridge, _found, _gcs
from blob_lock.exceptions import CredentialsError

__all__ = ["CredentialProvider", "credential_source", "resolve", "set_credentials"]


class CredentialProvider(Protocol):
    """A source of credentials for a cloud store, in obstore's ``credential_provider`` shape:
    a callable, sync or async, returning a mapping. For S3: ``access_key_id``,
    ``secret_access_key``, ``token`` (optional) and ``expires_at`` (a timezone-aware
    datetime, or None); for Azure: ``token`` (or ``access_key``, or ``sas_token``) and
    ``expires_at``; for GCS: ``token`` and ``expires_at``. A ``refresh_threshold``
    attribute (a timedelta) says how long before expiry to call it again.

    Wherever one is taken, the clouds' own objects are taken too: a boto3 or botocore
    Session, an azure-identity credential (sync or aio), google-auth credentials."""

    def __call__(self) -> Mapping[str, Any] | Awaitable[Mapping[str, Any]]: ...


_DEFAULTS: dict[str, Callable[[dict[str, str]], _found.Found]] = {
    "s3": _aws.default,
    "azure": _azure.default,
    "gcs": _gcs.default,
}
_ENV = ("AWS_", "AZURE_", "GOOGLE_", "CLOUDSDK_", "HOME", "PATH")
_ENV_BYTES = tuple(p.encode() for p in _ENV)
_env_seen: tuple[dict[bytes, bytes], tuple[Any, ...]] | None = None  # the last environment

_guard = threading.Lock()
_set: dict[str, Any] = {}  # prefix -> NativeCredentials (set_credentials)
_given: dict[int, tuple[object, Any]] = {}  # id(provider) -> (provider, NativeCredentials)
_chains: dict[tuple[Any, ...], tuple[dict[str, str], Any, str]] = {}


def cloud_of(uri: str) -> str | None:
    """The cloud ``uri`` names (``s3``, ``azure``, ``gcs``), as the native side reads its
    scheme; None for local files, memory and unknown schemes."""
    return _blob_lock.cloud_of(uri)


def _native_for(cloud: str, provider: object) -> Any:
    """One native handle per provider object, so that locks on it share a store client."""
    with _guard:
        hit = _given.get(id(provider))
        if hit is not None and hit[0] is provider:
            return hit[1]
    handle = _bridge.native(cloud, provider)
    with _guard:
        if len(_given) >= 1024:
            _given.clear()
        _given[id(provider)] = (provider, handle)
    return handle


def set_credentials(prefix: str, credential_provider: CredentialProvider | object | None) -> None:
    """Every lock, look and listing under ``prefix`` (``s3://bucket``, ``az://container/memo``)
    uses ``credential_provider`` when its call gives none; None removes the setting. The
    longest matching prefix wins."""
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str such as 's3://bucket', got {prefix!r}")
    cloud = cloud_of(prefix)
    if cloud is None:
        raise ValueError(f"credentials are for cloud stores (s3://, az://, gs://), not {prefix!r}")
    key = prefix.rstrip("/")
    if credential_provider is None:
        with _guard:
            _set.pop(key, None)
        return
    handle = _native_for(cloud, credential_provider)
    with _guard:
        _set[key] = handle


def _registered(uri: str) -> Any:
    with _guard:
        if not _set:
            return None
        best = None
        for prefix, handle in _set.items():
            if (uri == prefix or uri.startswith(prefix + "/")) and (
                best is None or len(prefix) > len(best[0])
            ):
                best = (prefix, handle)
    return best[1] if best else None


def _env_key() -> tuple[Any, ...]:
    """The environment variables a cloud's chain may read, as a cache key. Read from the
    mapping under ``os.environ`` where there is one: going through ``os.environ`` decodes
    every variable, most of the cost of making a lock on a cloud store."""
    global _env_seen
    data = getattr(os.environ, "_data", None)
    if os.name == "posix" and isinstance(data, dict):  # bytes to bytes there
        seen = _env_seen
        if seen is not None and seen[0] == data:  # compared in C: no variable decoded
            return seen[1]
        key = tuple(sorted((k, v) for k, v in data.items() if k.startswith(_ENV_BYTES)))
        _env_seen = (dict(data), key)
        return key
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV)))


def _default_chain(cloud: str, options: dict[str, str]) -> tuple[dict[str, str], Any, str]:
    key = (cloud, tuple(sorted(options.items())), _env_key())
    with _guard:
        hit = _chains.get(key)
    if hit is not None:
        return dict(hit[0]), hit[1], hit[2]
    try:
        found = _DEFAULTS[cloud](dict(options))
    except CredentialsError as e:
        # Raised at the first request, as a store error would be, after the URI and the
        # options were checked; and not kept: credentials may appear (`aws sso login`)
        # while a process runs.
        return _failing(cloud, options, e.message)
    out, source = found.options, found.source
    if found.fetch is not None:
        function, source = found.fetch
        handle = _blob_lock.NativeCredentials(
            cloud, function, source=source, refresh=_bridge.REFRESH[cloud]
        )
    else:
        handle = _blob_lock.NativeCredentials.object_store_chain(
            cloud, source=source, tried=found.tried, fix=found.fix
        )
    with _guard:
        if len(_chains) >= 256:
            _chains.clear()
        _chains[key] = (out, handle, source)
    return dict(out), handle, source


def _failing(cloud: str, options: dict[str, str], message: str) -> tuple[dict[str, str], Any, str]:
    """Options without blob-lock's own keys, and credentials whose every fetch fails with
    ``message``."""

    def fetch() -> tuple[Any, ...]:
        raise CredentialsError(message)

    out = dict(options)
    out.pop(_aws.PROFILE_OPTION, None)
    handle = _blob_lock.NativeCredentials(cloud, fetch, source="none found", refresh=0.0)
    return out, handle, "none found"


def resolve(
    uri: str,
    storage_options: Mapping[str, str] | None,
    credential_provider: object = None,
    prefix: bool = False,
) -> dict[str, Any]:
    """The native keyword arguments ``storage_options`` and ``credentials`` for a store;
    ``uri`` is a lock's (or with ``prefix``, a listing's prefix)."""
    options = _args.storage_options(storage_options)
    cloud = cloud_of(uri)
    if cloud is None:
        if credential_provider is not None:
            raise ValueError(
                f"credential_provider given for {uri}, which is not a cloud store "
                "(s3://, az://, gs://): local and memory stores take no credentials"
            )
        return {"storage_options": options, "credentials": None}
    _blob_lock.check_uri(uri, prefix)  # refused before a cloud library is imported
    if credential_provider is not None:
        out = dict(options or {})
        out.pop(_aws.PROFILE_OPTION, None)
        if cloud == "s3" and _bridge.is_boto(credential_provider):
            _aws.session_settings(credential_provider, out)
        return {"storage_options": out, "credentials": _native_for(cloud, credential_provider)}
    registered = _registered(uri)
    if registered is not None:
        out = dict(options or {})
        out.pop(_aws.PROFILE_OPTION, None)
        return {"storage_options": out, "credentials": registered}
    out, handle, _ = _default_chain(cloud, options or {})
    return {"storage_options": out, "credentials": handle}


def credential_source(
    uri: str,
    storage_options: Mapping[str, str] | None = None,
    credential_provider: object = None,
) -> str:
    """Where a lock on ``uri``, with these options, takes its credentials from, in words and
    never a secret: ``"AWS profile 'prod' in /home/me/.aws/credentials (static keys)"``,
    ``"azure-identity DefaultAzureCredential"``, ``"none needed"`` for local stores. Reads
    the configuration only: no request is sent."""
    cloud = cloud_of(uri)
    if cloud is None:
        return "none needed"
    resolved = resolve(uri, storage_options, credential_provider)
    if resolved["credentials"] is not None:
        return resolved["credentials"].source
    return _default_chain(cloud, _args.storage_options(storage_options) or {})[2]
