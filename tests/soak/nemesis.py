"""The soak's nemesis: one fault at a time, drawn from a seeded generator, each healed before
the next, with a calm pause between them; every fault a JSON line in the campaign's log
(``nemesis.jsonl``: its kind, what it hit, when it began and ended on CLOCK_MONOTONIC).

Faults on the workers: the holder (the worker marked inside) paused with SIGSTOP past its
lease (1.6 x expire) and resumed; a worker, the holder one time in two, killed with SIGKILL
and started again. On the network, through the fault proxy in front of a store served over
HTTP: latency, connections reset, throttling answers (503, and 429 on GCS) that never reach
the store, a write's answer lost after the write landed (the network held up a moment
after), and a store that stops answering for longer than the lease. On the store: a
restart where it keeps its data, or its process stopped (SIGSTOP) past the lease where a
restart would lose it. A store whose objects tear when a request is cut (s3rver) is spared
the faults that cut requests: no lock survives a store that corrupts itself.

``heal()`` ends every fault at once: the runner calls it before the quiet phase.
"""

from __future__ import annotations

import json
import random
import time
from typing import Callable

from pool import Pool
from stores import Store


class Nemesis:
    def __init__(
        self, rng: random.Random, store: Store, pool: Pool, expire: float, log_path
    ) -> None:
        self.rng, self.store, self.pool, self.expire = rng, store, pool, expire
        self.log = open(log_path, "a", buffering=1)
        self.counts: dict[str, int] = {}
        faults: list[tuple[float, Callable[[], dict]]] = [(3, self.pause), (2, self.kill)]
        if store.proxy is not None:
            faults += [(1, self.latency), (1, self.throttled)]
        if store.proxy is not None and not store.tears:
            faults += [(1, self.resets), (1, self.lost_answer), (1, self.outage)]
        if store.restartable:
            faults.append((1, self.restart))
        if store.stallable and not store.restartable:
            faults.append((1, self.stall))
        self.faults = faults

    def run(self, until: float, enough: Callable[[], bool]) -> None:
        """Faults until ``until`` (monotonic) or ``enough()``, the last healed by then or
        soon after."""
        weights = [w for w, _ in self.faults]
        while not enough():
            self.pool.revive(self.note)
            calm = self.rng.uniform(2.0, 8.0)
            if time.monotonic() + calm >= until:
                break
            time.sleep(calm)
            (fault,) = self.rng.choices([f for _, f in self.faults], weights)
            began = time.monotonic()
            what = fault()
            self.note(what.pop("kind"), began, **what)

    def note(self, kind: str, began: float, **what) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        what.update(kind=kind, at=round(began, 6), until=round(time.monotonic(), 6))
        self.log.write(json.dumps(what) + "\n")

    def heal(self) -> None:
        if self.store.proxy is not None:
            self.store.proxy.heal()
        self.pool.resume_all()
        self.pool.revive(self.note)

    # -- the workers ---------------------------------------------------------------------

    def pause(self) -> dict:
        """The holder, stopped inside its section past its lease, before its write to the
        fenced resource (which it makes when it resumes); a worker at random if no holder
        was caught within a second."""
        i = self.pool.pause_holder(within=1.0, before_write=True)
        if i is None:
            i = self.rng.randrange(self.pool.size)
            self.pool.pause(i)
        pid = self.pool.pid(i)
        inside = self.pool.inside(i)  # stopped: it cannot change any more
        time.sleep(1.6 * self.expire)
        self.pool.resume(i)
        return {"kind": "pause", "worker": i, "pid": pid, "inside": inside}

    def kill(self) -> dict:
        """A worker, the holder one time in two."""
        i = None
        if self.rng.random() < 0.5:
            i = self.pool.pause_holder(within=1.0)  # stopped inside, then killed there
        if i is None:
            i = self.rng.randrange(self.pool.size)
        inside = self.pool.inside(i)
        pid = self.pool.kill(i)
        time.sleep(self.rng.uniform(0.1, 1.0))
        self.pool.start(i)
        return {"kind": "kill", "worker": i, "pid": pid, "inside": inside}

    # -- the network ---------------------------------------------------------------------

    def latency(self) -> dict:
        proxy, delay = self.store.proxy, self.rng.uniform(0.01, 0.1)
        proxy.delay(delay)
        time.sleep(self.rng.uniform(2.0, 6.0))
        proxy.heal()
        return {"kind": "latency", "delay": round(delay, 3)}

    def resets(self) -> dict:
        self.store.proxy.reset()
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.store.proxy.heal()
        return {"kind": "reset"}

    def throttled(self) -> dict:
        proxy = self.store.proxy
        status = self.rng.choice([503, 429] if self.store.name == "gcs" else [503])
        n = self.rng.randint(3, 30)
        proxy.fail_http(n, status)
        time.sleep(self.rng.uniform(1.0, 3.0))
        served = proxy.http_failures_served
        proxy.heal()
        return {"kind": "throttled", "status": status, "n": n, "served_total": served}

    def lost_answer(self) -> dict:
        proxy = self.store.proxy
        before = proxy.answers_lost
        proxy.lose_answer(b"PUT ")
        deadline = time.monotonic() + 3.0
        while proxy.answers_lost == before and time.monotonic() < deadline:
            time.sleep(0.01)
        lost = proxy.answers_lost > before
        if lost:
            time.sleep(self.rng.uniform(0.2, 1.5))  # held up after the write landed
        proxy.heal()
        return {"kind": "lost_answer", "lost": lost}

    def outage(self) -> dict:
        seconds = self.rng.uniform(1.2, 2.0) * self.expire
        self.store.proxy.blackhole()
        time.sleep(seconds)
        self.store.proxy.heal()
        return {"kind": "outage", "seconds": round(seconds, 3)}

    # -- the store -----------------------------------------------------------------------

    def restart(self) -> dict:
        self.store.restart()
        return {"kind": "restart"}

    def stall(self) -> dict:
        seconds = self.rng.uniform(1.2, 2.0) * self.expire
        self.store.stall(seconds)
        return {"kind": "stall", "seconds": round(seconds, 3)}
