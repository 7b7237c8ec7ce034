"""The AWS CLI's two files, ``~/.aws/config`` and ``~/.aws/credentials`` (or where
AWS_CONFIG_FILE and AWS_SHARED_CREDENTIALS_FILE point), read as the AWS CLI v2 (its bundled
botocore) reads them: the profile that AWS_PROFILE or AWS_DEFAULT_PROFILE names, its section
in each file (the credentials file's settings over the config file's), its nested sections
(``s3 =`` followed by indented keys), and the config file's ``[services NAME]`` sections.
A default install (no botocore) takes static keys, the region and ``endpoint_url`` from
here; botocore, where installed, fetches every other kind of credential. Read with the
standard library's configparser: the format is INI with indented continuation lines, which
is what configparser parses."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Any

from blob_lock.exceptions import CredentialsError

#: Keys of a profile that only botocore can turn into credentials, with what they are.
NEEDS_BOTOCORE = (
    ("role_arn", "an assumed role"),
    ("web_identity_token_file", "web identity"),
    ("sso_session", "SSO"),
    ("sso_start_url", "SSO"),
    ("sso_account_id", "SSO"),
    ("credential_process", "credential_process"),
    ("credential_source", "an assumed role"),
)


@dataclass(frozen=True)
class Profile:
    """One profile as the two files have it (either section may be empty)."""

    name: str
    config: dict[str, Any] = field(default_factory=dict)
    credentials: dict[str, Any] = field(default_factory=dict)
    #: Every ``[services NAME]`` section of the config file, by NAME: the profile's
    #: ``services = NAME`` picks one.
    services: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def settings(self) -> dict[str, Any]:
        """The profile's settings as botocore scopes them: the config file's section with
        the credentials file's over it (botocore merges the two files into one profile), so
        that a ``region`` or ``endpoint_url`` in the credentials file counts, and wins."""
        return {**self.config, **self.credentials}


def profile_name(option: str | None) -> tuple[str, bool]:
    """The profile to read, and whether one was named: the storage option ``aws_profile``,
    else AWS_PROFILE, else AWS_DEFAULT_PROFILE, else ``default``. This is the AWS CLI v2's
    order; botocore alone reads AWS_DEFAULT_PROFILE first, so it is given the name chosen
    here. An empty value counts as unset."""
    for given in (option, os.environ.get("AWS_PROFILE"), os.environ.get("AWS_DEFAULT_PROFILE")):
        if given:
            return given, True
    return "default", False


def paths() -> tuple[str, str]:
    """The credentials file and the config file, as the AWS CLI finds them."""
    return (
        os.path.expanduser(os.environ.get("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials")),
        os.path.expanduser(os.environ.get("AWS_CONFIG_FILE", "~/.aws/config")),
    )


def describe() -> str:
    """The two files, for messages."""
    credentials, config = paths()
    return f"{credentials} and {config}"


def _parse(path: str) -> dict[str, dict[str, Any]]:
    """Every section of ``path`` (none if it does not exist), nested values as dicts."""
    import configparser  # here: a lock on local files never reads these files

    parser = configparser.RawConfigParser(strict=False, default_section="\0none")
    try:
        read = parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError) as e:
        first = str(e).strip().splitlines()[0]
        raise CredentialsError(
            f"cannot read the AWS file {path}: {first}; fix it (`aws configure` rewrites it)"
        ) from None
    if not read:
        return {}
    return {
        name.strip(): {k: _value(v) for k, v in parser.items(name)} for name in parser.sections()
    }


def _value(raw: str) -> Any:
    """A value, or a nested section: ``s3 =`` followed by indented ``key = value`` lines."""
    if not raw.startswith("\n"):
        return raw.strip()
    nested = {}
    for line in raw.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            nested[key.strip().lower()] = value.strip()
    return nested


def read(name: str) -> Profile | None:
    """The profile ``name`` from both files; None if neither has it."""
    credentials_path, config_path = paths()
    config = _parse(config_path)
    credentials = _parse(credentials_path)
    section = None
    candidates = (f"profile {name}", "default") if name == "default" else (f"profile {name}",)
    for candidate in candidates:
        if candidate in config:
            section = config[candidate]
            break
    keys = credentials.get(name)
    if section is None and keys is None:
        return None
    return Profile(name, section or {}, keys or {}, services_sections(config))


def services_sections(config: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The ``[services NAME]`` sections of a parsed config file, by NAME, as botocore's
    configloader names them."""
    found = {}
    for section, values in config.items():
        if not section.startswith("services"):
            continue
        try:
            parts = shlex.split(section)
        except ValueError:
            continue
        if len(parts) == 2:
            found[parts[1]] = values
    return found


def needs_botocore(profile: Profile) -> tuple[str, str, str] | None:
    """``(key, what it is, file)`` of the first setting that only botocore can use, in the
    order botocore's chain meets them before static keys; None if the profile has none.
    credential_process comes after the credentials file's keys, as in botocore."""
    credentials_path, config_path = paths()
    files = ((profile.credentials, credentials_path), (profile.config, config_path))
    for key, what in NEEDS_BOTOCORE:
        if key == "credential_process" and "aws_access_key_id" in profile.credentials:
            continue
        for settings, path in files:
            if key in settings:
                return key, what, path
    return None


def static_keys(profile: Profile) -> tuple[dict[str, str], str] | None:
    """The profile's static keys as storage options, and the file they are in: the
    credentials file's first, as botocore takes them."""
    credentials_path, config_path = paths()
    for settings, path in ((profile.credentials, credentials_path), (profile.config, config_path)):
        key, secret = settings.get("aws_access_key_id"), settings.get("aws_secret_access_key")
        if isinstance(key, str) and isinstance(secret, str) and key and secret:
            out = {"aws_access_key_id": key, "aws_secret_access_key": secret}
            token = settings.get("aws_session_token")
            if isinstance(token, str) and token:
                out["aws_session_token"] = token
            return out, path
    return None
