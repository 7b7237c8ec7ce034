"""The Python examples of README.md and of the documentation (docs/**/*.md) run as written,
against moto's S3 server as ``s3://bucket`` (through the ``AWS_*`` environment, as users
configure it). Each block marked ``<!-- readme-test -->`` runs in a namespace that supplies
the user's own functions (``launch_remote``, ``wait_for_result``, ...); a block marked
``<!-- readme-test: remote -->`` runs while an orchestrator holds its claim on the memo (its
lock, and a slot of the quota ``s3://bucket/quotas/gpu``), with that orchestrator's ``owner``
and the claim's ``handover``; the block marked ``<!-- readme-test: mops -->`` is a module a real
mops pipeline imports, the one marked ``<!-- readme-test: prefect -->`` a file of Prefect
flows run as ``python flows.py`` against a Prefect server and moto, and the one marked
``<!-- readme-test: joblib -->`` a script that tests/python/test_joblib_processes.py runs
in several processes at once. An example shown in several
places (the README's and the docs' home page's) runs once, under a test id that names every
place it appears."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from blob_lock import BlobSemaphore, LockState, claim_memo, inspect, keep_alive
from conftest import assert_first_token, micros_now

# Left out of `make test-fast` (-m "not slow"): the examples run against moto, Azurite and
# real processes.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"<!-- readme-test(?:: (\w+))? -->\n```python\n(.*?)```", re.S)


def marked_blocks() -> dict[tuple[str, str], list[str]]:
    """Each marked block, as (kind, code), with where it appears ("docs/usage.md:42"): an
    identical copy elsewhere adds a place, not a test."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in SOURCES:
        text = path.read_text()
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            place = f"{path.relative_to(ROOT)}:{line}"
            found.setdefault((m.group(1) or "plain", m.group(2)), []).append(place)
    return found


FOUND = marked_blocks()
# The mops, Prefect and joblib examples are modules their own tests run in real processes
# (below, tests/python/test_prefect_processes.py and test_joblib_processes.py).
BLOCKS = [
    (kind, code, "+".join(where))
    for (kind, code), where in FOUND.items()
    if kind not in ("mops", "prefect", "joblib")
]
MOPS_BLOCKS = [code for kind, code in FOUND if kind == "mops"]
PREFECT_BLOCKS = [code for kind, code in FOUND if kind == "prefect"]
MEMO = "s3://bucket/memo/abc"


def test_the_readme_has_examples_to_run():
    assert len(BLOCKS) >= 5, "the examples lost their readme-test markers"
    assert any("README.md:" in where for _, _, where in BLOCKS), (
        "README.md's own examples lost their readme-test markers"
    )


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


@pytest.mark.parametrize("kind,code,where", BLOCKS, ids=[where for _, _, where in BLOCKS])
def test_readme_example_runs(kind, code, where, s3_env):
    launched: list[tuple[str, str]] = []
    results: dict[str, object] = {}
    kept_uris: list[str] = []

    def launch_remote(memo_uri: str, handed: str) -> None:
        # The lock is held while the orchestrator launches; the remote "runs" at once.
        seen = inspect(f"{memo_uri}/lock")
        assert seen.state is LockState.OURS
        if handed != seen.owner:
            # Not the owner id: a claim's hand-over, which the remote keeps alive whole.
            with keep_alive(handed) as kept:
                assert kept.uri == f"{memo_uri}/lock" and kept.owner == seen.owner
                for uri in kept.uris:
                    assert inspect(uri, owner=seen.owner).state is LockState.OURS, uri
                kept_uris.extend(kept.uris)
        if "quota=" in code:  # the remote must be able to keep the slot as well as the lock
            assert len(kept_uris) == 2, f"the remote was handed {kept_uris or 'the owner alone'}"
        launched.append((memo_uri, handed))
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
        # The orchestrator's claim: the memo's lock and a slot of the docs' quota.
        quota = BlobSemaphore("s3://bucket/quotas/gpu", slots=64)
        with claim_memo(MEMO, done=lambda: False, quota=quota) as claim:
            assert claim.slot is not None
            namespace["owner"], namespace["handover"] = claim.owner, claim.handover
            exec(compile(code, f"{where} ({kind})", "exec"), namespace)
            assert not claim.lost
            kept = namespace.get("kept")
            if kept is not None:  # `with keep_alive(handover) as kept:` kept both, then stopped
                assert kept.uris == (claim.lock_uri, claim.slot.uri), kept
                assert not kept.lost, kept.lost_reason
            kept_uris.append(claim.slot.uri)
    else:
        exec(compile(code, f"{where} ({kind})", "exec"), namespace)
    if "launch_remote(" in code:
        assert len(launched) == 1, "the example launched its remote not exactly once"
    # Every example leaves its locks released (or never took one).
    for uri in (f"{MEMO}/lock", "s3://bucket/reports/lock", *kept_uris):
        assert inspect(uri).state in (LockState.RELEASED, LockState.UNLOCKED), uri


