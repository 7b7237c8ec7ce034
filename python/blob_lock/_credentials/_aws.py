"""AWS credentials as the AWS CLI finds them, through botocore (``pip install
'blob-lock[aws]'``): key variables, AWS_PROFILE or the default profile in
AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE (``~/.aws``), static keys, assumed roles,
credential_process, SSO, web identity, container credentials, instance metadata; with the
profile's region and endpoint_url. Keys given as storage options or in AWS_ACCESS_KEY_ID
(without a profile named) go to object_store unchanged."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from blob_lock._credentials._bridge import FoundAtFirstFetch
from blob_lock.exceptions import CredentialsError

PROFILE_OPTION = "aws_profile"
_KEYS = ("aws_access_key_id", "access_key_id", "aws_skip_signature", "skip_signature")
_REGIONS = ("aws_region", "region", "aws_default_region", "default_region")
_REGION_VARS = ("AWS_REGION", "AWS_DEFAULT_REGION")
_ENDPOINTS = ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url")
_ENDPOINT_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")


def _files() -> str:
    creds = os.environ.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials")
    config = os.environ.get("AWS_CONFIG_FILE", "~/.aws/config")
    return f"{creds} and {config}"


def _where(profile: str | None) -> str:
    name = profile or os.environ.get("AWS_PROFILE") or "default"
    return (
        "looked in the AWS_ACCESS_KEY_ID variables, the profile "
        f"{name!r} in {_files()} (keys, role_arn, credential_process, sso_session), web "
        "identity (AWS_WEB_IDENTITY_TOKEN_FILE), container credentials and the instance "
        "metadata service"
    )


def _fix(profile: str | None) -> str:
    name = profile or os.environ.get("AWS_PROFILE")
    flag = f" --profile {name}" if name else ""
    return (
        f"run `aws configure{flag}` (keys) or `aws sso login{flag}` (SSO), set "
        "AWS_PROFILE, or pass credentials in storage_options or credential_provider"
    )


def no_credentials(profile: str | None) -> CredentialsError:
    return CredentialsError(f"no AWS credentials found: {_where(profile)}; {_fix(profile)}")


def _hint(e: BaseException, profile: str | None) -> str:
    """What a botocore error while fetching means for the user, and what to do."""
    name = type(e).__name__
    flag = (
        f" --profile {profile or os.environ.get('AWS_PROFILE')}"
        if (profile or os.environ.get("AWS_PROFILE"))
        else ""
    )
    if "SSO" in name or "sso" in str(e).lower():
        return (
            f"the AWS SSO session has expired or was never started ({e}); run `aws sso login{flag}`"
        )
    if name == "CredentialRetrievalError":
        return f"the profile's credential_process failed ({e}); run it by hand to see why"
    return f"fetching AWS credentials failed ({name}: {e}); {_fix(profile)}"


def fetcher(
    credentials: Any, source: str, profile: str | None = None
) -> tuple[Callable[[], tuple[Any, ...]], str]:
    """The fetch function over botocore credentials (refreshable ones renew themselves)."""
    if credentials is None:
        raise no_credentials(profile)

    def fetch() -> tuple[Any, ...]:
        try:
            frozen = credentials.get_frozen_credentials()
        except Exception as e:
            raise CredentialsError(_hint(e, profile)) from None
        expiry = getattr(credentials, "_expiry_time", None)
        return (
            frozen.access_key,
            frozen.secret_key,
            frozen.token,
            expiry.timestamp() if expiry is not None else None,
        )

    method = getattr(credentials, "method", None)
    return fetch, f"{source} ({method})" if method else source


def default(options: dict[str, str]) -> tuple[dict[str, str], Any | None, str]:
    """The storage options and credentials of the default chain: ``(options, (fetch,
    source) or None, source)``. None leaves the credentials to object_store."""
    profile = options.pop(PROFILE_OPTION, None)
    explicit = any(k in options for k in _KEYS) or (
        "AWS_ACCESS_KEY_ID" in os.environ and profile is None
    )
    if explicit:
        where = "storage options" if any(k in options for k in _KEYS) else "AWS_ACCESS_KEY_ID"
        return options, None, f"AWS keys from {where} (object_store)"
    try:
        import botocore.exceptions  # type: ignore[import-untyped]  # an extra, untyped
        import botocore.session  # type: ignore[import-untyped]
    except ImportError:
        if profile or os.environ.get("AWS_PROFILE"):
            raise CredentialsError(
                f"reading the AWS profile {profile or os.environ['AWS_PROFILE']!r} needs "
                "botocore: pip install 'blob-lock[aws]'"
            ) from None
        return (
            options,
            None,
            "object_store's chain (pip install 'blob-lock[aws]' for profiles and SSO)",
        )
    try:
        session = botocore.session.Session(profile=profile)
        region = session.get_config_variable("region")
        scoped = session.get_scoped_config()
    except botocore.exceptions.ProfileNotFound:
        name = profile or os.environ.get("AWS_PROFILE")
        raise CredentialsError(
            f"the AWS profile {name!r} does not exist in {_files()}; "
            f"run `aws configure --profile {name}` or name another profile"
        ) from None
    except Exception as e:
        raise CredentialsError(_hint(e, profile)) from None
    if (
        region
        and not any(k in options for k in _REGIONS)
        and not any(v in os.environ for v in _REGION_VARS)
    ):
        options["aws_region"] = region
    if not any(k in options for k in _ENDPOINTS) and not any(
        v in os.environ for v in _ENDPOINT_VARS
    ):
        s3 = scoped.get("s3")
        endpoint = (
            os.environ.get("AWS_ENDPOINT_URL_S3")
            or (s3.get("endpoint_url") if isinstance(s3, dict) else None)
            or scoped.get("endpoint_url")
        )
        if endpoint:
            options["aws_endpoint"] = endpoint
            if endpoint.startswith("http://"):
                options.setdefault("aws_allow_http", "true")
    name = profile or os.environ.get("AWS_PROFILE") or "default"
    source = f"AWS profile {name!r} via botocore"

    def find() -> Callable[[], tuple[Any, ...]]:
        try:
            credentials = session.get_credentials()
        except Exception as e:
            raise CredentialsError(_hint(e, profile)) from None
        return fetcher(credentials, "", profile)[0]

    return options, (FoundAtFirstFetch(find), source), source
