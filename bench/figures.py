"""The pictures of a benchmark run, as SVG files the documentation embeds (docs/benchmarks.md).

Each section of bench/run.py leaves its raw figures in the report (``Report.figures``);
this module draws them with matplotlib, whose SVG output is text a diff can read: fonts
stay text, and neither ids nor metadata change from one drawing of the same figures to
the next. Only ``make bench`` needs it (matplotlib is not a test or runtime dependency).
"""

from __future__ import annotations

from pathlib import Path

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


def colour(name: str, i: int) -> str:
    return COLOURS.get(name, OTHERS[i % len(OTHERS)])


def draw(figures: dict[str, Figure], folder: Path, caption: str) -> list[Path]:
    """Writes ``folder/NAME.svg`` for each figure and returns the paths written."""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    # Stable output: text as text, fixed ids, no creation date.
    plt.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "blob-lock", "font.size": 10})
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures.items():
        canvas, ax = plt.subplots(figsize=(7.5, 4.2))
        ax.set_title(fig.title, loc="left", fontsize=11)
        ax.set_xlabel(fig.xlabel)
        ax.set_ylabel(fig.ylabel)
        if fig.kind == "ecdf":
            ecdf(ax, fig)
        elif fig.kind == "bars":
            bars(ax, fig)
        else:
            raise ValueError(f"figure {name}: unknown kind {fig.kind!r}")
        ax.grid(True, which="major", axis="both", alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
        canvas.text(0.01, 0.01, f"{fig.note} {caption}".strip(), fontsize=7, color="#666666")
        canvas.tight_layout(rect=(0, 0.04, 1, 1))
        path = folder / f"{name}.svg"
        canvas.savefig(path, format="svg", metadata={"Date": None})
        plt.close(canvas)
        written.append(path)
    return written


def ecdf(ax, fig: Figure) -> None:
    """Each series' samples as the share of them at or under a value: a latency
    distribution whose median, tail and worst case read off one curve."""
    unit, scale = time_unit(max(max(s) for s in fig.series.values() if s))
    for i, (name, samples) in enumerate(fig.series.items()):
        if not samples:
            continue
        xs = sorted(x * scale for x in samples)
        # At most STEPS points a curve (the worst case always among them): the picture is
        # the same, and the file a tenth of the size for thousands of samples.
        keep = sorted({min(len(xs) - 1, k * len(xs) // STEPS) for k in range(STEPS + 1)})
        ys = [(k + 1) / len(xs) for k in keep]
        ax.step([xs[k] for k in keep], ys, where="post", color=colour(name, i),
                label=f"{name} (n={len(xs)})")  # fmt: skip
    if fig.log:
        ax.set_xscale("log")
    ax.set_ylim(0, 1.01)
    ax.set_xlabel(f"{fig.xlabel} ({unit})")
    ax.set_ylabel(fig.ylabel or "share at or under")
    ax.legend(frameon=False, fontsize=9)


def bars(ax, fig: Figure) -> None:
    """Grouped bars: one group per case, one bar per series, each labelled with its value."""
    n = len(fig.series)
    width = 0.8 / max(1, n)
    for i, (name, values) in enumerate(fig.series.items()):
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(fig.groups))]
        drawn = ax.bar(xs, values, width, label=name, color=colour(name, i))
        labels = [f"{v:,.0f}" if v >= 10 else f"{v:.3g}" for v in values]
        ax.bar_label(drawn, labels=labels, fontsize=7, padding=1)
    ax.set_xticks(range(len(fig.groups)), fig.groups, fontsize=8)
    if fig.log:
        ax.set_yscale("log")
    if n > 1:  # upper left: the first group's bars are the shortest in every picture so far
        ax.legend(frameon=False, fontsize=9, loc="upper left")


def time_unit(largest: float) -> tuple[str, float]:
    if largest < 2e-3:
        return "µs", 1e6
    if largest < 2:
        return "ms", 1e3
    return "s", 1.0
