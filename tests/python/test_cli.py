"""The blob-lock command, run as users run it."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from blob_lock import BlobLock

# The installed console script, beside this interpreter (the venv need not be activated).
_beside = Path(sys.executable).parent / "blob-lock"
BLOB_LOCK = str(_beside) if _beside.exists() else shutil.which("blob-lock") or "blob-lock"


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([BLOB_LOCK, *args], capture_output=True, text=True, timeout=timeout)


def test_run_holds_the_lock_and_passes_the_exit_code(tmp_path):
    uri = str(tmp_path / "lock")
    # The command checks from inside that the lock is held, then exits 7.
    probe = (
        "import sys; from blob_lock import BlobLock; "
        f"sys.exit(7 if not BlobLock({uri!r}).try_acquire() else 1)"
    )
    done = run("run", uri, "--", sys.executable, "-c", probe)
    assert done.returncode == 7, done.stderr
    body = json.loads((tmp_path / "lock" / "lock.json").read_text())
    assert body["released_at"], "released after the command"


def test_run_gives_up_after_timeout_with_75(tmp_path):
    uri = str(tmp_path / "lock")
    with BlobLock(uri):
        done = run("run", uri, "--timeout", "0.5", "--", "true")
    assert done.returncode == 75
    assert "timed out" in done.stderr


def test_run_reports_bad_input(tmp_path):
    assert run("run", "ftp://x/y", "--", "true").returncode == 2
    missing = run("run", str(tmp_path / "l"), "--", "/no/such/program")
    assert missing.returncode == 127 and "cannot run" in missing.stderr
    assert run("run", str(tmp_path / "l")).returncode == 2


# A command that reports which signal reached it, then exits 3.
TRAPS = """
import pathlib, signal, sys, time
mark = pathlib.Path(sys.argv[1])
def bye(signum, frame):
    mark.write_text(signal.Signals(signum).name)
    sys.exit(3)
