"""The soak's checker: reads what a campaign recorded (each worker's sections, the fenced
resource's log of accepted writes, the nemesis's faults) and says what it shows.

Its properties, each a count that must be 0 where the lock claims mutual exclusion (cas):

- overlaps: two sections, neither reported lost, whose [enter, exit] on CLOCK_MONOTONIC
  intersect (a semaphore: per slot; and never more than N inside at once);
- token inversions: taken in the order sections began, a section not reported lost has a
  token above every token of the sections that began before it, lost or not (a lost
  section's token is below every later held one); per lock, each slot a lock of its own;
- intrusions: a section reported lost that began while a section not reported lost ran,
  with a token above that one's: it acquired after the holder did, while the holder held
  (a lost section may begin inside a held one only with a smaller token: acquired first,
  then paused before it began, and taken over meanwhile);
- stale writes accepted: the fenced resource's accepted writes, in its order, whose token
  is below one it accepted before, or equal to one another owner wrote with;
- writes refused while held: a section not reported lost whose write the resource
  refused (a holder with a higher token had written meanwhile);
- silent workers: a worker with no finished section in the quiet phase;
- waits past their bound: an acquisition that waited longer than its timeout and one
  request timeout (the bound docs/guarantees.md states, whatever the store does), leaving
  out the waits of a worker the nemesis paused meanwhile; and from ``settle`` seconds into
  the quiet phase, any acquisition that failed other than by its timeout (faults healed,
  the store answers: a timeout there is contention, which the lock bounds by the timeout
  and does not otherwise order).

A section reported lost (``held.lost`` at the end of the block, or ``LockLost`` from it)
is left out of the overlaps, as its holder was told.

A store that tears concurrent writes (s3rver writes an object in place: two PUTs at once
can leave one body with the other's tail) leaves a lockfile no reader decodes, and every
acquisition fails from then on with ``InvalidLockFile``, as the protocol asks. Under lww,
on such a store, that is the store's figure (``torn_after``: the sections before it), and
the liveness that cannot follow it is not checked; under cas it is a failure like any other.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# The counts that show a broken mutual exclusion (where the store runs cas).
SAFETY = ("overlaps", "intrusions", "above_slots", "inversions", "stale_accepted",
          "refused_while_held")  # fmt: skip


@dataclass
class Campaign:
    """What the checker needs to know of a campaign besides its records."""

    store: str
    kind: str  # "lock" or "semaphore"
    protocol: str  # "cas" or "lww"
    workers: int
    slots: int  # 1 for a lock
    quiet_start: float  # monotonic: faults healed from here on
    settle: float  # seconds into the quiet phase from which every acquisition must hold
    wait_bound: float  # timeout + one request timeout (+ slack for the machine's load)


@dataclass
class Verdict:
    campaign: Campaign
    sections: int = 0
    lost: int = 0
    overlaps: int = 0
    intrusions: int = 0
    most_inside: int = 0
    above_slots: int = 0
    inversions: int = 0
    accepted: int = 0
    stale_refused: int = 0
    stale_accepted: int = 0
    refused_while_held: int = 0
    failures: Counter = field(default_factory=Counter)
    waits: tuple[float, float, float] = (0.0, 0.0, 0.0)  # p50, p99, max
    waits_past_bound: int = 0
    silent_workers: list[int] = field(default_factory=list)
    torn_after: int | None = None  # lww: sections before the store tore the lockfile
    stuck_workers: list[int] = field(default_factory=list)
    nemesis: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def violations(self) -> list[str]:
        """What breaks the lock's claims; empty for a campaign that passed. lww claims no
        mutual exclusion: its overlaps, inversions and fence counts are figures, not
        failures; its liveness is checked as cas's."""
        found = []
        if self.campaign.protocol == "cas":
            for name in SAFETY[:-1]:
                if getattr(self, name):
                    found.append(f"{name.replace('_', ' ')}: {getattr(self, name)}")
            if self.refused_while_held:
                found.append(f"writes refused while held: {self.refused_while_held}")
        if self.waits_past_bound:
            found.append(f"waits past their bound: {self.waits_past_bound}")
        if self.silent_workers and self.torn_after is None:
            found.append(f"workers with no section in the quiet phase: {self.silent_workers}")
        if self.stuck_workers:
            found.append(f"workers that did not stop when asked: {self.stuck_workers}")
        if not self.sections:
            found.append("no section at all")
        return found

    def line(self) -> str:
        """The campaign's one line."""
        c = self.campaign
        held = self.sections - self.lost
        overlaps = f"{self.overlaps:,} overlaps"
        if self.intrusions:
            overlaps += f" ({self.intrusions:,} intrusions of lost sections)"
        if c.protocol == "lww":
            rate = self.overlaps / held if held else 0.0
            overlaps += f" (lww: {rate:.3%} of held sections)"
        if c.kind == "semaphore":
            overlaps += f", most inside {self.most_inside} of {c.slots}"
        if self.torn_after is not None:
            overlaps += f", the lockfile torn by the store after {self.torn_after:,} sections"
        p50, p99, most = self.waits
        failed = sum(self.failures.values())
        faults = sum(self.nemesis.values())
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.nemesis.items()))
        verdict = "; ".join(self.violations()) or "ok"
        return (
            f"{c.store}/{c.kind} ({c.protocol}): {self.sections:,} sections, {overlaps}, "
            f"{self.inversions:,} token inversions, {self.stale_refused:,} stale writes refused "
            f"({self.stale_accepted} accepted), {self.lost:,} losses reported, "
            f"{failed:,} acquisitions failed, waits p50 {_ms(p50)} p99 {_ms(p99)} "
            f"max {_ms(most)}, nemesis {faults} ({kinds}): {verdict}"
        )


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def check(
    campaign: Campaign,
    records: list[dict],
    fence_log: list[tuple[str, int, str]],
    faults: list[dict],
) -> Verdict:
    v = Verdict(campaign)
    sections = [r for r in records if "e" in r]
    failed = [r for r in records if "e" not in r]
    v.sections, v.lost = len(sections), sum(r["l"] for r in sections)
    v.failures = Counter(r["err"] for r in failed)
    v.nemesis = Counter(f["kind"] for f in faults)
    torn = [r["b"] for r in failed if r["err"] == "InvalidLockFile"]
    if torn and campaign.protocol == "lww":
        v.torn_after = sum(r["e"] < min(torn) for r in sections)
        failed = [r for r in failed if r["err"] != "InvalidLockFile"]
    held = sorted((r for r in sections if not r["l"]), key=lambda r: r["e"])
    by_lock: dict[object, list[dict]] = {}
    for r in sorted(sections, key=lambda r: r["e"]):
        by_lock.setdefault(r.get("s"), []).append(r)
    for slot in by_lock.values():
        _overlaps(v, [r for r in slot if not r["l"]])
        _intrusions(v, slot)
        _inversions(v, slot)
    if campaign.kind == "semaphore":
        _most_inside(v, held)
    _fence(v, sections, fence_log)
    _waits(v, sections, failed, faults)
    _liveness(v, sections)
    return v