def test_the_readme_mops_example_runs_a_pipeline_on_blob_lock(tmp_path):
    """The "Using it with mops" module, run as docs/mops.md says, from a fresh environment
    without BLOB_LOCK_MOPS: the function runs in mops's remote, whose lease keep-alive went
    through blob-lock too (switched on by the environment install() set), and once only."""
    pytest.importorskip("thds.mops.pure")
    assert len(MOPS_BLOCKS) == 1, "the mops example lost its readme-test marker"
    (tmp_path / "pipeline.py").write_text(MOPS_BLOCKS[0])
    env = {k: v for k, v in os.environ.items() if k != "BLOB_LOCK_MOPS"}
    env["HOME"] = str(tmp_path / "home")  # the example's blob root is under ~
    (tmp_path / "home").mkdir()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # mops's `python`
    call = "import pipeline; print(pipeline.square(7))"
    since = micros_now()
    for _ in range(2):  # the second call finds the result and launches nothing
        done = subprocess.run(
            [sys.executable, "-c", call], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=180,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-5000:]
        assert done.stdout.split() == ["49"], done.stdout
    (lockfile,) = (tmp_path / "home" / ".mops-demo").rglob("lock/lock.json")
    body = json.loads(lockfile.read_text())
    assert (body["protocol"], body["writer_name"]) == ("cas", "remote"), body
    assert_first_token(body["token"], since)
    assert body["released_at"], body


def test_the_prefect_example_runs_as_written(moto_endpoint, tmp_path, prefect_api):
    """docs/prefect.md's flows.py, run as ``python flows.py`` twice (two workers, each with a
    Prefect home of its own) against one Prefect server and moto as ``s3://bucket``, the
    endpoint given in the environment as the page says: the second run finds the first's
    result in the bucket; the key's lock was taken twice and released each time, and its
    lockfile stays until pruned, as the page says (not within `clock_skew + expire` of its
    last acquisition: prune keeps it then)."""
    pytest.importorskip("prefect_aws")
    from blob_lock import list_locks, prune_locks
    from prefect_server import prefect_env
    from servers import boto3_s3

    assert len(PREFECT_BLOCKS) == 1, "the Prefect example lost its readme-test marker"
    (tmp_path / "flows.py").write_text(PREFECT_BLOCKS[0])
    client = boto3_s3(moto_endpoint)
    try:
        client.create_bucket(Bucket="bucket")
    except client.exceptions.BucketAlreadyOwnedByYou:
        pass
    aws = {
        "AWS_ENDPOINT_URL": moto_endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    runs = []
    since = micros_now()
    for worker in range(2):
        env = prefect_env(tmp_path / f"home-{worker}", prefect_api, **aws)
        env.pop("AWS_ENDPOINT", None)  # the page names AWS_ENDPOINT_URL only
        done = subprocess.run(
            [sys.executable, "flows.py"], cwd=tmp_path, env=env, capture_output=True,
            text=True, timeout=240,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-5000:]
        assert done.stdout.strip().splitlines()[-1] == "a model of size 3", done.stdout
        runs.append(done.stderr)
    assert "Cached" not in runs[0] and "Cached" in runs[1], runs[1][-3000:]
    results = client.list_objects_v2(Bucket="bucket", Prefix="prefect-results/")
    assert results.get("KeyCount", 0) >= 1, results  # the result, where every worker reads it
    s3 = {"aws_endpoint": moto_endpoint, "aws_allow_http": "true", "aws_region": "us-east-1"}
    s3 |= {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}
    (lock,) = list_locks("s3://bucket/prefect-locks", storage_options=s3)
    assert lock.state is LockState.RELEASED, lock
    assert_first_token(lock.token, since)  # the last acquisition's wall clock, at least
    assert "prefect.holder" in lock.labels
    # What the page says clears them, prune, keeps a lockfile taken moments ago (a delete
    # now could let the next token fall below its last) and deletes it later.
    pruned = list(prune_locks("s3://bucket/prefect-locks", older_than=0, storage_options=s3))
    assert [p.outcome for p in pruned] == ["too_recent"], pruned