signal.signal(signal.SIGTERM, bye)
signal.signal(signal.SIGINT, bye)
print("ready", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_run_passes_signals_on_then_releases(tmp_path, sig):
    uri, mark = str(tmp_path / "lock"), tmp_path / "mark"
    proc = subprocess.Popen(
        [BLOB_LOCK, "run", uri, "--", sys.executable, "-c", TRAPS, str(mark)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(sig)
    assert proc.wait(30) == 3, proc.stderr.read()
    assert mark.read_text() == sig.name
    assert json.loads((tmp_path / "lock" / "lock.json").read_text())["released_at"]


def test_run_reports_a_command_ended_by_a_signal_as_128_plus_n(tmp_path):
    suicide = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    done = run("run", str(tmp_path / "lock"), "--", sys.executable, "-c", suicide)
    assert done.returncode == 128 + signal.SIGKILL
    assert json.loads((tmp_path / "lock" / "lock.json").read_text())["released_at"]


def test_a_signal_while_waiting_for_the_lock_ends_the_wait(tmp_path):
    uri = str(tmp_path / "lock")
    with BlobLock(uri) as held:
        proc = subprocess.Popen(
            [BLOB_LOCK, "run", "-v", uri, "--", "true"],
            stderr=subprocess.PIPE,
            text=True,
        )
        for line in proc.stderr:  # -v logs each new holder it waits for
            if "waiting" in line:
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 128 + signal.SIGTERM
        assert held.held and not held.lost


def test_run_verbose_logs_each_transition_of_the_lifecycle(tmp_path):
    done = run("run", "-v", str(tmp_path / "lock"), "--", "true")
    assert done.returncode == 0, done.stderr
    steps = re.findall(r"owner \w+: (\w+) -> (\w+)", done.stderr)
    assert steps == [
        ("new", "acquiring"),
        ("acquiring", "held"),
        ("held", "releasing"),
        ("releasing", "released"),
    ], done.stderr


# -- status, wait, break, doctor -------------------------------------------------------


def options_args(backend) -> list[str]:
    return [f"-o{k}={v}" for k, v in backend.storage_options.items()]


@pytest.mark.parametrize("command", ["run", "status", "wait", "break", "doctor"])
def test_every_command_has_help_with_its_exit_codes(command):
    done = run(command, "--help")
    assert done.returncode == 0, done.stderr
    assert "exit" in done.stdout.lower(), done.stdout
    assert "URI" in done.stdout


def test_status_shows_each_state_as_text_and_json(shared_backend):
    uri, opts = shared_backend.uri(), options_args(shared_backend)
    done = run("status", uri, *opts, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["state"] == "unlocked"
    with shared_backend.lock(uri, expire=30) as held:
        done = run("status", uri, *opts, "--json")
        seen = json.loads(done.stdout)
        assert (seen["state"], seen["owner"], seen["token"]) == ("held", held.owner, held.token)
        assert 0 < seen["expires_in"] <= 30
        text = run("status", uri, *opts).stdout
        assert "held" in text and held.owner in text and f"token {held.token}" in text
    done = run("status", uri, *opts, "--json")
    assert json.loads(done.stdout)["state"] == "released"


def test_run_no_wait_gives_up_at_once_naming_the_holder(tmp_path):
    uri = str(tmp_path / "lock")
    with BlobLock(uri) as held:
        done = run("run", "--no-wait", uri, "--", "true")
        assert done.returncode == 75
        assert held.owner in done.stderr
    assert run("run", "--no-wait", uri, "--", "true").returncode == 0


def test_wait_returns_when_the_holder_releases_and_times_out_otherwise(tmp_path):
    uri = str(tmp_path / "lock")
    lock = BlobLock(uri, expire=30)
    lock.acquire()
    assert run("wait", uri, "--timeout", "0.5").returncode == 75
    waiter = subprocess.Popen([BLOB_LOCK, "wait", uri], stdout=subprocess.PIPE, text=True)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            waiter.wait(1.5)  # still waiting: the lock is held and renewed
        lock.release()
        assert waiter.wait(60) == 0
        assert "released" in waiter.stdout.read()
    finally:
        waiter.kill()
        waiter.wait()
    # wait took nothing: the lock is free for anyone.
    assert BlobLock(uri).try_acquire()


@pytest.mark.parametrize("stderr", ["broken", "closed"])
def test_a_wait_with_nobody_reading_its_progress_still_runs_the_command(tmp_path, stderr):
    """``blob-lock run`` with standard error a pipe nobody reads (``2>&1 | head`` after
    head exited), or closed: the progress lines fail or have nowhere to go, and the command
    still runs when the lock comes free."""
    import os

    uri = str(tmp_path / "lock")
    out = tmp_path / "ran"
    lock = BlobLock(uri, expire=30)
    lock.acquire()
    read, write = os.pipe()
    os.close(read)  # every write to standard error now fails with EPIPE
    cmd = [BLOB_LOCK, "run", uri, "--", "touch", str(out)]
    if stderr == "broken":
        runner = subprocess.Popen(cmd, stderr=write)
    else:
        runner = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, preexec_fn=lambda: os.close(2))
    os.close(write)
    try:
        # Long enough for its first progress line (due a second into the wait) to fail.
        # Not a synchronisation: standard error, the only thing it writes, is broken or
        # closed, so there is no event to wait for; however slow the machine, the command
        # must still be waiting here and run once the lock is released.
        time.sleep(2.5)
        assert runner.poll() is None, "still waiting for the lock"
        lock.release()
        assert runner.wait(60) == 0
        assert out.exists()
    finally:
        runner.kill()
        runner.wait()


def test_wait_shows_the_holder_on_a_terminal_and_in_lines_elsewhere(tmp_path):
    import os
    import pty

    uri = str(tmp_path / "lock")
    with BlobLock(uri, expire=30) as held:
        # No terminal: a line naming the holder (the first after a second).
        done = run("wait", uri, "--timeout", "2.5")
        assert done.returncode == 75
        # What it waited so far and the most it waits, never a promise of when it ends.
        assert re.search(r"waited \d+s of at most 2\.5s for .*: held", done.stderr), done.stderr
        assert held.owner in done.stderr
        # A terminal: one line rewritten in place.
        leader, follower = pty.openpty()
        try:
            waiter = subprocess.Popen(
                [BLOB_LOCK, "wait", uri, "--timeout", "3.5"], stderr=follower, stdout=follower
            )
            os.close(follower)
            out = b""
            while True:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # the terminal closed with the waiter
                    break
                if not chunk:
                    break
                out += chunk
            assert waiter.wait(60) == 75
        finally:
            os.close(leader)
    text = out.decode(errors="replace")
    assert text.count("\r\x1b[K") >= 2, text  # rewritten in place at least twice
    assert held.owner in text


def test_break_asks_refuses_without_a_terminal_and_the_holder_learns(tmp_path):
    uri = str(tmp_path / "lock")
    holder = BlobLock(uri, expire=3, raise_on_lost=False)
    holder.acquire()
    refused = subprocess.run(
        [BLOB_LOCK, "break", uri], stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    assert refused.returncode == 3
    assert "--yes" in refused.stderr
    assert not holder.lost and BlobLock(uri).try_acquire() is False
    broke = run("break", uri, "--yes")
    assert broke.returncode == 0, broke.stderr
    assert holder.owner in broke.stdout and f"token {holder.token}" in broke.stdout
    # The holder learns at its next heartbeat (every second here).
    deadline = time.monotonic() + 60
    while not holder.lost and time.monotonic() < deadline:
        time.sleep(0.05)
    assert holder.lost, "the holder did not learn of the break in a minute"
    assert "released" in (holder.lost_reason or ""), holder.lost_reason
    assert BlobLock(uri).try_acquire()  # free for the next owner
    assert run("break", str(tmp_path / "never"), "--yes").stdout.startswith("nothing to break")


def test_doctor_passes_real_stores(shared_backend):
    done = run("doctor", shared_backend.uri(), *options_args(shared_backend), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["cas_safe"] and all(p["ok"] for p in report["probes"]), report
    assert {p["name"] for p in report["probes"]} >= {"create again", "update with a stale version"}


def test_doctor_finds_an_s3_store_that_ignores_conditional_headers(moto_endpoint, tmp_path):
    from urllib.parse import urlsplit

    from conftest import _s3_backend
    from fault_proxy import FaultProxy

    backend = _s3_backend(moto_endpoint)
    where = urlsplit(moto_endpoint)
    proxy = FaultProxy(where.hostname, where.port)
    try:
        proxy.strip_conditions()
        opts = [a for a in options_args(backend) if not a.startswith("-oaws_endpoint=")]
        done = run("doctor", backend.uri(), *opts, f"-oaws_endpoint={proxy.url}")
        assert proxy.conditions_stripped >= 2, "the proxy never saw a conditional header"
    finally:
        proxy.close()
    assert done.returncode == 3, done.stdout + done.stderr
    assert "If-None-Match" in done.stdout and "If-Match" in done.stdout
    assert "cas is NOT safe" in done.stdout


def test_doctor_names_a_missing_bucket(moto_endpoint):
    from conftest import _s3_backend

    backend = _s3_backend(moto_endpoint)
    opts = options_args(backend)
    done = run("doctor", "s3://no-such-bucket-here/x", *opts)
    assert done.returncode == 1
    assert "bucket" in done.stderr and "create it first" in done.stderr
    # The store's XML answer as its code and message in a sentence; in full with -v only.
    assert "NoSuchBucket" in done.stderr and "<?xml" not in done.stderr, done.stderr
    assert "<Error>" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    # Which credentials were used is printed before the first request, failing or not.
    assert done.stdout.splitlines()[1].startswith("  credentials: AWS keys from"), done.stdout
    for verbose in (["-v", "doctor", "s3://no-such-bucket-here/x", *opts],
                    ["doctor", "s3://no-such-bucket-here/x", *opts, "-v"]):  # fmt: skip
        assert "<Error>" in run(*verbose).stderr  # DEBUG: the store's answer in full


def test_options_every_command_takes_go_before_it_as_well_as_after(moto_endpoint):
    from conftest import _s3_backend

    backend = _s3_backend(moto_endpoint)
    uri = backend.uri()
    opts = options_args(backend)
    with BlobLock(uri, storage_options=backend.storage_options):
        # As `aws --profile X s3 ls`: all before, split around the command, all after.
        for args in (
            [*opts, "status", uri],
            [*opts[:2], "status", uri, *opts[2:]],
            ["status", uri, *opts],
        ):
            done = run(*args)
            assert done.returncode == 0, (args, done.stderr)
            assert ": held, owner" in done.stdout, (args, done.stdout)
    done = run("--profile", "nope", "status", uri)
    assert done.returncode == 1 and "profile 'nope' does not exist" in done.stderr, done.stderr


def test_version():
    import blob_lock

    done = run("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"blob-lock {blob_lock.__version__}"


@pytest.mark.parametrize("module", ["blob_lock", "blob_lock.cli"])
def test_python_dash_m_is_the_same_command(tmp_path, module):
    uri = str(tmp_path / "lock")
    done = subprocess.run(
        [sys.executable, "-m", module, "run", uri, "--", sys.executable, "-c", "exit(5)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 5, done.stderr
    status = subprocess.run(
        [sys.executable, "-m", module, "status", uri], capture_output=True, text=True, timeout=60
    )
    assert status.returncode == 0 and "released" in status.stdout, status.stderr


# A command that takes the lock over behind run's back (as a waiter would after expiry),
# then exits with the code it is given.
STEAL = """
import json, pathlib, sys
lockfile = pathlib.Path(sys.argv[1]) / "lock.json"
body = json.loads(lockfile.read_text())
body.update(writer_id="thief", token=body["token"] + 1)
lockfile.write_text(json.dumps(body))
sys.exit(int(sys.argv[2]))
"""


def test_run_exits_4_when_the_lock_was_lost_while_the_command_ran(tmp_path):
    uri = str(tmp_path / "lock")
    done = run("run", uri, "--", sys.executable, "-c", STEAL, uri, "0")
    assert done.returncode == 4, done.stderr
    assert "lost while the command ran" in done.stderr and "thief" in done.stderr
    # The command's own failure wins.
    uri = str(tmp_path / "other")
    done = run("run", uri, "--", sys.executable, "-c", STEAL, uri, "5")
    assert done.returncode == 5, done.stderr
    assert "lost while the command ran" in done.stderr


def test_status_after_break_says_who_broke_it(tmp_path):
    import getpass
    import socket

    uri = str(tmp_path / "lock")
    holder = BlobLock(uri, raise_on_lost=False)
    holder.acquire()
    assert run("break", uri, "--yes").returncode == 0
    text = run("status", uri).stdout
    assert "released, broken by" in text and holder.owner in text, text
    seen = json.loads(run("status", uri, "--json").stdout)
    assert seen["broken_by"].startswith(f"{getpass.getuser()}@{socket.gethostname()}")
    holder.release()


@pytest.mark.parametrize(
    "args", [["status", "{uri}", "--json"], ["--help"], ["doctor", "{uri}"]], ids=str
)
def test_output_piped_to_head_ends_quietly(tmp_path, args):
    uri = str(tmp_path / "lock")
    BlobLock(uri).try_acquire()
    line = " ".join([BLOB_LOCK, *[a.replace("{uri}", uri) for a in args]])
    # `head -c 0` has gone before the command writes: every write meets a closed pipe.
    done = subprocess.run(
        f"{line} | head -c 0", shell=True, capture_output=True, text=True, timeout=60
    )
    assert done.stderr == "", done.stderr


def test_a_memory_store_in_the_command_line_warns_that_it_is_this_process_only():
    done = run("status", "memory://here/lock")
    assert done.returncode == 0
    assert "memory:// store lives inside one process" in done.stderr


def test_exit_codes_come_from_one_table_in_help_and_docs():
    """Each command's --help and docs/cli.md's table say the codes of one table."""
    from blob_lock.cli import _exits

    docs = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    for name, codes in _exits.BY_COMMAND.items():
        said = _exits.sentence(codes)
        assert f"| {said} |" in docs, (name, said)
        shown = " ".join(run(name, "--help").stdout.split())
        assert f"Exit codes: {said}." in shown, (name, shown)
    top = " ".join(run("--help").stdout.split())
    assert _exits.sentence(_exits.COMMON) in top, top


def test_the_cli_reference_is_generated_from_the_parser():
    """docs/cli.md's usage lines and option tables are the parser's own (a flag added to
    the parser, such as one a new lock option brings to `run`, shows there or fails here)."""
    from blob_lock.cli import _reference

    path = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
    doc = path.read_text()
    blocks = _reference._BLOCK.findall(doc)
    commands = set(_reference._commands())
    assert {b[1] for b in blocks} == commands, "a command without its generated block"
    assert "--clock-skew S" in _reference.section("run")
    assert _reference.render(doc) == doc, "docs/cli.md is out of date: run `make cli-docs`"


def test_a_command_that_does_not_wait_never_loads_asyncio(tmp_path):
    """asyncio (and ssl under it) is a fifth of a command's start: loaded only by what needs
    an event loop (a waiting command's progress, the async API, async credentials)."""
    probe = (
        "import runpy, sys; sys.argv = ['blob-lock', 'status', sys.argv[1]]\n"
        "try:\n    runpy.run_module('blob_lock.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in ('asyncio', 'ssl') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "lock")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr
    assert "unlocked" in done.stdout, done.stdout + done.stderr


def test_the_waiting_line_says_what_was_waited_and_the_most_it_waits(tmp_path):
    """The line used to say "waiting 1s for ...", which read as a promise of one second: it
    says the time waited so far, and the most it will wait when there is a --timeout."""
    uri = str(tmp_path / "lock")
    with BlobLock(uri, expire=30) as held:
        done = run("run", "--timeout", "2.5", uri, "--", "true")
        assert done.returncode == 75
        line = next(s for s in done.stderr.splitlines() if " blob-lock: " in s)
        assert re.search(r"blob-lock: waited \d+s of at most 2\.5s for ", line), line
        assert held.owner in line
        # Without --timeout: how long so far, and nothing about an end.
        proc = subprocess.Popen(
            [BLOB_LOCK, "run", uri, "--", "true"], stderr=subprocess.PIPE, text=True
        )
        try:
            first = proc.stderr.readline()
        finally:
            held.release()
            assert proc.wait(60) == 0
    assert re.search(r"blob-lock: waited \d+s so far for .*: held", first), first
    assert "at most" not in first and "up to" not in first, first


@pytest.mark.parametrize(
    ("args", "meant"),
    [
        (["run", "--expiry", "3", "{uri}", "--", "touch", "{mark}"], "--expire"),
        (["run", "--no-wiat", "{uri}", "--", "touch", "{mark}"], "--no-wait"),
        (["run", "--expire=3", "--lable", "a=b", "{uri}", "--", "touch", "{mark}"], "--label"),
        (["status", "--jsn", "{uri}"], "--json"),
        (["wait", "--timout", "3", "{uri}"], "--timeout"),
        (["break", "--yse", "{uri}"], "--yes"),
        (["doctor", "--rase", "{uri}"], "--race"),
        (["ls", "--sate", "held", "{uri}"], "--state"),
        (["prune", "--older-then", "3d", "{uri}"], "--older-than"),
        (["slots", "--proflie", "x", "{uri}", "3"], "--profile"),
        (["--verbsoe", "status", "{uri}"], "--verbose"),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else a,
)
def test_an_unknown_option_names_the_nearest_known_one(tmp_path, args, meant):
    uri, mark = tmp_path / "lock", tmp_path / "ran"
    given = [a.replace("{uri}", str(uri)).replace("{mark}", str(mark)) for a in args]
    done = run(*given)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"did you mean {meant}?" in done.stderr, done.stderr
    command = args[0] if not args[0].startswith("-") else None
    usage = done.stderr.splitlines()[0]
    # The command's own usage, not the top level's (which lists no command's options).
    assert usage.startswith(f"usage: blob-lock {command} " if command else "usage: blob-lock "), (
        done.stderr
    )
    assert not mark.exists() and not uri.exists(), "nothing ran, nothing was written"


def test_an_unknown_option_with_no_near_one_is_refused_by_its_command(tmp_path):
    done = run("status", "--zzzzzz", str(tmp_path / "lock"))
    assert done.returncode == 2
    assert done.stderr.startswith("usage: blob-lock status "), done.stderr
    assert "--zzzzzz" in done.stderr and "did you mean" not in done.stderr, done.stderr
    # A negative number is a value, not an option.
    done = run("slots", str(tmp_path / "quota"), "-1")
    assert done.returncode == 2 and "unknown option" not in done.stderr, done.stderr
    assert "slots must be" in done.stderr, done.stderr


def test_a_race_that_found_no_double_says_what_it_does_not_prove(tmp_path):
    """One winner in every round is what was seen; it does not prove the store's conditional
    writes atomic (a rarer race can still let two in), so the verdict says both."""
    uri = str(tmp_path / "lock")
    done = run("doctor", "--race", "--racers", "4", "--rounds", "3", uri)
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = done.stdout.splitlines()[-1]
    assert "3 rounds of 4 racers: one winner each time" in verdict, verdict
    assert "does not prove" in verdict and "docs/stores/s3.md" in verdict, verdict
    assert "cas is safe" not in done.stdout, done.stdout
    report = json.loads(
        run("doctor", "--race", "--racers", "4", "--rounds", "3", "--json", uri).stdout
    )
    assert report["cas_safe"] and "does not prove" in report["verdict"], report
    assert "does not prove" in report["race"]["verdict"], report
