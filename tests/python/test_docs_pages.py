"""The benchmark page (docs/benchmarks.md) shows all of BENCHMARKS.md, each picture of the
last run under the section it shows."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

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
