"""A stand-in for the Azure CLI on PATH (tests/python/test_credentials_azure.py writes an ``az``
that runs this): ``az account get-access-token ...`` prints a fresh token, an unsigned JWT
for https://storage.azure.com that Azurite's basic OAuth accepts, valid for
FAKE_AZ_LIFETIME seconds (default an hour). Each token is appended to the file
FAKE_AZ_TOKENS, so that a test can count the fetches and search its output for them."""

from __future__ import annotations

import base64
import json
import os
import sys
import time
import uuid


def b64(d):
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


if sys.argv[1:3] != ["account", "get-access-token"]:
    print(f"fake az: unsupported {sys.argv[1:]}", file=sys.stderr)
    sys.exit(2)
now = int(time.time())
life = int(os.environ.get("FAKE_AZ_LIFETIME", "3600"))
tenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"
claims = {
    "aud": "https://storage.azure.com",
    "iss": f"https://sts.windows.net/{tenant}/",
    "iat": now - 5,
    "nbf": now - 5,
    "exp": now + life,
    "oid": str(uuid.uuid4()),
    "tid": tenant,
}
token = f"{b64({'alg': 'none', 'typ': 'JWT'})}.{b64(claims)}.sig"
tokens = os.environ.get("FAKE_AZ_TOKENS")
if tokens:
    with open(tokens, "a") as f:
        f.write(token + "\n")
expires = time.strftime("%Y-%m-%d %H:%M:%S.000000", time.localtime(now + life))
print(
    json.dumps(
        {
            "accessToken": token,
            "expiresOn": expires,
            "expires_on": now + life,
            "subscription": "00000000-0000-0000-0000-000000000000",
            "tenant": tenant,
            "tokenType": "Bearer",
        }
    )
)
