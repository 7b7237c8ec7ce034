"""``stats()``: what the locks of this process did, as counters and histograms."""

from __future__ import annotations

from blob_lock import _blob_lock
from blob_lock._stats_types import Histogram, Stats

__all__ = ["Histogram", "Stats", "stats"]


def stats() -> Stats:
    """Process-wide counters and histograms, since the process started (a child made by
    fork starts with its parent's). Reading them makes no request and takes no lock.

    - ``requests``: ``{kind: {outcome: count}}``, the store requests of the lock protocol;
      kinds ``read``, ``create``, ``update``, ``overwrite``; outcomes ``ok``, ``conflict``
      (a conditional write's condition failed), ``not_found`` (a read found no lockfile),
      ``error``.
    - ``acquisitions``: ``{ending: count}`` of ``acquire`` (and ``with``) and
      ``try_acquire`` calls: ``acquired``, ``busy`` (one attempt found it held),
      ``timed_out``, ``failed``, ``saturated`` (refused without a request: the store was
      taking all this process could send it, and held locks' renewals come first; see
      ``StoreSaturated``).
    - ``releases``: leases ended by their own release.
    - ``renewals``: ``{"ok": count, "retried": count}`` (failed renewals tried again).
    - ``losses``: ``{cause: count}`` of leases lost: ``taken_over``, ``released_by_other``,
      ``deleted``, ``deadline`` (no renewal in time), ``renewal_failed`` (one that no retry
      can mend).
    - Histograms, each ``{"count", "sum" (seconds), "buckets": [(upper bound in seconds,
      cumulative count), ..., (inf, count)]}``: ``acquire_wait_seconds`` (each
      acquisition's wait, but single attempts that found it held), ``hold_seconds`` (from
      acquisition to release or loss), ``renewal_latency_seconds`` (each successful
      renewal), ``renewal_margin_seconds`` (time left before the lease deadline when each
      renewal succeeded: a margin near zero means renewals barely make it).
    - ``renewal_margin_min_seconds``: the least of those margins in the last one to two
      minutes, how close the tightest lease came to its deadline (``None`` when no renewal
      landed then).
    - ``throttled``: answers of stores asking this process to slow down (S3 503 SlowDown,
      Azure 503 ServerBusy and 500 OperationTimedOut, GCS 429 and 503).
    - ``queued``: store requests waiting now for a pass of their store's load (renewals go
      first, by their leases' deadlines).
    - ``slots_held``: semaphore slots this process holds now (renewed by it: a slot handed
      off to a remote is the remote's); ``semaphore_waiters``: semaphore acquisitions
      waiting now, every slot they read being held.
    """
    return _blob_lock.stats()
