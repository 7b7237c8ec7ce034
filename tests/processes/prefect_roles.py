"""Prefect's side of tests/python/test_prefect.py, as real processes. Each prints JSON lines.

hold PREFIX OPTIONS_JSON KEY HOLDER EXPIRE
    Takes the lock of KEY as HOLDER through a BlobLockManager and holds it until killed.
look PICKLE_FILE KEY
    Loads a ResultStore shipped with cloudpickle, as Prefect ships it to its workers, and
    says what its lock manager answers about KEY from here (holder1 holds it elsewhere).
task PREFIX OPTIONS_JSON SHARED N LOCKED
    Runs a flow whose cached task (INPUTS, key storage in SHARED) appends this process's
    pid to SHARED/ran when it runs; with LOCKED=1 under SERIALIZABLE isolation and a
    BlobLockManager, else under Prefect's default (no lock). Says ready, then waits for
    "go" on stdin; inside the flow it notes its arrival in SHARED/arrived, and the task's
    body waits until all N processes arrived, so that every one of them starts the task
    while it runs. Prints the task's result.
logged PREFIX OPTIONS_JSON KEY SHARED
    Runs a flow whose task, cached under KEY with SERIALIZABLE isolation on a
    BlobLockManager (expire 3 s), creates SHARED/holding when its body runs and returns once
    SHARED/go exists. Prints the flow run's id and the task's result.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from pathlib import Path

# Generous liveness bound: no role waits for ever, even when the test around it fails.
GIVE_UP = 120.0


def say(**kw: object) -> None:
    print(json.dumps(kw), flush=True)


def hold(prefix: str, options: str, key: str, holder: str, expire: float) -> None:
    from blob_lock.prefect import BlobLockManager

    manager = BlobLockManager(prefix, expire=expire, storage_options=json.loads(options) or None)
    assert manager.acquire_lock(key, holder, acquire_timeout=GIVE_UP)
    say(event="ready", pid=os.getpid())
    time.sleep(GIVE_UP)


def look(pickled: str, key: str) -> None:
    import cloudpickle

    store = cloudpickle.loads(Path(pickled).read_bytes())
    manager = store.lock_manager
    seen: dict[str, object] = {
        "is_locked": manager.is_locked(key),
        "holder1": manager.is_lock_holder(key, "holder1"),
        "holder2": manager.is_lock_holder(key, "holder2"),
        "holder2_takes_it": manager.acquire_lock(key, "holder2", acquire_timeout=0),
        "holder1_takes_it_again": manager.acquire_lock(key, "holder1", acquire_timeout=0),
        "free_within_0.2s": manager.wait_for_lock(key, timeout=0.2),
    }
    try:
        manager.release_lock(key, "holder2")
        seen["holder2_released"] = "no error"
    except ValueError as e:
        seen["holder2_released"] = str(e)
    try:
        store.write(key=key, obj={"from": "elsewhere"}, holder="holder2")
        seen["holder2_wrote"] = "no error"
    except RuntimeError as e:
        seen["holder2_wrote"] = str(e)
    say(event="seen", **seen)


def task_run(prefix: str, options: str, shared: str, n: int, locked: bool) -> None:
    from blob_lock.prefect import BlobLockManager
    from prefect import flow, task
    from prefect.cache_policies import INPUTS
    from prefect.transactions import IsolationLevel

    root = Path(shared)
    policy = INPUTS.configure(key_storage=str(root / "keys"))
    if locked:
        manager = BlobLockManager(prefix, storage_options=json.loads(options) or None)
        policy = policy.configure(isolation_level=IsolationLevel.SERIALIZABLE, lock_manager=manager)

    @task(cache_policy=policy, persist_result=True)
    def square(x: int) -> dict[str, object]:
        with open(root / "ran", "a") as f:
            f.write(f"{os.getpid()}\n")
        deadline = time.monotonic() + GIVE_UP
        while len((root / "arrived").read_text().split()) < n:
            assert time.monotonic() < deadline, "the other processes never arrived"
            time.sleep(0.05)
        time.sleep(1.0)  # the last to arrive is inside its task call by now
        return {"value": x * x, "pid": os.getpid(), "token": uuid.uuid4().hex}

    @flow
    def squares(x: int) -> dict[str, object]:
        with open(root / "arrived", "a") as f:
            f.write(f"{os.getpid()}\n")
        return square(x)

    say(event="ready")
    assert sys.stdin.readline().strip() == "go"
    began = time.monotonic()
    result = squares(7)
    say(event="done", result=result, took=time.monotonic() - began)


def logged(prefix: str, options: str, key: str, shared: str) -> None:
    from blob_lock.prefect import BlobLockManager
    from prefect import flow, runtime, task
    from prefect.cache_policies import CacheKeyFnPolicy
    from prefect.transactions import IsolationLevel

    root = Path(shared)
    manager = BlobLockManager(prefix, expire=3, storage_options=json.loads(options) or None)
    policy = CacheKeyFnPolicy(cache_key_fn=lambda context, parameters: key).configure(
        isolation_level=IsolationLevel.SERIALIZABLE, lock_manager=manager
    )

    @task(cache_policy=policy, persist_result=True)
    def work() -> str:
        (root / "holding").touch()
        deadline = time.monotonic() + GIVE_UP
        while not (root / "go").exists():
            assert time.monotonic() < deadline, "never told to go on"
            time.sleep(0.05)
        return "done"

    @flow
    def logs() -> tuple[str, str]:
        return str(runtime.flow_run.id), work()

    run, result = logs()
    say(event="done", flow_run=run, result=result)


def main() -> None:
    role, args = sys.argv[1], sys.argv[2:]
    if role == "hold":
        hold(args[0], args[1], args[2], args[3], float(args[4]))
    elif role == "look":
        look(args[0], args[1])
    elif role == "task":
        task_run(args[0], args[1], args[2], int(args[3]), args[4] == "1")
    elif role == "logged":
        logged(*args[:4])
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main()
