"""The documentation's pages (README.md and docs/**/*.md) say what is true now: today's
behaviour and figures, a figure with its date where it needs one, and the history in git
log. BENCHMARKS.md is the place for dated measurements and is left out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MOST_DATED_LINES = 3

MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December)"
)
# 2026-11-28, 2026-11; "November 2024", "November 28, 2026", "28 November 2026".
DATE = re.compile(
    rf"\b\d{{4}}-\d{{2}}(?:-\d{{2}})?\b|\b{MONTH} (?:\d{{1,2}}, )?\d{{4}}\b"
    rf"|\b\d{{1,2}} {MONTH} \d{{4}}\b"
)
FENCE = re.compile(r"^\s*(```|~~~)")


def dated_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside code blocks that carry a date, with their numbers (a timestamp in an
    example's output is no statement of when something was)."""
    found, in_code = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_code = not in_code
        elif not in_code and DATE.search(line):
            found.append((number, line.strip()))
    return found


def test_the_date_pattern_finds_what_it_should():
    text = (
        "took 524 s (2026-11-27)\nsince August 2024, a store\n"
        "```\nwritten_at 2026-11-27T23:44:01Z\n```\nport 2026 and 10-20 % drift\n"
    )
    assert [n for n, _ in dated_lines(text)] == [1, 2]


def test_each_page_has_at_most_three_dated_lines():
    assert len(PAGES) > 15, "the pages were not found"
    over = {}
    for page in PAGES:
        lines = dated_lines(page.read_text())
        if len(lines) > MOST_DATED_LINES:
            over[str(page.relative_to(ROOT))] = lines
    if over:
        pytest.fail(
            f"pages with more than {MOST_DATED_LINES} dated lines (say what is true now; keep a "
            "date only where a figure needs one, put dated measurements in BENCHMARKS.md and "
            "leave the history to git log):\n"
            + "\n".join(
                f"{page}: {len(lines)} dated lines\n"
                + "\n".join(f"  line {n}: {line[:120]}" for n, line in lines)
                for page, lines in over.items()
            ),
            pytrace=False,
        )


SECTION = re.compile(r"^<!-- --8<-- \[(start|end):([\w-]+)\] -->$", re.M)


def test_the_benchmark_page_shows_all_of_benchmarks_md_each_picture_under_its_section():
    """docs/benchmarks.md includes BENCHMARKS.md in sections, each picture after the one it
    shows: every line of BENCHMARKS.md below its title is in a section the page includes, in
    order, and every picture of docs/figures/ is on the page, after a section."""
    source = (ROOT / "BENCHMARKS.md").read_text()
    markers = [(m.group(1), m.group(2), m.start(), m.end()) for m in SECTION.finditer(source)]
    names = [name for kind, name, _, _ in markers if kind == "start"]
    assert markers and [(k, n) for k, n, _, _ in markers] == [
        (kind, name) for name in names for kind in ("start", "end")
    ], f"BENCHMARKS.md's sections do not open and close in turn: {markers}"
    outside = source[: markers[0][2]].strip().splitlines()[1:]  # the title alone above
    outside += [source[a[3] : b[2]].strip() for a, b in zip(markers[1::2], markers[2::2])]
    outside.append(source[markers[-1][3] :].strip())
    assert not any(outside), f"BENCHMARKS.md has text outside its sections: {outside}"

    page = (ROOT / "docs" / "benchmarks.md").read_text()
    included = re.findall(r'^--8<-- "BENCHMARKS\.md:([\w-]+)"$', page, re.M)
    assert included == names, f"docs/benchmarks.md includes {included}, BENCHMARKS.md has {names}"
    blocks = [b.strip() for b in page.split("\n\n")]
    for svg in sorted((ROOT / "docs" / "figures").glob("*.svg")):
        at = [i for i, b in enumerate(blocks) if f"(figures/{svg.name})" in b]
        assert at, f"docs/figures/{svg.name} is not shown on docs/benchmarks.md"
        before = blocks[at[0] - 1]
        assert before.startswith('--8<-- "BENCHMARKS.md:'), (
            f"docs/figures/{svg.name} does not follow a section of BENCHMARKS.md: {before!r}"
        )
