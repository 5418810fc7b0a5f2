"""Both replays' timelines on one chart: what a config change did to each page.

One lane per detector and job (or TaskManager), split in two: the baseline's incidents on
top, the new config's below, each a bar from its page to its resolve (hatched while still
open at the end of the files). Each page is a marker coloured by what the new config did
to it (gained, lost, earlier, later, unchanged), and an arrow joins a moved page to where
it moved. Drawn like the evidence charts (:mod:`sinks.charts.frame`: 720 x 360 px, UTC).
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from sinks.charts.frame import GREY, at, figure, legend_below, png, safe, style, subtitle, time_axis
from sinks.reports.compare import Change, Comparison, Difference, Page

#: Lanes drawn at most (the table under the chart lists every page).
MAX_LANES = 8

#: What each change looks like (Okabe-Ito colours, as the evidence charts).
COLOURS = {
    Change.GAINED: "#009e73",
    Change.LOST: "#d55e00",
    Change.EARLIER: "#0072b2",
    Change.LATER: "#e69f00",
    Change.UNCHANGED: GREY,
}

_BASE, _NEW = -0.18, 0.18  # the two runs' offsets within a lane


def comparison_chart(comparison: Comparison) -> bytes | None:
    """The chart as PNG bytes; ``None`` when neither run paged."""
    if not comparison.differences:
        return None
    # A lane per detector and entity (two jobs of one name are two lanes).
    lanes = list(dict.fromkeys(_lane(d) for d in comparison.differences))
    shown = lanes[:MAX_LANES]
    diffs = [d for d in comparison.differences if _lane(d) in shown]
    pages = [p for d in diffs for p in (d.baseline, d.new) if p is not None]
    start = min(p.paged_ms for p in pages)
    end = max(max(p.paged_ms, p.resolved_ms or 0) for p in pages)
    pad = max((end - start) // 20, 30_000)
    fig, (ax,) = figure()
    for d in diffs:
        y = shown.index(_lane(d))
        colour = COLOURS[d.change]
        for page, dy, marker in ((d.baseline, _BASE, "s"), (d.new, _NEW, "o")):
            if page is not None:
                _bar(ax, page, y + dy, end + pad, colour, marker)
        if d.baseline is not None and d.new is not None and d.delta_ms:
            ax.annotate(
                "",
                xy=(at(d.new.paged_ms), y + _NEW),
                xytext=(at(d.baseline.paged_ms), y + _BASE),
                arrowprops={"arrowstyle": "->", "color": colour, "lw": 1.2},
            )
    ax.set_yticks(range(len(shown)), [f"{safe(det, 34)}\n{safe(who, 34)}" for det, who, _ in shown])
    ax.set_ylim(-0.6, len(shown) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(at(start - pad), at(end + 2 * pad))
    style(ax, "")
    ax.tick_params(axis="y", labelsize=7)
    time_axis(ax)
    keys: list[Patch | Line2D] = [Patch(color=c, label=ch.value) for ch, c in COLOURS.items()]
    keys.append(Line2D([], [], color=GREY, marker="s", ls="", label="baseline: upper bar"))
    keys.append(Line2D([], [], color=GREY, marker="o", ls="", label="new: lower bar"))
    legend_below(fig, keys, ncols=4)
    t = comparison.totals()
    head = ", ".join(f"{t[c]} {c.value}" for c in Change if t[c])
    fig.suptitle(
        f"baseline vs new config: {head}", fontsize=11, fontweight="bold", x=0.01, ha="left"
    )
    more = len(lanes) - len(shown)
    subtitle(
        fig,
        "each lane: baseline above, new below; bars from page to resolve (hatched: open)"
        + (f"; {more} more lane{'s' if more > 1 else ''} in the table" if more else ""),
    )
    return png(fig)


def _lane(d: Difference) -> tuple[str, str, str]:
    return (d.page.detector, d.page.subject, d.page.entity)


def _bar(ax: Axes, page: Page, y: float, open_end_ms: int, colour: str, marker: str) -> None:
    """One incident: a bar from its page to its resolve, a marker at the page."""
    closed = page.resolved_ms is not None
    stop = page.resolved_ms if page.resolved_ms is not None else open_end_ms
    ax.barh(
        y,
        at(max(stop, page.paged_ms + 1)) - at(page.paged_ms),
        left=at(page.paged_ms),
        height=0.3,
        color=colour,
        alpha=0.6 if closed else 0.35,
        hatch=None if closed else "//",
        edgecolor=colour,
    )
    ax.plot([at(page.paged_ms)], [y], marker, color=colour, markeredgecolor="black", markersize=5)
