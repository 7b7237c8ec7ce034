"""AWS credentials as the AWS CLI finds them: keys in the storage options or
AWS_ACCESS_KEY_ID, then the profile named by AWS_PROFILE, else AWS_DEFAULT_PROFILE, else
``default``, in AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE (``~/.aws``), with the
profile's region and endpoint_url. With botocore
(``pip install 'blob-lock[aws]'``) its whole chain: static keys, assumed roles,
credential_process, SSO, web identity, container credentials, instance metadata. Without
it, the profile's static keys (``_aws_files``), else object_store's chain (web identity,
container credentials, instance metadata); a profile that needs more names the extra."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from blob_lock._credentials import _aws_files
from blob_lock._credentials._found import Found, FoundAtFirstFetch
from blob_lock.exceptions import CredentialsError

PROFILE_OPTION = "aws_profile"
_KEYS = ("aws_access_key_id", "access_key_id")
_UNSIGNED = ("aws_skip_signature", "skip_signature")
_REGIONS = ("aws_region", "region", "aws_default_region", "default_region")
_REGION_VARS = ("AWS_REGION", "AWS_DEFAULT_REGION")
_ENDPOINTS = ("aws_endpoint", "aws_endpoint_url", "endpoint", "endpoint_url")
_ENDPOINT_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")


def _where(profile: str | None) -> str:
    name = _aws_files.profile_name(profile)[0]
    return (
        "looked in the AWS_ACCESS_KEY_ID variables, the profile "
        f"{name!r} in {_aws_files.describe()} (keys, role_arn, credential_process, "
        "sso_session), web identity (AWS_WEB_IDENTITY_TOKEN_FILE), container credentials "
        "and the instance metadata service"
    )


def _flag(profile: str | None) -> str:
    """`` --profile NAME`` for the commands a message suggests, when a profile was named."""
    name, named = _aws_files.profile_name(profile)
    return f" --profile {name}" if named else ""


def _fix(profile: str | None) -> str:
    flag = _flag(profile)
    return (
        f"run `aws configure{flag}` (keys) or `aws sso login{flag}` (SSO), set "
        "AWS_PROFILE, or pass credentials in storage_options or credential_provider"
    )


def no_credentials(profile: str | None) -> CredentialsError:
    return CredentialsError(f"no AWS credentials found: {_where(profile)}; {_fix(profile)}")


def _hint(e: BaseException, profile: str | None) -> str:
    """What a botocore error while fetching means for the user, and what to do."""
    name = type(e).__name__
    flag = _flag(profile)
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


def place(
    options: dict[str, str],
    config: Mapping[str, Any],
    services: Mapping[str, Any],
    region: str | None = None,
    *,
    profile: str,
    config_file: str,
) -> None:
    """Puts a profile's region and endpoint into ``options``, where nothing stronger sets
    them, in botocore's order. ``config`` is the profile's settings (both files, as botocore
    scopes them), ``services`` every ``[services NAME]`` section by NAME. The region: the
    storage options, then AWS_REGION or AWS_DEFAULT_REGION, then ``region`` (a session's,
    which has read them already) or the profile's. The endpoint: the storage options, then
    AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the ``s3`` endpoint_url of the ``[services NAME]``
    section the profile names (a NAME with no section, or an empty one, is an error, as in
    botocore), the profile's ``s3`` section, its ``endpoint_url``; none of these but the
    options when ignore_configured_endpoint_urls is set. ``profile`` and ``config_file``
    are for the error. Plain ``http://`` endpoints are allowed wherever they come from (the
    store's configuration applies that rule, for every source)."""
    if not any(k in options for k in _REGIONS):
        if region is None and not any(os.environ.get(v) for v in _REGION_VARS):
            region = config.get("region") if isinstance(config.get("region"), str) else None
        if region:
            options["aws_region"] = region
    if any(k in options for k in _ENDPOINTS):
        return
    ignore = os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") or config.get(
        "ignore_configured_endpoint_urls"
    )
    if isinstance(ignore, str) and ignore.strip().lower() == "true":
        return
    if os.environ.get("AWS_ENDPOINT_URL_S3"):
        options["aws_endpoint"] = os.environ["AWS_ENDPOINT_URL_S3"]
        return
    if any(os.environ.get(v) for v in _ENDPOINT_VARS):
        return  # object_store reads it from the environment
    wanted = config.get("services")
    chosen: Mapping[str, Any] = {}
    if isinstance(wanted, str):
        section = services.get(wanted)
        if not isinstance(section, Mapping) or not section:
            # botocore's InvalidConfigError, which the AWS CLI shows: not passed over.
            raise CredentialsError(
                f"the AWS profile {profile!r} has services = {wanted}, but {config_file} has "
                f"no [services {wanted}] section with settings in it, and the AWS CLI refuses "
                "such a profile; add the section (with `s3 =` and an indented `endpoint_url = "
                "...`), or remove the profile's services line"
            )
        chosen = section
    for section in (chosen.get("s3"), config.get("s3")):
        if isinstance(section, Mapping) and section.get("endpoint_url"):
            options["aws_endpoint"] = str(section["endpoint_url"])
            return
    if isinstance(config.get("endpoint_url"), str) and config["endpoint_url"]:
        options["aws_endpoint"] = config["endpoint_url"]


