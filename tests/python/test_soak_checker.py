"""The soak's checker (tests/soak/checker.py) on histories written by hand: it flags each
violation the soak exists to find (an overlap, an intrusion, a token inversion, a stale
write accepted, a write refused while held, a semaphore above its number, a worker silent
in the quiet phase, a wait past its bound) and passes a history that has none. No servers:
the soak itself (`make soak`) runs the stores."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "soak"))

from checker import Campaign, check

QUIET = 100.0


def campaign(**kw) -> Campaign:
    facts = dict(
        store="files",
        kind="lock",
        protocol="cas",
        workers=2,
        slots=1,
        quiet_start=QUIET,
        settle=4.0,
        wait_bound=25.0,
    )
    facts.update(kw)
    return Campaign(**facts)


def section(w, enter, exit, token, lost=0, wait=0.01, fenced=1, slot=None) -> dict:
    r = {"w": w, "p": 1000 + w, "e": enter, "x": exit, "t": token, "o": f"owner-{token}"}
    r.update(l=lost, wt=wait, f=fenced)
    if slot is not None:
        r["s"] = slot
    return r


def quiet_sections(workers=2, token=1000) -> list[dict]:
    """A section per worker in the quiet phase, one after the other."""
    return [section(w, QUIET + 1 + w, QUIET + 1.5 + w, token + w) for w in range(workers)]


def fence_of(records) -> list[tuple[str, int, str]]:
    ordered = sorted((r for r in records if r.get("f")), key=lambda r: r["x"])
    return [(f"slot-{r['s']}" if "s" in r else "lock", r["t"], r["o"]) for r in ordered]


def verdict(records, fence=None, faults=(), **kw):
    return check(campaign(**kw), records, fence_of(records) if fence is None else fence, faults)


def test_a_clean_history_passes():
    records = [section(0, 1.0, 2.0, 1), section(1, 2.5, 3.0, 2), *quiet_sections()]
    v = verdict(records)
    assert v.violations() == [], v.examples
    assert v.sections == 4 and v.lost == 0
    assert "ok" in v.line()


def test_two_held_sections_that_overlap_are_flagged():
    records = [section(0, 1.0, 2.0, 1), section(1, 1.5, 2.5, 2), *quiet_sections()]
    v = verdict(records)
    assert v.overlaps == 1
    assert any("overlaps: 1" in x for x in v.violations())


def test_an_overlap_with_a_section_reported_lost_is_not_one():
    """A holder paused past its lease and told so at the end of its block: the next holder
    entered while it slept, and the holder knew."""
    records = [
        section(0, 1.0, 5.0, 1, lost=1, fenced=0),
        section(1, 3.5, 4.0, 2),
        *quiet_sections(),
    ]
    v = verdict(records)
    assert v.overlaps == 0 and v.inversions == 0
    assert v.violations() == []
    assert v.lost == 1 and v.stale_refused == 1


def test_a_lost_section_that_acquired_while_another_held_is_an_intrusion():
    """A section told at its end that it had lost the lock, which began inside a held one
    with a larger token: it acquired after the holder, while the holder held (a conflict
    taken for success). With a smaller token it acquired first and was taken over while
    paused before it began: no fault of the lock's."""
    records = [section(0, 1.0, 3.0, 10), section(1, 2.0, 2.5, 11, lost=1), *quiet_sections()]
    v = verdict(records)
    assert v.intrusions == 1 and v.overlaps == 0
    assert any("intrusions: 1" in x for x in v.violations())
    records = [section(0, 1.0, 3.0, 10), section(1, 2.0, 2.5, 9, lost=1), *quiet_sections()]
    assert verdict(records).violations() == []


def test_a_held_token_below_an_earlier_one_is_an_inversion():
    records = [section(0, 1.0, 2.0, 5), section(1, 3.0, 4.0, 4), *quiet_sections()]
    v = verdict(records, fence=[])
    assert v.inversions == 1
    assert any("inversions: 1" in x for x in v.violations())


def test_a_lost_sections_token_must_be_below_every_later_held_one():
    # A lost section that began first with a larger token: the later held one is inverted.
    records = [section(0, 1.0, 1.2, 7, lost=1), section(1, 2.0, 3.0, 6), *quiet_sections()]
    assert verdict(records, fence=[]).inversions == 1
    # A lost section that began later with a smaller token (paused between its acquisition
    # and its entry): no inversion.
    records = [section(0, 1.0, 2.0, 6), section(1, 2.5, 9.0, 5, lost=1), *quiet_sections()]
    assert verdict(records, fence=[]).inversions == 0


