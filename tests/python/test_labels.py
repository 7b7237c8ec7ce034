"""Labels: who holds a lock and why, written into the lockfile by each acquisition, kept
through renewals, a remote's keep-alive and the release, shown by inspect, status, break and
the waiting line, and refused with a clear error (nothing written) when out of bounds."""

from __future__ import annotations

import json
import time

import pytest
from blob_lock import BlobLock, LockTimeout, break_lock, claim_memo, inspect, keep_alive
from conftest import BLOB_LOCK, cli

LABELS = {"run": "r-2026-11-24", "url": "https://ci.example/runs/42"}


def written_labels(backend, uri: str) -> dict[str, str] | None:
    return json.loads(backend.raw_get(uri)).get("labels")


def test_labels_are_written_renewed_kept_by_the_remote_and_the_release(shared_backend):
    uri = shared_backend.uri()
    opts = shared_backend.storage_options
    lock = BlobLock(uri, expire=3, storage_options=opts, labels=LABELS)
    assert lock.labels == LABELS
    with lock as held:
        assert written_labels(shared_backend, uri) == LABELS
        assert inspect(uri, storage_options=opts).labels == LABELS
        with keep_alive(uri, held.owner, storage_options=opts):
            seen = inspect(uri, storage_options=opts)
            assert seen.writer_name == "remote" and seen.labels == LABELS
        # Two heartbeats of the orchestrator (every second) after the remote's write.
        deadline = time.monotonic() + 60
        while (seen := inspect(uri, storage_options=opts)).write_count < 4:
            assert seen.labels == LABELS
            assert time.monotonic() < deadline, f"no renewals in 60 s: {seen}"
            time.sleep(0.05)
        assert seen.writer_name != "remote" and seen.labels == LABELS
    seen = inspect(uri, storage_options=opts)
    assert seen.state == "released" and seen.labels == LABELS
    assert "run=r-2026-11-24, url=https://ci.example/runs/42" in seen.describe()
    # The next holder writes its own labels, or none.
    with BlobLock(uri, storage_options=opts):
        assert "labels" not in json.loads(shared_backend.raw_get(uri))
        assert inspect(uri, storage_options=opts).labels == {}


def test_a_blind_mops_remote_write_drops_labels_and_the_next_renewal_restores_them(tmp_path):
    # mops's remote writer rewrites the whole lockfile with its own fields.
    uri = str(tmp_path / "lock")
    with BlobLock(uri, expire=3, labels=LABELS) as held:
        body = json.loads((tmp_path / "lock" / "lock.json").read_text())
        for key in ("labels", "token", "protocol"):
            body.pop(key)
        body["writer_name"] = "remote"
        scratch = tmp_path / "lock" / ".mops-write"
        scratch.write_text(json.dumps(body))
        scratch.replace(tmp_path / "lock" / "lock.json")
        assert inspect(uri).labels == {}
        deadline = time.monotonic() + 30
        while inspect(uri).labels != LABELS:
            assert time.monotonic() < deadline, "no renewal restored the labels"
            time.sleep(0.1)
        assert not held.lost


def test_mops_reads_a_lockfile_with_labels(tmp_path):
    from thds.mops.pure.core import lease

    with BlobLock(tmp_path / "lock", labels=LABELS) as held:
        assert lease.read_lease(str(tmp_path))["writer_id"] == held.owner


def test_claim_memo_writes_its_labels(tmp_path):
    memo = str(tmp_path / "memo")
    with claim_memo(memo, done=lambda: False, labels=LABELS) as claim:
        assert claim.launch
        assert inspect(f"{memo}/lock").labels == LABELS


def test_a_timeout_and_break_name_the_holders_labels(tmp_path):
    uri = str(tmp_path / "lock")
    with BlobLock(uri, labels=LABELS, raise_on_lost=False):
        with pytest.raises(LockTimeout, match="run=r-2026-11-24"):
            with BlobLock(uri, timeout=0.2):
                pass
        broken = break_lock(uri)
        assert broken.found is not None and broken.found.labels == LABELS


def test_the_cli_writes_labels_and_status_wait_and_break_show_them(tmp_path):
    uri = str(tmp_path / "lock")
    shown = cli(
        "run", uri, "--label", "run=r1", "-l", "url=http://x/1", "--",
        BLOB_LOCK, "status", uri, "--json",
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["labels"] == {"run": "r1", "url": "http://x/1"}
    with BlobLock(uri, labels={"run": "r2"}, raise_on_lost=False):
        status = cli("status", uri)
        assert "labels: run=r2" in status.stdout, status.stdout
        waited = cli("wait", uri, "--timeout", "0.5")
        assert waited.returncode == 75 and "run=r2" in waited.stderr, waited.stderr
        broke = cli("break", uri, "--yes")
        assert broke.returncode == 0 and "run=r2" in broke.stdout, broke.stdout


@pytest.mark.parametrize(
    "labels,error,match",
    [
        ({"run": 3}, TypeError, "label 'run' must be a string"),
        ({3: "x"}, TypeError, "label keys are strings"),
        ("run=x", TypeError, "labels must be a mapping"),
        ({"": "x"}, ValueError, "1 to 63"),
        ({"run id": "x"}, ValueError, "ASCII letters"),
        ({"run": "a\nb"}, ValueError, "control character"),
        ({"run": "v" * 1025}, ValueError, "more than 1024"),
        ({f"k{i}": "v" for i in range(33)}, ValueError, "more than 32"),
        ({f"k{i}": "v" * 1000 for i in range(8)}, ValueError, "more than 4096"),
    ],
)
def test_bad_labels_are_refused_and_nothing_is_written(tmp_path, labels, error, match):
    with pytest.raises(error, match=match):
        BlobLock(tmp_path / "lock", labels=labels)
    assert not (tmp_path / "lock").exists()


@pytest.mark.parametrize(
    "label,match",
    [("run", "takes KEY=VALUE"), ("=x", "takes KEY=VALUE"), ("a b=x", "ASCII letters")],
)
def test_the_cli_refuses_bad_labels_with_exit_2(tmp_path, label, match):
    done = cli("run", str(tmp_path / "lock"), "--label", label, "--", "true")
    assert done.returncode == 2 and match in done.stderr, done.stderr
    assert not (tmp_path / "lock").exists()


def test_the_cli_refuses_a_label_given_twice(tmp_path):
    done = cli("run", str(tmp_path / "lock"), "-l", "run=1", "-l", "run=2", "--", "true")
    assert done.returncode == 2 and "given twice" in done.stderr, done.stderr
