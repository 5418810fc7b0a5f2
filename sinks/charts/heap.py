"""The chart of ``idle_heap_growth``: the post-GC heap floor beside records in/out."""

from __future__ import annotations

from statistics import median

from matplotlib.figure import Figure

from detectors.idle_heap_growth import IdleHeapGrowthEvidence
from detectors.model import Alert
from sinks.charts.frame import (
    FIT,
    GREY,
    LIMIT,
    PALETTE,
    figure,
    legend,
    log_scale,
    style,
    time_axis,
    times,
    title,
)

_HOUR_MS = 3_600_000
_LOG_ABOVE = 4.0


def idle_heap(alert: Alert, ev: IdleHeapGrowthEvidence) -> Figure | None:
    """Heap floor per bucket with its fitted growth (top), records per second (bottom)."""
    buckets = ev.buckets
    floors = [(b.t, b.floor_mb) for b in buckets if b.floor_mb is not None]
    if not floors:
        return None
    fig, (heap_ax, rec_ax) = figure(2, heights=[3, 1.3])
    heap_ax.plot(
        times(t for t, _ in floors),
        [f for _, f in floors],
        "o-",
        color=PALETTE[0],
        markersize=4,
        linewidth=1,
        label="post-GC heap floor",
    )
    slope = ev.growth_mb_per_h
    if len(floors) >= 2:
        # Sen's median intercept for the slope the detector measured (MB per hour).
        level = median(f - slope * t / _HOUR_MS for t, f in floors)
        ends = [floors[0][0], floors[-1][0]]
        heap_ax.plot(
            times(ends),
            [level + slope * t / _HOUR_MS for t in ends],
            "--",
            color=FIT,
            linewidth=1.6,
            label=f"fitted growth ({slope:+,.0f} MB/h)",
        )
    top = max(f for _, f in floors)
    if ev.heap_max_mb:
        heap_ax.axhline(
            ev.heap_max_mb,
            color=LIMIT,
            linestyle=":",
            linewidth=1.4,
            label=f"Heap_Max {ev.heap_max_mb:,.0f} MB",
        )
        if ev.heap_max_mb > _LOG_ABOVE * top:
            log_scale(heap_ax)
    style(heap_ax, "heap used after GC (MB)")
    legend(heap_ax, loc="upper left")

    starts = [b.t for b in buckets]
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False) if b > a]
    width_days = (min(gaps) if gaps else 300_000) * 0.8 / 86_400_000
    rates = [b.rate or 0.0 for b in buckets]
    colours = [LIMIT if b.moved else PALETTE[2] for b in buckets]
    rec_ax.bar(times(starts), rates, width=width_days, color=colours, align="edge")
    unseen = [b.t for b in buckets if b.rate is None]
    if unseen:
        rec_ax.plot(
            times(unseen),
            [0] * len(unseen),
            "|",
            color=GREY,
            markersize=8,
            label="no throughput sample",
        )
    moved = [b.t for b in buckets if b.moved]
    if moved:
        rec_ax.plot(
            times(moved), [0] * len(moved), "^", color=LIMIT, markersize=6, label="records moved"
        )
    rec_ax.set_ylim(0, max(1.0, max(rates) * 1.2))
    if not moved and not any(rates):
        rec_ax.text(
            0.5,
            0.5,
            "zero records in and out",
            transform=rec_ax.transAxes,
            ha="center",
            va="center",
            fontsize=8,
            color=PALETTE[2],
        )
    style(rec_ax, "records/s")
    legend(rec_ax, loc="upper left")
    time_axis(rec_ax)
    idle = f"idle {ev.idle_s / 60:.0f} min" if ev.idle_s else None
    title(fig, alert, idle)
    return fig
