"""blob_lock.joblib's side of tests/python/test_joblib_processes.py, as real processes. Each
prints JSON lines. Every process runs this file as ``__main__``, so joblib keys ``square``
the same everywhere (by module and name), as it keys a user's script run on every node.

call KIND LOCATION X [OPTIONS_JSON]
    KIND ``blob`` (blob_lock.joblib.Memory, OPTIONS_JSON its keyword arguments) or
    ``plain`` (joblib.Memory). Says ready, waits for "go" on stdin, looks whether
    ``square(X)`` is cached, notes its arrival in ROLE_DIR/arrived, calls it and prints
    the result (or the error).
parallel KIND LOCATION X N
    ``square(X)`` N times through two of joblib.Parallel's loky workers, the cached
    function pickled to them, each call after its arrival is noted: prints the results.

What ``square`` does is set by the environment (ROLE_DIR: the folder of its notes;
ROLE_MODE): it appends "start PID X" to ROLE_DIR/log, prints "computing", then per mode:
``arrivals`` waits until ROLE_N processes arrived (plus half a second, for their calls to
pass joblib's look); ``starts`` waits until ROLE_N computations started; ``forever``
sleeps until killed; ``raise`` waits for ROLE_DIR/go, then raises. Then it appends
"end PID X" and returns X * X.

ROLE_VALIDATE caches it with a ``cache_validation_callback``: ``expires`` (joblib's
``expires_after(hours=1)``) or ``young`` (a result younger than an hour, False for metadata
without a time). ROLE_BETWEEN (the process that computes) pauses between joblib's two
writes, the output's and the metadata's, until another process has looked at the output
without metadata; ROLE_LOOKS (that other process) notes each such look in ROLE_DIR/looked.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

# Generous liveness bound: no role waits for ever, even when the test around it fails.
GIVE_UP = float(os.environ.get("ROLE_GIVE_UP", "120"))


def say(**kw: object) -> None:
    # One write of the whole line: loky's workers share their parent's stdout, and lines
    # under PIPE_BUF bytes written at once never mix on a pipe.
    os.write(1, (json.dumps(kw) + "\n").encode())


def note(name: str, line: str) -> None:
    with open(Path(os.environ["ROLE_DIR"]) / name, "a") as f:
        f.write(line + "\n")  # one write in append mode: lines of processes never mix


def lines(name: str, word: str) -> int:
    path = Path(os.environ["ROLE_DIR"]) / name
    return sum(1 for line in path.read_text().splitlines() if line.startswith(word))


def until(check, what: str) -> None:
    deadline = time.monotonic() + GIVE_UP
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up after {GIVE_UP:g} s waiting for {what}")
        time.sleep(0.02)


def square(x):
    pid = os.getpid()
    note("log", f"start {pid} {x}")
    say(event="computing", pid=pid)
    mode, n = os.environ.get("ROLE_MODE", ""), int(os.environ.get("ROLE_N", "1"))
    if mode == "arrivals":
        until(lambda: lines("arrived", "arrived") >= n, f"{n} arrivals")
        time.sleep(0.5)
    elif mode == "starts":
        until(lambda: lines("log", "start") >= n, f"{n} computations at once")
    elif mode == "forever":
        time.sleep(GIVE_UP)
    elif mode == "raise":
        until(lambda: (Path(os.environ["ROLE_DIR"]) / "go").exists(), "the go file")
        raise RuntimeError("square failed on purpose")
    note("log", f"end {pid} {x}")
    return x * x


def young(metadata: dict) -> bool:
    return time.time() - metadata.get("time", 0) < 3600


def cached_square(memory):
    validate = os.environ.get("ROLE_VALIDATE")
    if validate is None:
        return memory.cache(square)
    from joblib import expires_after

    callback = expires_after(hours=1) if validate == "expires" else young
    return memory.cache(square, cache_validation_callback=callback)


def hook_the_store(store) -> None:
    """This process's joblib store backend (the instance only), as ROLE_BETWEEN and ROLE_LOOKS
    ask: a pause between the two writes, and a note of each look at a half-written result."""
    if os.environ.get("ROLE_BETWEEN"):
        store_metadata = store.store_metadata

        def paused(call_id, metadata):
            note("log", f"between {os.getpid()}")
            until(lambda: lines("looked", "looked") >= 1, "a look at the output alone")
            return store_metadata(call_id, metadata)

        store.store_metadata = paused
    if os.environ.get("ROLE_LOOKS"):
        get_metadata = store.get_metadata

        def noted(call_id):
            metadata = get_metadata(call_id)
            if not metadata:  # only read once the output exists: the output alone
                note("looked", f"looked {os.getpid()}")
            return metadata

        store.get_metadata = noted


def memory(kind: str, location: str, options: str = "{}"):
    if kind == "plain":
        import joblib

        return joblib.Memory(location, verbose=0)
    from blob_lock.joblib import Memory

    return Memory(location, verbose=0, **json.loads(options))


def call(kind: str, location: str, x: str, options: str = "{}") -> None:
    cached = cached_square(memory(kind, location, options))
    hook_the_store(cached.store_backend)
    say(event="ready", pid=os.getpid())
    assert sys.stdin.readline().strip() == "go"
    missed = not cached.check_call_in_cache(int(x))
    note("arrived", f"arrived {os.getpid()}")
    say(event="calling", missed=missed)
    try:
        result = cached(int(x))
    except Exception as e:
        say(event="error", type=type(e).__name__, message=str(e))
        return
    say(event="done", result=result, missed=missed, pid=os.getpid())


def arrive_and_call(cached, x: int) -> int:
    note("arrived", f"arrived {os.getpid()}")
    return cached(x)


def parallel(kind: str, location: str, x: str, n: str) -> None:
    from joblib import Parallel, delayed

    cached = memory(kind, location).cache(square)
    got = Parallel(n_jobs=2, backend="loky")(
        delayed(arrive_and_call)(cached, int(x)) for _ in range(int(n))
    )
    say(event="done", results=got)


if __name__ == "__main__":
    role, args = sys.argv[1], sys.argv[2:]
    {"call": call, "parallel": parallel}[role](*args)
