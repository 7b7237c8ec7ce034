"""The README's Python examples run as written, against moto's S3 server as ``s3://bucket``
(through the ``AWS_*`` environment, as users configure it). Each block marked
``<!-- readme-test -->`` runs in a namespace that supplies the user's own functions
(``launch_remote``, ``wait_for_result``, ...); a block marked ``<!-- readme-test: remote -->``
runs while an orchestrator holds its lock, with that orchestrator's ``owner``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from blob_lock import BlobLock, LockState, inspect

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"<!-- readme-test(?:: (\w+))? -->\n```python\n(.*?)```", re.S)
BLOCKS = [(m.group(1) or "plain", m.group(2)) for m in BLOCK.finditer(README.read_text())]
MEMO = "s3://bucket/memo/abc"


def test_the_readme_has_examples_to_run():
    assert len(BLOCKS) >= 5, "the README's examples lost their readme-test markers"


@pytest.fixture
def s3_env(moto_endpoint, monkeypatch):
    import boto3

    for key, value in {
        "AWS_ENDPOINT": moto_endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(key, value)
    client = boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    try:
        client.create_bucket(Bucket="bucket")
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass


@pytest.mark.parametrize("kind,code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(kind, code, s3_env):
    launched: list[tuple[str, str]] = []
    results: dict[str, object] = {}

    def launch_remote(memo_uri: str, owner: str) -> None:
        # The lock is held while the orchestrator launches; the remote "runs" at once.
        assert inspect(f"{memo_uri}/lock").state is LockState.OURS
        launched.append((memo_uri, owner))
        results[memo_uri] = "result"

    namespace = {
        "__name__": "readme_example",
        "memo_uri": MEMO,
        "launch_remote": launch_remote,
        "wait_for_result": lambda memo_uri: results[memo_uri],
        "run_the_invocation": lambda: b"result",
        "result_exists": lambda memo_uri: memo_uri in results,
        "read_result": lambda memo_uri: results[memo_uri],
    }
    if kind == "remote":
        with BlobLock(f"{MEMO}/lock") as orchestrator:
            namespace["owner"] = orchestrator.owner
            exec(compile(code, f"README block ({kind})", "exec"), namespace)
            assert not orchestrator.lost
    else:
        exec(compile(code, f"README block ({kind})", "exec"), namespace)
    if "launch_remote(" in code:
        assert len(launched) == 1, "the example launched its remote not exactly once"
    # Every example leaves its locks released (or never took one).
    for uri in (f"{MEMO}/lock", "s3://bucket/reports/lock"):
        assert inspect(uri).state in (LockState.RELEASED, LockState.UNLOCKED), uri
