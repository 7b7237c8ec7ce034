"""An orchestrator and the remote it launches, as real processes for
tests/python/test_launch_gap.py, written with claim_memo, hand_off and write_once as the README
tells users to.

orchestrate MEMO OPTIONS_JSON EVENTS EXPIRE GRACE REMOTE_DELAY
    Claims the memo; when it must launch, records the launch, starts the remote detached
    (it starts working only after REMOTE_DELAY seconds, as a queued job does), hands the
    lock off with GRACE seconds of grace (none when GRACE is 0), says "handed" on stdout,
    and waits for the result. Says "done" with whether it launched.
remote MEMO OPTIONS_JSON EVENTS OWNER DELAY
    Sleeps DELAY, then keeps the lock alive as OWNER (running anyway if that fails, as a
    careless remote would), works a moment, and publishes the result with write_once.

EVENTS is a local file of JSON lines that every role appends to, so the test can count
launches and see what each remote met. The result is `<memo>/result` in the store.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

from blob_lock import LockError, claim_memo, keep_alive, write_once

AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


def say(**kw) -> None:
    print(json.dumps(kw), flush=True)


def record(events: str, **kw) -> None:
    # One write of one short line to a file opened for appending: lines never interleave.
    with open(events, "a") as f:
        f.write(json.dumps({"pid": os.getpid(), **kw}) + "\n")


def read_result(uri: str, options: dict) -> bytes | None:
    """The object at ``uri``, or None, read with the SDK a user would use."""
    scheme, _, rest = uri.partition("://")
    if not rest:
        return open(uri, "rb").read() if os.path.exists(uri) else None
    bucket, _, key = rest.partition("/")
    if scheme == "s3":
        import boto3

        s3 = boto3.client(
            "s3",
            endpoint_url=options["aws_endpoint"],
            region_name=options["aws_region"],
            aws_access_key_id=options["aws_access_key_id"],
            aws_secret_access_key=options["aws_secret_access_key"],
        )
        try:
            return s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except s3.exceptions.NoSuchKey:
            return None
    if scheme == "az":
        from azure.core.exceptions import ResourceNotFoundError
        from azure.storage.blob import BlobClient

        url = os.environ["AZURITE_BLOB_STORAGE_URL"]
        conn = (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
            f"AccountKey={AZURITE_KEY};BlobEndpoint={url}/{AZURITE_ACCOUNT};"
        )
        try:
            return BlobClient.from_connection_string(conn, bucket, key).download_blob().readall()
        except ResourceNotFoundError:
            return None
    raise ValueError(f"no result reader for {uri}")


def orchestrate(memo: str, options: dict, events: str, expire: float, grace: float, delay: float):
    result = f"{memo}/result"
    opts = options or None
    with claim_memo(
        memo, done=lambda: read_result(result, options) is not None, expire=expire, poll=0.1,
        storage_options=opts, timeout=120,
    ) as claim:  # fmt: skip
        if claim.launch:
            record(events, event="launch", owner=claim.owner, token=claim.token)
            remote = [sys.executable, __file__, "remote", memo, json.dumps(options), events]
            subprocess.Popen(
                [*remote, claim.owner, str(delay)],
                start_new_session=True,  # a job elsewhere: it outlives us
                stdout=subprocess.DEVNULL,
                stderr=open(f"{events}.{uuid.uuid4().hex[:6]}.remote.log", "w"),
            )
            if grace > 0:
                claim.hand_off(grace)
            say(event="handed", owner=claim.owner)
            assert claim.wait_done(timeout=120)
    found = read_result(result, options)
    say(event="done", launched=claim.launch, result=found.decode() if found else None)


def remote(memo: str, options: dict, events: str, owner: str, delay: float) -> None:
    time.sleep(delay)  # queued, pulling an image
    opts = options or None
    try:
        kept = keep_alive(f"{memo}/lock", owner, storage_options=opts)
        record(events, event="kept", owner=owner, token=kept.token)
    except LockError as e:
        kept = None
        record(events, event="not kept", owner=owner, error=type(e).__name__, why=str(e))
    time.sleep(0.5)  # the work
    wrote = write_once(f"{memo}/result", owner.encode(), storage_options=opts)
    record(events, event="published" if wrote else "too late", owner=owner)
    if kept is not None:
        kept.stop()


def main() -> None:
    role, memo, options, events = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    if role == "orchestrate":
        orchestrate(memo, options, events, *map(float, sys.argv[5:8]))
    else:
        remote(memo, options, events, sys.argv[5], float(sys.argv[6]))


if __name__ == "__main__":
    main()
