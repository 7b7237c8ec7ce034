"""The pictures of a benchmark run, as SVG files the documentation embeds (docs/benchmarks.md).

Each section of bench/run.py leaves its raw figures in the report (``Report.figures``);
this module draws them with matplotlib, whose SVG output is text a diff can read: fonts
stay text, and neither ids nor metadata change from one drawing of the same figures to
the next. Only ``make bench`` needs it (matplotlib is not a test or runtime dependency).

What each picture shows is kept beside it in ``figures.json`` (a distribution's points as
drawn, a bar's value, the run's caption), so that a change to how they look redraws them
without a new run:

    .venv/bin/python bench/figures.py docs/figures
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from common import Figure

# One colour per library in every picture, blob-lock's the strongest.
COLOURS = {
    "blob-lock": "#1f5fa8",
    "blob-lock, reused": "#7fa7d6",
    "flufl.lock": "#d9822b",
    "filelock": "#3a9a5b",
    "mops": "#9b59b6",
    "cas": "#1f5fa8",
    "lww": "#d9822b",
    "held through the hold": "#1f5fa8",
    "refused at once (StoreSaturated)": "#9a9a9a",
    "lost while held": "#c0392b",
}
OTHERS = ["#555555", "#b23a48", "#c9a227", "#2a9d8f"]
STEPS = 300
DATA = "figures.json"


def colour(name: str, i: int) -> str:
    return COLOURS.get(name, OTHERS[i % len(OTHERS)])


def draw(figures: dict[str, Figure], folder: Path, caption: str) -> list[Path]:
    """Writes ``folder/NAME.svg`` for each figure, and what it shows into
    ``folder/figures.json`` (beside the entries of pictures this run did not draw, a run of
    some sections leaving the others' pictures as they are); returns the paths drawn."""
    folder.mkdir(parents=True, exist_ok=True)
    data = json.loads((folder / DATA).read_text()) if (folder / DATA).exists() else {}
    drawn = {name: shown(fig, caption) for name, fig in figures.items()}
    data.update(drawn)
    (folder / DATA).write_text(dumps(data))
    return render(drawn, folder)


def dumps(data: dict) -> str:
    """One line a picture: a run's diff shows which pictures changed."""
    lines = [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in data.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def shown(fig: Figure, caption: str) -> dict:
    """What the picture of ``fig`` shows, as JSON: for a distribution, each series' count
    and at most STEPS + 1 of its points (the worst case always among them), which draw the
    same curve as thousands of samples."""
    out = {
        "title": fig.title,
        "kind": fig.kind,
        "xlabel": fig.xlabel,
        "ylabel": fig.ylabel,
        "groups": fig.groups,
        "log": fig.log,
        "note": fig.note,
        "caption": caption,
    }
    if fig.kind == "ecdf":
        out["series"] = {}
        for name, samples in fig.series.items():
            if not samples:
                continue
            xs = sorted(samples)
            keep = sorted({min(len(xs) - 1, k * len(xs) // STEPS) for k in range(STEPS + 1)})
            out["series"][name] = {
                "n": len(xs),
                "x": [float(f"{xs[k]:.6g}") for k in keep],
                "y": [round((k + 1) / len(xs), 6) for k in keep],
            }
    else:
        out["series"] = {name: list(values) for name, values in fig.series.items()}
    return out


def render(figures: dict[str, dict], folder: Path) -> list[Path]:
    """Draws each picture of ``figures`` (as ``shown`` gives them) into ``folder/NAME.svg``."""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    # Stable output: text as text, fixed ids, no creation date.
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "blob-lock", "font.size": 10})
    written = []
    for name, fig in figures.items():
        canvas, ax = plt.subplots(figsize=(7.5, 4.2))
        ax.set_title(fig["title"], loc="left", fontsize=11)
        ax.set_xlabel(fig["xlabel"])
        ax.set_ylabel(fig["ylabel"])
        if fig["kind"] == "ecdf":
            ecdf(ax, fig)
        elif fig["kind"] == "bars":
            bars(ax, fig)
        else:
            raise ValueError(f"figure {name}: unknown kind {fig['kind']!r}")
        ax.grid(True, which="major", axis="both", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
        canvas.text(0.01, 0.01, f"{fig['note']} {fig['caption']}".strip(), fontsize=7,
                    color="#666666")  # fmt: skip
        canvas.tight_layout(rect=(0, 0.04, 1, 1))
        path = folder / f"{name}.svg"
        canvas.savefig(path, format="svg", metadata={"Date": None})
        plt.close(canvas)
        written.append(path)
    return written


def ecdf(ax, fig: dict) -> None:
    """Each series as the share of its samples at or under a value: a latency distribution
    whose median, tail and worst case read off one curve."""
    xs = []
    for i, (name, s) in enumerate(fig["series"].items()):
        ax.step(s["x"], s["y"], where="post", color=colour(name, i), label=f"{name} (n={s['n']})")
        xs += s["x"]
    if fig["log"]:
        ax.set_xscale("log")
    time_ticks(ax, min(xs), max(xs), fig["log"])
    ax.set_ylim(0, 1.01)
    ax.set_ylabel(fig["ylabel"] or "share at or under")
    # Beside the axes, where it hides no curve.
    ax.legend(frameon=False, fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))


def bars(ax, fig: dict) -> None:
    """Grouped bars: one group per case, one bar per series, each labelled with its value."""
    n = len(fig["series"])
    width = 0.8 / max(1, n)
    for i, (name, values) in enumerate(fig["series"].items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(fig["groups"]))]
        drawn = ax.bar(xs, values, width, label=name, color=colour(name, i))
        labels = [f"{v:,.0f}" if v >= 10 else f"{v:.3g}" for v in values]
        ax.bar_label(drawn, labels=labels, fontsize=7, padding=1)
    ax.set_xticks(range(len(fig["groups"])), fig["groups"], fontsize=8)
    if fig["log"]:
        ax.set_yscale("log")
    if n > 1:  # beside the axes, where it hides no bar and no bar's label
        ax.legend(frameon=False, fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1))


def time_ticks(ax, lo: float, hi: float, log: bool) -> None:
    """Seconds on the x axis labelled in their own unit (300 µs, 2 ms, 1.5 s). On a log axis
    every decade gets labels between its powers of ten, as many as fit: 1, 2 and 5 over up to
    two and a half decades, 1 and 3 over up to five, else the powers alone."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    if log:
        decades = math.log10(hi / lo) if lo > 0 else 6
        subs = (1.0, 2.0, 5.0) if decades <= 2.5 else (1.0, 3.0) if decades <= 5 else (1.0,)
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
        ax.xaxis.set_minor_locator(LogLocator(base=10, subs=[k for k in range(1, 10)]))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: seconds(v)))
    ax.tick_params(axis="x", labelsize=8)


def seconds(v: float) -> str:
    if v <= 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if v >= scale * 0.9999 or unit == "µs":
            return f"{v / scale:.3g} {unit}"
    raise AssertionError("unreachable")


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/figures")
    for drawn_path in render(json.loads((target / DATA).read_text()), target):
        print(f"drew {drawn_path}", file=sys.stderr)
