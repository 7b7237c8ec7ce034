"""Azure credentials as the Azure tools find them: a connection string or key given
(object_store), else azure-identity's DefaultAzureCredential (``pip install
'blob-lock[azure]'``: environment, workload identity, managed identity, Azure CLI, ...),
else the Azure CLI's `az login` when `az` is on PATH, else managed identity (object_store)."""

from __future__ import annotations

import os
import shutil
import threading
from typing import Any

from blob_lock._credentials._found import AZURE_SCOPE, Found
from blob_lock.exceptions import CredentialsError

_EXPLICIT_OPTIONS = (
    "azure_storage_account_key", "azure_storage_access_key", "azure_storage_master_key",
    "master_key", "account_key", "access_key", "azure_storage_sas_key",
    "azure_storage_sas_token", "sas_key", "sas_token", "azure_storage_token", "bearer_token",
    "token", "azure_storage_client_secret", "azure_client_secret", "client_secret",
    "azure_storage_use_emulator", "use_emulator", "azure_use_azure_cli", "use_azure_cli",
    "azure_skip_signature", "skip_signature", "azure_federated_token_file",
    "federated_token_file", "azure_storage_connection_string", "azure_credential_type",
)  # fmt: skip
_default: Any = None
_guard = threading.Lock()


def explicit(options: dict[str, str]) -> bool:
    return _given(options) is not None


def _given(options: dict[str, str]) -> str | None:
    """Where the credentials given come from, named as the user wrote them: the storage
    option, else the variable (a 403 then names what to fix), or None."""
    for k in options:
        if k in _EXPLICIT_OPTIONS:
            return f"the storage option {k}"
    for k in os.environ:
        if k.startswith("AZURE_") and k.lower() in _EXPLICIT_OPTIONS:
            return k
    return None


def _identity() -> Any:
    global _default
    from azure.identity import DefaultAzureCredential  # type: ignore[import-not-found,unused-ignore]  # an extra

    with _guard:
        if _default is None:
            _default = DefaultAzureCredential()
        return _default


_TRIED = (
    "looked in the storage options and the AZURE_* variables (no key, SAS, token, "
    "connection string or service principal)"
)
_FIX = (
    "run `az login`, give an account key, SAS or connection string "
    "(AZURE_STORAGE_CONNECTION_STRING), or pip install 'blob-lock[azure]' for "
    "DefaultAzureCredential's whole chain"
)


def default(options: dict[str, str]) -> Found:
    """As ``_aws.default``, for Azure."""
    given = _given(options)
    if given is not None:
        what = "an Azure connection string" if "connection_string" in given.lower() else None
        return Found(
            options, None, f"{what or 'Azure credentials'} given in {given} (object_store)"
        )
    try:
        credential = _identity()
    except ImportError:
        if shutil.which("az"):
            options["azure_use_azure_cli"] = "true"
            return Found(
                options,
                None,
                "the Azure CLI (`az login`), through object_store",
                tried=_TRIED + "; azure-identity is not installed",
                fix=_FIX,
            )
        return Found(
            options,
            None,
            "managed identity (object_store; pip install 'blob-lock[azure]' for the full chain)",
            tried=_TRIED + "; azure-identity is not installed and `az` is not on PATH",
            fix=_FIX,
        )

    def fetch() -> tuple[Any, ...]:
        try:
            token = credential.get_token(AZURE_SCOPE)
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise CredentialsError(
                "no Azure credentials found: DefaultAzureCredential looked in the environment "
                "(AZURE_CLIENT_ID/SECRET/TENANT_ID), workload identity, managed identity and "
                f"the Azure CLI ({first}); run `az login`, or give an account key, SAS or "
                "connection string (AZURE_STORAGE_CONNECTION_STRING)"
            ) from None
        return ("token", token.token, float(token.expires_on))

    source = "azure-identity DefaultAzureCredential"
    return Found(options, (fetch, source), source)
