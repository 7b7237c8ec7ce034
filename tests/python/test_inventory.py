"""Every lock under a prefix, as operators look for them: ``list_locks`` and ``blob-lock ls``
on every store (nested locks, states, labels, unreadable objects, pages, a pipe into
``head``), and ``prune_locks`` / ``blob-lock prune`` deleting only what is released long
enough and unchanged, asking first, refusing bad input with nothing deleted."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import uuid

import pytest
from blob_lock import (
    BlobLock,
    LockState,
    PruneOutcome,
    inspect,
    list_locks,
    prune_locks,
)
from conftest import BLOB_LOCK, cli

#: The expiry of the released locks the prune tests make: prune keeps a lockfile whose last
#: acquisition is more recent than ``clock_skew`` plus its ``expire`` (a create of it may
#: still be on its way), so with ``clock_skew=0`` they may be deleted a second later.
SHORT = 1.0


def plant(backend, prefix: str) -> dict[str, BlobLock]:
    """Under ``prefix``: a held lock, a released one with labels, a nested released one, and
    an object named lock.json that is no lockfile."""
    opts = backend.storage_options or None
    held = BlobLock(f"{prefix}/held", storage_options=opts, labels={"run": "r1"})
    held.acquire()
    with BlobLock(f"{prefix}/done", expire=SHORT, storage_options=opts, labels={"run": "r0"}):
        pass
    with BlobLock(f"{prefix}/deep/er/done", expire=SHORT, storage_options=opts):
        pass
    backend.raw_put(f"{prefix}/junk", b"not a lockfile")
    return {"held": held}


def test_list_locks_finds_every_lock_under_a_prefix_with_its_state(shared_backend):
    prefix = shared_backend.uri()
    opts = shared_backend.storage_options or None
    planted = plant(shared_backend, prefix)
    try:
        found = {s.uri: s for s in list_locks(prefix, storage_options=opts)}
        assert {u.removeprefix(prefix): s.state for u, s in found.items()} == {
            "/held": LockState.OURS,
            "/done": LockState.RELEASED,
            "/deep/er/done": LockState.RELEASED,
            "/junk": LockState.INVALID,
        }
        assert found[f"{prefix}/held"].labels == {"run": "r1"}
        assert found[f"{prefix}/done"].labels == {"run": "r0"}
        assert "not JSON" in found[f"{prefix}/junk"].problem
        assert [s.uri for s in list_locks(f"{prefix}/deep/", storage_options=opts)] == [
            f"{prefix}/deep/er/done"
        ]
        released = list_locks(prefix, state="released", storage_options=opts)
        assert sorted(s.uri for s in released) == [f"{prefix}/deep/er/done", f"{prefix}/done"]
        # Another process sees the holder as held, with its labels.
        listed = cli("ls", prefix, "--json", *shared_backend_options(shared_backend))
        assert listed.returncode == 0, listed.stderr
        rows = {json.loads(line)["uri"]: json.loads(line) for line in listed.stdout.splitlines()}
        assert rows[f"{prefix}/held"]["state"] == "held"
        assert rows[f"{prefix}/held"]["labels"] == {"run": "r1"}
        table = cli("ls", prefix, "--state", "held", *shared_backend_options(shared_backend))
        lines = table.stdout.splitlines()
        assert lines[0].split() == ["STATE", "TOKEN", "AGE", "EXPIRES", "HOLDER", "URI", "LABELS"]
        assert len(lines) == 2 and f"{prefix}/held" in lines[1] and "run=r1" in lines[1]
        everything = cli("ls", prefix, *shared_backend_options(shared_backend))
        assert everything.returncode == 0, everything.stderr
        assert_cells_start_under_their_headings(everything.stdout)
    finally:
        planted["held"].release()


def shared_backend_options(backend) -> list[str]:
    return [f"-o{k}={v}" for k, v in (backend.storage_options or {}).items()]


def assert_cells_start_under_their_headings(table: str) -> None:
    """``blob-lock ls``'s table as a terminal or ``| head`` shows it: every cell from STATE to
    URI starts under its heading, whatever its row (16-digit tokens, an unreadable object's
    problem); only LABELS, after the URI, is not aligned."""
    header, *rows = table.splitlines()
    assert rows, table
    starts = [header.index(name) for name in ("TOKEN", "AGE", "EXPIRES", "HOLDER", "URI")]
    for row in rows:
        for at in starts:
            assert row[at - 1] == " " and row[at] != " ", f"column {at} of {row!r}:\n{table}"


def test_prune_deletes_only_what_was_released_long_enough_and_keeps_the_rest(shared_backend):
    prefix = shared_backend.uri()
    opts = shared_backend.storage_options or None
    planted = plant(shared_backend, prefix)
    try:
        kept = list(prune_locks(prefix, older_than=3600, storage_options=opts))
        assert {p.uri.removeprefix(prefix): p.outcome for p in kept} == {
            "/held": PruneOutcome.HELD,
            "/done": PruneOutcome.TOO_RECENT,
            "/deep/er/done": PruneOutcome.TOO_RECENT,
            "/junk": PruneOutcome.UNREADABLE,
        }
        # Made moments ago: deleted now, a writer whose clock is behind ours (by up to the
        # clock_skew locks are told, 60 s by default) could start the next tokens below.
        young = list(prune_locks(prefix, older_than=0, dry_run=True, storage_options=opts))
        assert {p.uri: p.outcome for p in young}[f"{prefix}/done"] is PruneOutcome.TOO_RECENT
        # With clocks trusted to agree, they are old enough once no create of theirs may
        # still be on its way (their expire).
        time.sleep(SHORT * 1.1)
        skew = {"storage_options": opts, "clock_skew": 0}
        dry = list(prune_locks(prefix, older_than=0, dry_run=True, **skew))
        assert sorted(p.uri for p in dry if p.outcome is PruneOutcome.WOULD_DELETE) == [
            f"{prefix}/deep/er/done",
            f"{prefix}/done",
        ]
        assert inspect(f"{prefix}/done", storage_options=opts).state == "released"
        done = {p.uri: p for p in prune_locks(prefix, older_than=0, **skew)}
        assert done[f"{prefix}/done"].outcome is PruneOutcome.DELETED
        assert done[f"{prefix}/done"].found.labels == {"run": "r0"}
        assert done[f"{prefix}/held"].outcome is PruneOutcome.HELD
        assert inspect(f"{prefix}/done", storage_options=opts).state == "unlocked"
        assert inspect(f"{prefix}/held", storage_options=opts).state == "ours"
        assert not planted["held"].lost
        assert shared_backend.raw_get(f"{prefix}/junk") == b"not a lockfile"
        # Fencing survives the delete: the next lockfile's tokens start above the last.
        last = done[f"{prefix}/done"].found.token
        with BlobLock(f"{prefix}/done", storage_options=opts) as again:
            assert again.token > last + 1
    finally:
        planted["held"].release()


def test_prune_asks_first_and_deletes_nothing_without_a_yes(tmp_path):
    with BlobLock(tmp_path / "a", expire=SHORT):
        pass
    time.sleep(SHORT * 1.1)
    asked = cli("prune", str(tmp_path), "--older-than", "0", "--clock-skew", "0")
    assert asked.returncode == 3, asked.stderr
    assert f"would delete {tmp_path / 'a'}" in asked.stdout
    assert "pass --yes" in asked.stderr and "Fencing tokens survive" in asked.stderr
    assert inspect(tmp_path / "a").state == "released"
    done = cli("prune", str(tmp_path), "--older-than", "0s", "--clock-skew", "0", "--yes")
    assert done.returncode == 0, done.stderr
    assert "deleted 1 lockfiles" in done.stdout
    assert inspect(tmp_path / "a").state == "unlocked"


#: An hour less the moments a test takes, as ``blob-lock`` writes it (``59m58s``, ``1h00m``).
ABOUT_AN_HOUR = r"(1h00m|5[89]m\d\ds)\b"


def test_prune_that_finds_only_recent_locks_says_so_and_when_they_may_go(tmp_path):
    """An operator's ``prune --older-than 0`` right after a run: the lock it released is
    kept (deleted now, the next holder's tokens could start below its last), and prune says
    that, and how long until it may be deleted (its last acquisition plus ``--clock-skew``
    and its expire), not that nothing was released."""
    with BlobLock(tmp_path / "a", expire=SHORT):
        pass
    asked = cli("prune", str(tmp_path), "--older-than", "0", "--clock-skew", "1h")
    assert asked.returncode == 0, asked.stderr
    said = " ".join(asked.stdout.split())  # as read, not as wrapped
    assert "nothing released or expired" not in said
    assert f"nothing to delete yet under {tmp_path}: 1 lockfile too recent" in said
    assert "older than --clock-skew (1h00m) plus its expire" in said, said
    assert re.search(rf"first may be deleted in about {ABOUT_AN_HOUR}", said), said
    assert inspect(tmp_path / "a").state == "released"


def test_prune_waits_out_a_lock_that_was_just_released(tmp_path):
    with BlobLock(tmp_path / "a", expire=SHORT):
        pass
    kept = cli("prune", str(tmp_path), "--older-than", "1h", "--yes")
    assert kept.returncode == 0 and "deleted 0 lockfiles; kept 1 too recent" in kept.stdout
    said = " ".join(kept.stdout.split())
    assert re.search(rf"first may be deleted in about {ABOUT_AN_HOUR}", said), said
    time.sleep(1.1)
    done = cli("prune", str(tmp_path), "--older-than", "1", "--clock-skew", "0", "--yes")
    assert "deleted 1 lockfiles" in done.stdout, done.stdout


def test_a_listing_of_many_locks_on_s3_comes_in_pages_and_ends_quietly_in_head(moto_endpoint):
    from conftest import _s3_backend

    backend = _s3_backend(moto_endpoint)
    prefix = backend.uri()
    n = 230  # more than a page (200)
    for i in range(n):
        with backend.lock(f"{prefix}/l{i:03d}"):
            pass
    seen = list(list_locks(prefix, storage_options=backend.storage_options))
    assert len(seen) == n and len({s.uri for s in seen}) == n
    assert all(s.state is LockState.RELEASED for s in seen)
    line = " ".join([BLOB_LOCK, "ls", prefix, *shared_backend_options(backend)])
    piped = subprocess.run(
        f"{line} | head -n 3", shell=True, capture_output=True, text=True, timeout=120
    )
    assert piped.stderr == "" and len(piped.stdout.splitlines()) == 3, piped


@pytest.mark.parametrize(
    "args,match",
    [
        (["prune", "{tmp}"], "required: --older-than"),
        (["prune", "{tmp}", "--older-than", "soon"], "is not a duration"),
        (["prune", "{tmp}", "--older-than", "-5"], "is not a duration"),
        (["ls", "s3:/bucket/memo"], "two slashes"),
        (["ls", "ftp://host/memo"], "unknown scheme"),
        (["ls", "{tmp}/no-such-folder"], "no folder at"),
        (["prune", "{tmp}/no-such-folder", "--older-than", "1h", "--yes"], "no folder at"),
        (["ls", "{tmp}", "--state", "busy"], "invalid choice"),
    ],
    ids=str,
)
def test_bad_input_is_refused_with_exit_2_and_nothing_deleted(tmp_path, args, match):
    with BlobLock(tmp_path / "a"):
        pass
    done = cli(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert done.returncode == 2 and match in done.stderr, done.stderr
    assert inspect(tmp_path / "a").state == "released"


def test_bad_input_from_python_is_a_clear_error(tmp_path):
    with pytest.raises(TypeError, match="older_than must be seconds"):
        prune_locks(tmp_path, older_than=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="zero or more seconds"):
        prune_locks(tmp_path, older_than=-1)
    with pytest.raises(TypeError, match="prefix must be a str"):
        list_locks(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="state must be one of"):
        list_locks(tmp_path, state="busy")
    with pytest.raises(ValueError, match="no folder at"):
        list_locks(tmp_path / "nothing")


def test_prune_at_a_terminal_deletes_what_it_showed_and_nothing_that_came_after(tmp_path):
    import os
    import pty

    with BlobLock(tmp_path / "shown", expire=SHORT):
        pass
    time.sleep(SHORT * 1.1)
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [BLOB_LOCK, "prune", str(tmp_path), "--older-than", "0", "--clock-skew", "0"],
        stdin=terminal,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(terminal)
    try:
        # The question is on standard error; standard output has what it would delete.
        asked = ""
        while "[y/N]" not in asked:
            got = proc.stderr.read(1)
            assert got, f"prune ended (exit {proc.wait(60)}) without asking: {asked!r}"
            asked += got
        assert "Fencing tokens survive" in asked  # what pruning means for fencing, first
        with BlobLock(tmp_path / "later"):  # released while the question waits
            pass
        os.write(controller, b"y\n")
        out, _ = proc.communicate(timeout=120)
    finally:
        os.close(controller)
    assert proc.returncode == 0, out
    assert f"would delete {tmp_path / 'shown'}" in out and "later" not in out
    assert "deleted 1 lockfiles" in out, out
    assert inspect(tmp_path / "shown").state == "unlocked"
    assert inspect(tmp_path / "later").state == "released", "never shown, never deleted"


def test_ls_on_a_typo_in_the_endpoint_fails_at_once_naming_it():
    # A port bound and never listened on refuses connections, and no other test's server
    # can take it meanwhile (a port merely found free could be).
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    with closed:
        done = cli(
            "ls", "s3://bucket/memo", f"-oaws_endpoint=http://127.0.0.1:{port}",
            "-oaws_allow_http=true", "-oaws_access_key_id=x", "-oaws_secret_access_key=x",
            "-oaws_region=us-east-1",
        )  # fmt: skip
        assert done.returncode == 1, done.stderr
        assert f"127.0.0.1:{port}" in done.stderr and "check the endpoint" in done.stderr


def test_prune_only_deletes_the_locks_named_and_judges_the_rest(tmp_path):
    """``only``: what a person confirmed after a dry run is all that may be deleted."""
    for name in ("a", "b"):
        with BlobLock(tmp_path / name, expire=SHORT):
            pass
    time.sleep(SHORT * 1.1)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    pruned = prune_locks(tmp_path, older_than=0, only={a}, clock_skew=0)
    done = {p.uri: p.outcome for p in pruned}
    assert done[a] is PruneOutcome.DELETED and done[b] is PruneOutcome.WOULD_DELETE
    assert inspect(a).state == "unlocked" and inspect(b).state == "released"
    with pytest.raises(TypeError, match="only must be a collection of lock URIs"):
        prune_locks(tmp_path, older_than=0, only=a)  # a str is not a collection of URIs


def test_prune_deletes_only_at_the_version_of_its_own_write(recorder):
    """On S3 the delete carries If-Match on the ETag of prune's own write, signed into the
    request: a delete held up past prune's lease cannot land on a later holder's lockfile
    (docs/guarantees.md, "What prune deletes")."""
    opts = {
        "aws_endpoint": recorder.endpoint,
        "aws_access_key_id": "AKIAPRUNEKEY00000001",
        "aws_secret_access_key": "prune-secret-do-not-print",
        "aws_region": "us-east-1",
    }
    name = f"prune-{uuid.uuid4().hex}"
    prefix = f"s3://{recorder.bucket}/{name}"
    with BlobLock(f"{prefix}/a", expire=SHORT, storage_options=opts):
        pass
    time.sleep(SHORT * 1.1)
    done = list(prune_locks(prefix, older_than=0, storage_options=opts, clock_skew=0))
    assert [p.outcome for p in done] == [PruneOutcome.DELETED], [p.detail for p in done]
    assert list(list_locks(prefix, storage_options=opts)) == []
    deletes = [r for r in recorder.requests(f"{name}/a/lock.json") if r["method"] == "DELETE"]
    assert len(deletes) == 1, deletes
    headers = {k.lower(): v for k, v in deletes[0]["headers"].items()}
    assert headers.get("if-match"), f"an unconditional delete: {headers}"
    assert "if-match" in deletes[0]["url"].lower().split("x-amz-signedheaders=")[1].split("&")[0]


def test_prune_keeps_the_lockfiles_of_a_cas_store_whose_deletes_ignore_the_condition(s3rver):
    """s3rver takes If-Match on a delete and deletes anyway; trusted to run cas, its
    lockfiles are kept, with the reason, and the lock still works."""
    options = {**s3rver.options, "blob_lock_conditional_writes": "trust"}
    prefix = s3rver.uri(f"prune-{uuid.uuid4().hex}")
    with BlobLock(f"{prefix}/a", expire=SHORT, storage_options=options):
        pass
    time.sleep(SHORT * 1.1)
    done = list(prune_locks(prefix, older_than=0, storage_options=options, clock_skew=0))
    assert [p.outcome for p in done] == [PruneOutcome.NO_CONDITIONAL_DELETE]
    assert "ignores the condition of a conditional delete" in (done[0].detail or "")
    assert inspect(f"{prefix}/a", storage_options=options).state is LockState.RELEASED
    args = [f"-o{k}={v}" for k, v in options.items()]
    shown = cli("prune", prefix, "--older-than", "0", "--clock-skew", "0", "--yes", *args)
    assert shown.returncode == 0, shown.stderr
    assert f"kept {prefix}/a: no_conditional_delete, " in shown.stdout
    assert "kept 1 no conditional delete" in shown.stdout
    with BlobLock(f"{prefix}/a", storage_options=options) as held:
        assert held.token > done[0].found.token
