"""Thousands of locks held at once: heartbeat CPU and memory per held lock, beside mops's
maintenance daemon."""

# ruff: noqa: RUF001 (the table's ratios use the multiplication sign)
from __future__ import annotations

import uuid

from common import (
    Report,
    Sizes,
    met,
    ratio,
    run_worker,
)


def scale(rep: Report, sz: Sizes, tmp: str) -> None:
    n, window, expire = sz.scale_locks, sz.scale_window, sz.scale_expire
    n_mops = sz.mops_scale_locks or n
    timeout = 600 + n / 10
    mem = run_worker(
        "scale",
        "blob-lock",
        n,
        window,
        expire,
        f"memory://scale-{uuid.uuid4().hex[:8]}",
        timeout=timeout,
    )
    fil = run_worker("scale", "blob-lock", n, window, expire, f"{tmp}/scale-blob", timeout=timeout)
    try:
        mops = run_worker(
            "scale",
            "mops",
            n_mops,
            window,
            expire,
            f"{tmp}/scale-mops",
            timeout=timeout + n_mops / 20,
        )
    except Exception as e:  # mops may not hold this many: say so, beside ours
        mops = None
        rep.notes.append(f"mops's maintenance daemon with {n_mops} leases failed: {e}")

    def mops_cell(key: str, unit: str, ours_value: float) -> str:
        if mops is None or mops.get(key) is None:
            return "mops: not measured"
        v = mops[key]
        shown = f"{v:.1f} µs" if unit == "µs" else f"{v:.2f} KB"
        return f"mops (file://, {mops['locks']:,} leases) {shown}{ratio(v, ours_value)}"

    rep.add(
        f"CPU per heartbeat, {n:,} locks held on memory://",
        f"{mem['cpu_per_heartbeat_us']:.1f} µs",
        mops_cell("cpu_per_heartbeat_us", "µs", mem["cpu_per_heartbeat_us"]),
        "≤ 10 µs",
        met(mem["cpu_per_heartbeat_us"] <= 10),
    )
    rep.add(
        f"memory per held lock, {n:,} locks on memory://",
        f"{mem['anon_kb_per_lock']:.2f} KB",
        mops_cell("anon_kb_per_lock", "KB", mem["anon_kb_per_lock"]),
        "≤ 2.8 KB, below mops",
        met(
            mem["anon_kb_per_lock"] <= 2.8
            and (mops is None or mem["anon_kb_per_lock"] < mops["anon_kb_per_lock"])
        ),
    )
    rep.add(
        f"CPU per heartbeat / memory per lock, {n:,} locks held on local files",
        f"{fil['cpu_per_heartbeat_us']:.1f} µs / {fil['anon_kb_per_lock']:.2f} KB",
        files_vs_mops(mops, fil),
    )
    for label, r in [("memory://", mem), ("local files", fil)]:
        rep.notes.append(
            f"Scale, blob-lock on {label}: {r['held']:,} of {r['locks']:,} held and {r['lost']} "
            f"lost after the window; heartbeat {r['heartbeat']:g} s (expire {expire:g} s); "
            f"{r['heartbeats']:,.0f} heartbeats due in {r['window_s']:.1f} s took "
            f"{r['cpu_s']:.2f} s of process CPU (all threads); the oldest last write of 50 "
            f"sampled locks was {r['oldest_sampled_write_s']:.2f} s old; acquiring them all "
            f"took {r['acquire_all_s']:.1f} s."
        )
    if mops is not None:
        late = mops["longest_gap_s"] > expire
        rep.notes.append(
            f"Scale, mops: {mops['locks']:,} leases on local files (mops has no in-memory "
            f"store) in its maintenance daemon ({mops['threads']} threads), renewing every "
            f"{mops['heartbeat']:g} s: {mops['heartbeats']:,} renewals done of "
            f"{mops['heartbeats_due']:,.0f} due in {mops['window_s']:.1f} s, "
            f"{mops['cpu_s']:.2f} s of CPU; longest gap between two renewals of a lease "
            f"{mops['longest_gap_s']:.2f} s"
            + (" — longer than expire: others could have taken leases over" if late else "")
            + f"; acquiring them all took {mops['acquire_all_s']:.1f} s (16 threads)."
        )
    rep.notes.append(
        "Scale: CPU is the process's user + system time (getrusage) over the window, "
        "divided by the heartbeats due in it (window / heartbeat × locks for blob-lock, "
        "renewals counted for mops); memory is the growth of RssAnon (anonymous resident "
        "memory: heap and stacks, not the library's code pages) from before the locks were "
        "made to after the window, divided by the locks, Python objects included. It moves "
        "in steps of 2 MiB where the allocator takes transparent huge pages (mimalloc does, "
        "where the kernel allows them on request): 0.2 KB a lock at 10,000 locks."
    )


def files_vs_mops(mops: dict | None, fil: dict) -> str:
    if not mops or mops.get("cpu_per_heartbeat_us") is None:
        return "mops: not measured"
    cpu, kb = mops["cpu_per_heartbeat_us"], mops["anon_kb_per_lock"]
    return (
        f"mops {cpu:.1f} µs{ratio(cpu, fil['cpu_per_heartbeat_us'])} / "
        f"{kb:.2f} KB{ratio(kb, fil['anon_kb_per_lock'])}"
    )
