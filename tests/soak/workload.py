"""One worker of the soak: loops a critical section over one lock (``with BlobLock(uri):``,
a fresh lock object each time, as users write it) or over a semaphore's slots, until the
runner asks it to stop (SIGTERM: the section under way ends first).

Each finished section is one JSON line in the worker's own file, written after the block
ended: when it was entered and left on CLOCK_MONOTONIC (``time.monotonic()``, shared by
every process on the machine), its token, owner and slot, whether the lock was reported
lost (``held.lost`` at the end of the body, or ``LockLost`` from the block), how long it
waited, and what the fenced resource (tests/soak/fence.py) answered the write it made
inside. An acquisition that failed is a line too (``"err"``: its exception's class).

The worker marks itself inside in a shared status file (one byte per worker: 1 inside, 2
inside after its write), so that the nemesis can pause the process that holds the lock.

Run by tests/soak/runner.py: ``python tests/soak/workload.py CONFIG_JSON``.
"""

from __future__ import annotations

import faulthandler
import json
import mmap
import os
import random
import signal
import socket
import sys
import time

from blob_lock import BlobLock, BlobSemaphore
from blob_lock.exceptions import LockError, LockLost, LockTimeout

monotonic = time.monotonic


class FenceClient:
    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rb")

    def write(self, key: str, token: int, owner: str) -> bool:
        self.sock.sendall(f"{key} {token} {owner}\n".encode())
        return self.file.readline() == b"ok\n"


def main() -> None:
    config = json.loads(sys.argv[1])
    index, kind = config["index"], config["kind"]
    faulthandler.register(signal.SIGUSR1)  # the runner asks for our stacks before a kill
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    rng = random.Random(config["seed"])
    fence = FenceClient(config["fence"])
    with open(config["status"], "r+b") as f:
        status = mmap.mmap(f.fileno(), 0)
    options = {
        "expire": config["expire"],
        "timeout": config["timeout"],
        "protocol": config["protocol"],
        "storage_options": config["options"] or None,
    }
    uri, hold, gap = config["uri"], config["hold"], config["gap"]
    semaphore = BlobSemaphore(uri, config["slots"], **options) if kind == "semaphore" else None
    out = open(config["records"], "a", buffering=1)  # a line each: a SIGKILL loses one
    me = {"w": index, "p": os.getpid()}
    print("ready", flush=True)
    while not stopping:
        record: dict = dict(me)
        began = monotonic()
        enter = exit_ = None
        lost = accepted = False
        try:
            with semaphore if semaphore is not None else BlobLock(uri, **options) as held:
                enter = monotonic()
                status[index] = 1
                token, owner = held.token, held.owner
                slot = held.slot if semaphore is not None else None
                time.sleep(hold)  # the work; then its result written with the token
                accepted = fence.write("lock" if slot is None else f"slot-{slot}", token, owner)
                status[index] = 2
                exit_ = monotonic()
                status[index] = 0
                lost = held.lost
        except LockLost as e:
            lost, record["why"] = True, str(e)[-200:]
        except LockTimeout:
            record["err"] = "LockTimeout"
        except LockError as e:
            record["err"] = type(e).__name__
            record["why"] = str(e)[-200:]
        status[index] = 0
        if exit_ is not None:
            record.update(
                e=round(enter, 6),
                x=round(exit_, 6),
                t=token,
                o=owner,
                l=int(lost),
                wt=round(enter - began, 6),
                f=int(accepted),
            )
            if slot is not None:
                record["s"] = slot
        else:
            record.update(b=round(began, 6), wt=round(monotonic() - began, 6))
            record.setdefault("err", "LockLost")
            time.sleep(0.05)  # a failed acquisition: not a busy loop against a failing store
        out.write(json.dumps(record, separators=(",", ":")) + "\n")
        if gap:
            time.sleep(rng.uniform(0, gap))
    out.close()


if __name__ == "__main__":
    main()