def session_settings(session: Any, options: dict[str, str]) -> None:
    """A boto3 or botocore session's region and endpoint, into ``options`` where the caller
    gave none: a session made for a profile reaches the store that profile names."""
    inner: Any = getattr(session, "_session", session)  # boto3.Session wraps botocore's
    try:
        config = inner.get_scoped_config()
        region = inner.get_config_variable("region")
        services = inner.full_config.get("services", {})
        config_file = os.path.expanduser(str(inner.get_config_variable("config_file")))
        profile = inner.profile or "default"
    except Exception as e:
        raise CredentialsError(_hint(e, getattr(inner, "profile", None))) from None
    place(options, config, services, region or None, profile=profile, config_file=config_file)


def default(options: dict[str, str]) -> Found:
    """The storage options and credentials of the default chain, as the AWS CLI finds
    them. Without botocore, a profile's static keys, region and endpoint_url are read from
    the AWS files here; what needs more (SSO, roles, credential_process) names the extra."""
    profile = options.pop(PROFILE_OPTION, None)
    name, named = _aws_files.profile_name(profile)
    found = _aws_files.read(name)
    if found is None and named:
        raise CredentialsError(
            f"the AWS profile {name!r} does not exist in {_aws_files.describe()}; "
            f"run `aws configure --profile {name}` or name another profile"
        )
    place(
        options,
        found.settings if found else {},
        found.services if found else {},
        profile=name,
        config_file=_aws_files.paths()[1],
    )
    if any(k in options for k in _UNSIGNED):
        return Found(options, None, "none: requests are not signed (skip_signature)")
    if any(k in options for k in _KEYS):
        return Found(options, None, "AWS keys from the storage options")
    if "AWS_ACCESS_KEY_ID" in os.environ and profile is None:
        return Found(options, None, "AWS keys from AWS_ACCESS_KEY_ID")
    try:
        import botocore.exceptions  # type: ignore[import-untyped,import-not-found,unused-ignore]
        import botocore.session  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return _without_botocore(options, name, found)
    try:
        # The profile chosen above, by name: botocore alone would take AWS_DEFAULT_PROFILE
        # over AWS_PROFILE, where the AWS CLI v2 takes AWS_PROFILE.
        session = botocore.session.Session(profile=name if named else None)
    except Exception as e:
        raise CredentialsError(_hint(e, profile)) from None
    source = f"AWS profile {name!r} via botocore"

    def find() -> Callable[[], tuple[Any, ...]]:
        try:
            credentials = session.get_credentials()
        except botocore.exceptions.ProfileNotFound:
            raise CredentialsError(
                f"the AWS profile {name!r} does not exist in {_aws_files.describe()}; "
                f"run `aws configure --profile {name}` or name another profile"
            ) from None
        except Exception as e:
            raise CredentialsError(_hint(e, profile)) from None
        return fetcher(credentials, "", profile)[0]

    return Found(options, (FoundAtFirstFetch(find), source), source)


def _without_botocore(options: dict[str, str], name: str, found: Any) -> Found:
    """A default install: the profile's static keys, or object_store's chain (web identity,
    container credentials, instance metadata) when it has none."""
    files = _aws_files.describe()
    web_identity = os.environ.get("AWS_WEB_IDENTITY_TOKEN_FILE") and os.environ.get("AWS_ROLE_ARN")
    if found is not None and not web_identity:
        needs = _aws_files.needs_botocore(found)
        if needs is not None:
            key, what, path = needs
            raise CredentialsError(
                f"the AWS profile {name!r} uses {what} ({key} in {path}), which needs "
                "botocore: pip install 'blob-lock[aws]'"
            )
        keys = _aws_files.static_keys(found)
        if keys is not None:
            given, path = keys
            options.update(given)
            return Found(options, None, f"AWS profile {name!r} in {path} (static keys)")
    if found is None:
        why = f"which have no profile {name!r}"
    elif web_identity:
        why = "passed over for web identity (AWS_WEB_IDENTITY_TOKEN_FILE)"
    else:
        why = f"whose profile {name!r} has no keys"
    return Found(
        options,
        None,
        "object_store's chain: web identity, container credentials, instance metadata "
        "(pip install 'blob-lock[aws]' for SSO, roles and credential_process)",
        tried=f"looked in the storage options, AWS_ACCESS_KEY_ID and {files}, {why}",
        fix=_fix(name if name != "default" else None),
    )