def _example(v: Verdict, what: str) -> None:
    if len(v.examples) < 10:
        v.examples.append(what)


def _overlaps(v: Verdict, held: list[dict]) -> None:
    """Held sections of one lock, in the order they began."""
    last = None
    for r in held:
        if last is not None and r["e"] < last["x"]:
            v.overlaps += 1
            _example(v, f"overlap: {_show(last)} and {_show(r)}")
        if last is None or r["x"] > last["x"]:
            last = r


def _intrusions(v: Verdict, began: list[dict]) -> None:
    """The sections of one lock, in the order they began."""
    last = None  # the held section that ends last among those begun so far
    for r in began:
        if r["l"] and last is not None and r["e"] < last["x"] and r["t"] > last["t"]:
            v.intrusions += 1
            _example(v, f"intrusion: {_show(r)} began inside {_show(last)}")
        if not r["l"] and (last is None or r["x"] > last["x"]):
            last = r


def _inversions(v: Verdict, began: list[dict]) -> None:
    """The sections of one lock, in the order they began."""
    top = None
    for r in began:
        if not r["l"] and top is not None and r["t"] <= top["t"]:
            v.inversions += 1
            _example(v, f"token inversion: {_show(top)} began before {_show(r)}")
        if top is None or r["t"] > top["t"]:
            top = r


