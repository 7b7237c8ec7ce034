"""The command line at a semaphore's prefix: ``run``, ``wait`` and ``break`` without
``--slots`` refuse there instead of taking, watching or breaking a plain lock nobody else
uses, at the cost of one read for a plain lock; ``status`` marks the slots that drain;
``BlobSemaphore``'s keywords and the words of ``slots`` and ``status``."""

from __future__ import annotations

import json
import sys

import pytest
from blob_lock import BlobLock, BlobSemaphore
from conftest import cli, proxied_moto


def test_run_wait_and_break_refuse_a_semaphores_prefix_without_slots(tmp_path):
    prefix = str(tmp_path / "quota")
    semaphore = BlobSemaphore(prefix, 1)
    held = semaphore.acquire()
    try:
        # run, at once or waiting: refused, naming the semaphore, its number and the command.
        for wait in (["--no-wait"], [], ["--timeout", "5"]):
            done = cli("run", *wait, prefix, "--", sys.executable, "-c", "print('ran')")
            assert done.returncode == 2, done.stdout + done.stderr
            assert "ran" not in done.stdout
            assert "semaphore of 1 slot" in done.stderr and prefix in done.stderr, done.stderr
            assert f"blob-lock run --slots 1 {prefix} -- " in done.stderr, done.stderr
        # wait: not "unlocked" while the only slot is held.
        done = cli("wait", prefix, "--timeout", "5")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "unlocked" not in done.stdout
        assert "semaphore of 1 slot" in done.stderr and f"blob-lock status {prefix}" in done.stderr
        # break: nothing to break at the prefix; the slot's own URI is named.
        done = cli("break", "--yes", prefix)
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"blob-lock break {prefix}/slot-" in done.stderr, done.stderr
        assert held.held and not held.lost
        # Nothing was written at the prefix: status still shows the semaphore.
        assert not (tmp_path / "quota" / "lock.json").exists()
        done = cli("status", prefix)
        assert done.stdout.startswith(f"{prefix}: semaphore of 1 slot, 1 held"), done.stdout
    finally:
        held.release()
    # With --slots, run takes a slot as before.
    done = cli("run", "--slots", "1", prefix, "--", sys.executable, "-c", "print('ran')")
    assert done.returncode == 0 and "ran" in done.stdout, done.stderr


def test_a_plain_lock_pays_one_read_of_semaphore_json_per_command(moto_endpoint):
    """status, run, wait and break on a plain lock: one GET of URI/semaphore.json, nothing
    else beside the lock's own requests."""
    proxy, options, root = proxied_moto(moto_endpoint)
    # Trusted: no command probes the store (its scratch writes are beside the lock too).
    options = {**options, "blob_lock_conditional_writes": "trust"}
    opts = [f"-o{k}={v}" for k, v in options.items()]
    uri = f"{root}/plain"
    holder = BlobLock(uri, storage_options=options, raise_on_lost=False)
    try:
        holder.acquire()  # for break to break
        for args in (
            ["status", uri],  # held: the lock's read, then semaphore.json's
            ["break", "--yes", uri],
            ["wait", "--timeout", "5", uri],
            ["run", "--no-wait", uri, "--", "true"],
            ["run", uri, "--", "true"],
        ):
            mark = proxy.snapshot()
            done = cli(args[0], *opts, *args[1:])  # before the "--" of run
            assert done.returncode == 0, (args, done.stdout + done.stderr)
            seen = proxy.since(mark)
            beside = [r for r in seen if not r.path.split("?")[0].endswith("/lock.json")]
            assert [(r.kind, r.path.split("?")[0].rsplit("/", 2)[1:]) for r in beside] == [
                ("read", ["plain", "semaphore.json"])
            ], (args, beside)
    finally:
        holder.release()
        proxy.close()


def test_status_marks_the_slots_at_or_above_a_lowered_number_draining(tmp_path):
    prefix = str(tmp_path / "quota")
    semaphore = BlobSemaphore(prefix, 3)
    held = [semaphore.acquire() for _ in range(3)]
    try:
        semaphore.set_slots(1)
        done = cli("status", prefix)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].startswith(f"{prefix}: semaphore of 1 slot, 3 held, 2 draining"), lines
        by_slot = {int(line.split("/slot-")[1].split(":")[0]): line for line in lines[1:]}
        assert "draining" not in by_slot[0], done.stdout
        assert "draining" in by_slot[1] and "draining" in by_slot[2], done.stdout
        seen = json.loads(cli("status", "--json", prefix).stdout)
        assert (seen["held"], seen["draining"]) == (3, 2), seen
        assert [(s["slot"], s["draining"]) for s in seen["slot_locks"]] == [
            (0, False),
            (1, True),
            (2, True),
        ], seen
    finally:
        for h in held:
            h.release()
    # Released, they drain no more.
    seen = json.loads(cli("status", "--json", prefix).stdout)
    assert seen["draining"] == 0 and not any(s["draining"] for s in seen["slot_locks"]), seen


def test_slots_and_status_say_one_slot_not_one_slots(tmp_path):
    prefix = str(tmp_path / "quota")
    done = cli("slots", prefix, "1")
    assert done.stdout.strip() == f"{prefix}: semaphore of 1 slot (new)", done.stdout
    done = cli("slots", prefix, "1")
    assert done.stdout.strip() == f"{prefix}: semaphore of 1 slot (unchanged)", done.stdout
    assert cli("status", prefix).stdout.startswith(f"{prefix}: semaphore of 1 slot, 0 held")
    done = cli("slots", prefix, "2")
    assert "semaphore of 2 slots (raised from 1," in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("given", "named", "meant"),
    [
        ({"slot": 3}, "slot", "slots"),
        ({"slots": 3, "expiry": 3}, "expiry", "expire"),
        ({"prefx": "p", "slots": 3}, "prefx", "prefix"),
    ],
)
def test_an_unknown_keyword_of_blob_semaphore_is_named_with_the_nearest(
    tmp_path, given, named, meant
):
    args = () if "prefx" in given else (str(tmp_path / "quota"),)
    with pytest.raises(TypeError) as info:
        BlobSemaphore(*args, **given)  # type: ignore[arg-type, call-arg]
    said = str(info.value)
    assert f'unknown option "{named}": did you mean "{meant}"?' in said, said
    assert "missing" not in said
    assert not (tmp_path / "quota").exists()


def test_status_shows_a_plain_lock_at_a_semaphores_prefix_and_then_the_semaphore(tmp_path):
    """A plain lock taken at a semaphore's prefix (by a `run` of an older version) does not
    hide the semaphore: status shows the lock, then the semaphore and its slots."""
    prefix = str(tmp_path / "quota")
    slot = BlobSemaphore(prefix, 2).acquire()
    plain = BlobLock(prefix)
    plain.acquire()
    try:
        done = cli("status", prefix)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert plain.owner in lines[0] and "held" in lines[0], done.stdout
        at = [i for i, line in enumerate(lines) if line.startswith(f"{prefix}: semaphore of 2")]
        assert at and at[0] > 0, done.stdout
        assert lines[at[0]].startswith(f"{prefix}: semaphore of 2 slots, 1 held"), done.stdout
        assert any(f"{prefix}/slot-" in line for line in lines[at[0] + 1 :]), done.stdout
        seen = json.loads(cli("status", "--json", prefix).stdout)
        assert seen["owner"] == plain.owner, seen
        here = seen["semaphore_here"]
        assert (here["semaphore"]["slots"], here["held"]) == (2, 1), here
    finally:
        plain.release()
        slot.release()
