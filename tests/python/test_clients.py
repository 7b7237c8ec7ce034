"""One client per store and process: locks made as users make them (a fresh BlobLock for
every `with`) cost a lookup and no connection, and take a lock released by this process in
two requests, as one lock object taken again does."""

from __future__ import annotations

from blob_lock import BlobLock
from conftest import cli, proxied_moto


def test_constructing_a_lock_on_a_store_in_use_opens_no_connection(moto_endpoint):
    proxy, options, root = proxied_moto(moto_endpoint)
    try:
        with BlobLock(f"{root}/warm", storage_options=options):
            pass
        opened, requests = proxy.connections, proxy.snapshot()
        locks = [BlobLock(f"{root}/{i}", storage_options=options) for i in range(500)]
        assert all(lock.protocol == "cas" for lock in locks), "the store's verdict is known"
        assert (proxy.connections, proxy.snapshot()) == (opened, requests)
    finally:
        proxy.close()


def test_a_fresh_lock_per_with_takes_two_requests_after_our_own_release(moto_endpoint):
    proxy, options, root = proxied_moto(moto_endpoint)
    uri = f"{root}/fresh"
    try:
        # The probe and the lock's first acquisition; then one with a receipt, which also
        # tells a guess of stale receipts left by the tests before that ours are current.
        for _ in range(2):
            with BlobLock(uri, storage_options=options):
                pass
        for _ in range(5):
            mark = proxy.snapshot()
            with BlobLock(uri, storage_options=options):
                pass
            kinds = [r.kind for r in proxy.since(mark)]
            # An update on the version our release left, and the release.
            assert kinds == ["update", "update"], kinds
        # Another writer in between: the record is stale, and costs one refused request.
        other = BlobLock(uri, storage_options={**options, "aws_endpoint": moto_endpoint})
        with other:
            theirs = other.token
        mark = proxy.snapshot()
        with BlobLock(uri, storage_options=options) as held:
            assert held.token is not None and theirs is not None and held.token > theirs
        kinds = [r.kind for r in proxy.since(mark)]
        assert kinds == ["update", "read", "update", "update"], kinds
        # While another keeps writing between our turns: read first, three requests.
        for _ in range(2):
            with other:
                pass
            mark = proxy.snapshot()
            with BlobLock(uri, storage_options=options):
                pass
            kinds = [r.kind for r in proxy.since(mark)]
            assert kinds == ["read", "update", "update"], kinds
        # Ours alone again: one read finds our record current, then two requests again.
        for expected in [["read", "update", "update"], ["update", "update"]]:
            mark = proxy.snapshot()
            with BlobLock(uri, storage_options=options):
                pass
            assert [r.kind for r in proxy.since(mark)] == expected
    finally:
        proxy.close()


def test_new_locks_cost_two_requests_after_the_first_and_existing_ones_three(moto_endpoint):
    """What a lock costs on S3 by what it was before, as docs/guarantees.md states it: a new
    lock is created first while the last lock this process met without a record of its own
    release was new (two requests with the release), a lock released elsewhere is read
    first once one was found (three), and a change between the two costs one refused
    create, once."""
    proxy, options, root = proxied_moto(moto_endpoint)

    def kinds(name: str) -> list[str]:
        mark = proxy.snapshot()
        with BlobLock(f"{root}/{name}", storage_options=options):
            pass
        return [r.kind for r in proxy.since(mark)]

    def released_elsewhere(name: str) -> None:
        # Another process, reaching moto without the proxy: nothing here learns of it.
        o = [f"-o{k}={v}" for k, v in {**options, "aws_endpoint": moto_endpoint}.items()]
        done = cli("run", f"{root}/{name}", *o, "--", "true")
        assert done.returncode == 0, done.stderr

    try:
        kinds("new-0")  # the probe, and whatever the tests before left this process guessing
        kinds("new-0")  # with a receipt: one that tells a guess of stale receipts otherwise
        assert kinds("new-1") == ["create", "update"]
        assert kinds("new-2") == ["create", "update"]
        released_elsewhere("old-0")
        assert kinds("old-0") == ["create", "read", "update", "update"]
        for name in ["old-1", "old-2"]:
            released_elsewhere(name)
            assert kinds(name) == ["read", "update", "update"]
        assert kinds("new-3") == ["read", "create", "update"]
        assert kinds("new-4") == ["create", "update"]
        # Released here: an update on the version our release left, and the release.
        assert kinds("old-2") == ["update", "update"]
    finally:
        proxy.close()
