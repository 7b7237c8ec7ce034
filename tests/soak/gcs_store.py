"""The GCS fake (tests/servers/fake_gcs.py) as a process of its own on a given port, that keeps
its objects across a restart: SIGTERM writes them (and the generation counter) to a file,
and a start loads that file. So the soak's nemesis can restart the store where it keeps its
data, as it restarts Azurite and s3rver, and the fake's threads do not share the runner's
interpreter.

Run: ``python tests/soak/gcs_store.py PORT SNAPSHOT BUCKET``; prints its storage options as
one JSON line once it listens.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "servers"))
from fake_gcs import FakeGcs


def main() -> None:
    port, snapshot, bucket = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    server = FakeGcs(port=port)
    store = server.store
    if snapshot.exists():
        with store.lock:
            store.buckets, store.objects, store.generation = pickle.loads(snapshot.read_bytes())
    server.create_bucket(bucket)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(json.dumps(server.storage_options()), flush=True)
    done.wait()
    # Taken and never given back: a request in flight either changed the store before the
    # snapshot (and is in it) or never answers. An answered write is never lost.
    store.lock.acquire()
    data = pickle.dumps((store.buckets, store.objects, store.generation))
    snapshot.with_suffix(".tmp").write_bytes(data)
    snapshot.with_suffix(".tmp").replace(snapshot)
    os._exit(0)


if __name__ == "__main__":
    main()