def test_equal_tokens_of_two_owners_accepted_by_the_resource_are_a_stale_write():
    records = [section(0, 1.0, 2.0, 1), section(1, 3.0, 4.0, 2), *quiet_sections()]
    fence = [("lock", 1, "owner-1"), ("lock", 1, "someone-else"), ("lock", 2, "owner-2")]
    v = verdict(records, fence=fence)
    assert v.stale_accepted == 1
    assert any("stale accepted: 1" in x for x in v.violations())


def test_a_write_refused_while_held_is_flagged():
    records = [section(0, 1.0, 2.0, 1, fenced=0), *quiet_sections()]
    v = verdict(records)
    assert v.refused_while_held == 1 and v.stale_refused == 1
    assert any("refused while held" in x for x in v.violations())


def test_a_worker_with_no_section_in_the_quiet_phase_is_flagged():
    records = [section(0, 1.0, 2.0, 1), section(1, 3.0, 4.0, 2), *quiet_sections(1)]
    v = verdict(records)
    assert v.silent_workers == [1]
    assert any("no section in the quiet phase" in x for x in v.violations())


def test_a_semaphore_never_has_more_holders_than_slots():
    inside_three = [
        section(0, 1.0, 3.0, 1, slot=0),
        section(1, 1.5, 3.0, 1, slot=1),
        section(2, 2.0, 3.0, 5, slot=2),
        *quiet_sections(3),
    ]
    v = verdict(inside_three, kind="semaphore", slots=2, workers=3)
    assert v.most_inside == 3 and v.above_slots == 1
    # The same with the third slot a lock of a semaphore of three: fine.
    assert verdict(inside_three, kind="semaphore", slots=3, workers=3).violations() == []
    # A slot's own holders overlapping are an overlap, whatever the other slots do.
    twice = [section(0, 1.0, 3.0, 1, slot=0), section(1, 2.0, 4.0, 2, slot=0)]
    assert verdict([*twice, *quiet_sections()], kind="semaphore", slots=2).overlaps == 1


def test_a_wait_past_its_bound_is_flagged_unless_the_worker_was_paused():
    long_wait = section(1, 40.0, 41.0, 2, wait=30.0)
    records = [section(0, 1.0, 2.0, 1), long_wait, *quiet_sections()]
    assert verdict(records).waits_past_bound == 1
    paused = [{"kind": "pause", "pid": 1001, "at": 15.0, "until": 18.2}]
    assert verdict(records, faults=paused).waits_past_bound == 0


def test_an_acquisition_that_fails_after_faults_healed_is_flagged():
    failed = {"w": 0, "p": 1000, "b": QUIET + 5.0, "wt": 1.2, "err": "StoreError"}
    v = verdict([*quiet_sections(), failed])
    assert v.waits_past_bound == 1 and v.failures["StoreError"] == 1
    # The same failure during the faults is a figure, not a violation; and so is a timeout
    # after they healed (contention: the wait ended within its bound).
    early = dict(failed, b=10.0)
    assert verdict([*quiet_sections(), early]).violations() == []
    timed_out = dict(failed, wt=20.0, err="LockTimeout")
    assert verdict([*quiet_sections(), timed_out]).violations() == []


def test_lww_overlaps_are_its_figure_not_a_failure():
    records = [section(0, 1.0, 2.0, 1), section(1, 1.5, 2.5, 2), *quiet_sections()]
    v = verdict(records, protocol="lww", store="s3rver")
    assert v.overlaps == 1 and v.violations() == []
    assert "lww: 25.000% of held sections" in v.line()


def test_a_lockfile_torn_by_an_lww_store_is_its_figure_and_a_failure_under_cas():
    # Two sections, then the store tears the lockfile (two writes at once, written in place):
    # every acquisition from then on, the quiet phase's too, fails as unreadable.
    torn = [
        {"w": w, "p": 1000 + w, "b": at, "wt": 1.9, "err": "InvalidLockFile"}
        for w in range(2)
        for at in (5.0, QUIET + 5.0)
    ]
    records = [section(0, 1.0, 2.0, 1), section(1, 3.0, 4.0, 2), *torn]
    v = verdict(records, protocol="lww", store="s3rver")
    assert v.torn_after == 2 and v.violations() == []
    assert "the lockfile torn by the store after 2 sections" in v.line()
    # Under cas the same history is a failure: nothing there excuses an unreadable lockfile.
    v = verdict(records)
    assert v.torn_after is None
    assert v.silent_workers == [0, 1] and v.waits_past_bound == 2, v.violations()