def _most_inside(v: Verdict, held: list[dict]) -> None:
    # At equal times an exit comes first: a section that left as another entered was not
    # inside with it.
    moments = sorted([(r["e"], 1) for r in held] + [(r["x"], -1) for r in held])
    inside = 0
    for _, step in moments:
        inside += step
        if step > 0 and inside > v.campaign.slots:
            v.above_slots += 1
        v.most_inside = max(v.most_inside, inside)
    if v.above_slots:
        _example(v, f"{v.above_slots} entries above {v.campaign.slots} holders")


def _fence(v: Verdict, sections: list[dict], log: list[tuple[str, int, str]]) -> None:
    v.accepted = len(log)
    v.stale_refused = sum(1 for r in sections if not r["f"])
    for r in sections:
        if not r["f"] and not r["l"]:
            v.refused_while_held += 1
            _example(v, f"write refused while held: {_show(r)}")
    last: dict[str, tuple[int, str]] = {}
    for key, token, owner in log:
        before = last.get(key)
        if before is not None and (
            token < before[0] or (token == before[0] and owner != before[1])
        ):
            v.stale_accepted += 1
            _example(v, f"stale write accepted on {key}: {token} {owner} after {before}")
        if before is None or token > before[0]:
            last[key] = (token, owner)


def _paused(faults: list[dict]) -> dict[int, list[tuple[float, float]]]:
    spans: dict[int, list[tuple[float, float]]] = {}
    for f in faults:
        if f["kind"] == "pause":
            spans.setdefault(f["pid"], []).append((f["at"], f["until"]))
    return spans


def _waits(v: Verdict, sections: list[dict], failed: list[dict], faults: list[dict]) -> None:
    c = v.campaign
    waits = sorted(r["wt"] for r in sections)
    if waits:
        v.waits = (_quantile(waits, 0.5), _quantile(waits, 0.99), waits[-1])
    paused = _paused(faults)
    for r in sections + failed:
        began = r["e"] - r["wt"] if "e" in r else r["b"]
        ended = began + r["wt"]
        if r["wt"] > c.wait_bound and not any(
            a < ended and began < b for a, b in paused.get(r["p"], ())
        ):
            v.waits_past_bound += 1
            _example(v, f"wait of {r['wt']:.1f} s, bound {c.wait_bound:.1f} s: worker {r['w']}")
        elif "e" not in r and began >= c.quiet_start + c.settle and r["err"] != "LockTimeout":
            v.waits_past_bound += 1
            _example(v, f"acquisition failed after faults healed: {r}")


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def _liveness(v: Verdict, sections: list[dict]) -> None:
    quiet = {r["w"] for r in sections if r["e"] >= v.campaign.quiet_start}
    v.silent_workers = [w for w in range(v.campaign.workers) if w not in quiet]


def _show(r: dict) -> str:
    slot = f" slot {r['s']}" if "s" in r else ""
    return (
        f"[worker {r['w']} pid {r['p']}{slot} token {r['t']} {r['e']:.6f}..{r['x']:.6f}"
        f"{' lost' if r['l'] else ''}]"
    )


# -- reading a campaign's folder -------------------------------------------------------


def load(work: Path) -> tuple[list[dict], list[tuple[str, int, str]], list[dict]]:
    """The records, the fenced resource's accepted writes and the faults in ``work``. A
    last line cut by a SIGKILL is left out."""
    records = []
    for path in sorted((work / "records").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    fence = []
    for line in (work / "fence.log").read_text().splitlines():
        if line and not line.startswith("#"):
            key, token, owner = line.split()
            fence.append((key, int(token), owner))
    nemesis = work / "nemesis.jsonl"
    faults = [json.loads(x) for x in nemesis.read_text().splitlines()] if nemesis.exists() else []
    return records, fence, faults
