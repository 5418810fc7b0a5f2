"""What every evidence chart shares: the canvas, the title, a UTC time axis, safe text, PNG.

Each chart is drawn on its own :class:`~matplotlib.figure.Figure` with the Agg canvas
attached by hand: no ``pyplot``, so no global figure registry, no backend switch and no
GUI toolkit, and the driver may render on several threads at once.
"""

from __future__ import annotations

import datetime as dt
import io
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from typing import Literal

from matplotlib import dates as mdates
from matplotlib import font_manager, ft2font
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from detectors.model import Alert, AlertStatus, Severity
from detectors.tm_ids import tm_key

#: The chart's size: 720 x 360 px, what a Slack message shows without a click.
WIDTH_IN, HEIGHT_IN, DPI = 7.2, 3.6, 100
FONT = "DejaVu Sans"  # ships with matplotlib: the same glyphs on every machine
#: Text from the input (job names, hosts, causes) is cut to this many characters.
MAX_LABEL = 48
MAX_TITLE = 90

#: Colours, colour-blind safe (Okabe-Ito), in the order series take them.
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000")
GREY = "#8c8c8c"
LIMIT = "#c0392b"  # thresholds: the timeout, Heap_Max, the heap share
FIT = "#d55e00"
SEVERITY = {Severity.INFO: "#56b4e9", Severity.WARNING: "#e69f00", Severity.CRITICAL: "#c0392b"}


def figure(rows: int = 1, *, heights: Sequence[float] | None = None) -> tuple[Figure, list[Axes]]:
    """A new 720 x 360 figure with ``rows`` axes stacked on a shared x axis."""
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    if rows == 1:
        return fig, [fig.add_subplot()]
    axes = fig.subplots(rows, 1, sharex=True, height_ratios=heights)
    return fig, list(axes)


def png(fig: Figure) -> bytes:
    """The figure as PNG bytes, at its own size (no tight bounding box: always 720 x 360)."""
    buf = io.BytesIO()
    # No software/date metadata: the same evidence gives the same bytes.
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


@cache
def _drawable() -> frozenset[int]:
    """The code points the chart font has glyphs for."""
    path = font_manager.findfont(font_manager.FontProperties(family=FONT))
    return frozenset(ft2font.FT2Font(path).get_charmap())


def safe(text: object, limit: int = MAX_LABEL) -> str:
    """Input text as a chart may show it: one line, cut, every character drawable, no math.

    Job names, hosts and causes come from logs: a ``$`` would start matplotlib's math
    mode (and a bad formula raises when drawn), a control character or a glyph the font
    lacks would draw as a box or warn on every render.
    """
    drawable = _drawable()
    out = []
    for ch in str(text):
        if unicodedata.category(ch)[0] == "C" or ch.isspace():
            out.append(" ")
        elif ord(ch) in drawable:
            out.append(ch)
        else:
            out.append("?")
    line = " ".join("".join(out).split())
    if len(line) > limit:
        line = line[: limit - 1] + "…"
    return line.replace("$", r"\$")


def who(alert: Alert, spelled: Mapping[str, str] | None = None) -> str:
    """What the alert is about, for the title: its TaskManager, job or entity.

    ``spelled``: TaskManager spellings by key (:func:`detectors.tm_ids.spellings` of an
    incident's, so its alerts name one TaskManager alike); else the alert's own.
    """
    if alert.entity.startswith("tm:"):
        job = f" (job {alert.job_name})" if alert.job_name else ""
        tm = alert.tm_id and (spelled or {}).get(tm_key(alert.tm_id), alert.tm_id)
        return f"TaskManager {tm or alert.host or alert.entity[3:]}{job}"
    if alert.job_name or alert.job_id:
        return f"job {alert.job_name or alert.job_id}"
    return alert.entity


def title(fig: Figure, alert: Alert, what: str | None = None) -> None:
    """The chart's title: detector and subject; below it what decided and when, in UTC."""
    head = f"{alert.detector}: {who(alert)}"
    fig.suptitle(safe(head, MAX_TITLE), fontsize=11, fontweight="bold", x=0.01, ha="left")
    verb = {
        AlertStatus.FIRING: "fired",
        AlertStatus.ESCALATED: f"escalated to {alert.severity.value}",
        AlertStatus.RESOLVED: "resolved",
    }[alert.status]
    line = f"{verb} {stamp(alert.event_time_ms)} UTC"
    if what:
        line = f"{line}; {what}"
    subtitle(fig, line)


def subtitle(fig: Figure, text: str) -> None:
    """A grey line of small print under the title, over the first axes."""
    fig.axes[0].set_title(text, fontsize=8, loc="left", color=GREY)


def legend_below(fig: Figure, handles: Sequence[Artist] | None = None, ncols: int = 3) -> None:
    """The legend under the axes, where it hides nothing (time lines fill their width)."""
    if handles is None:
        handles = [h for ax in fig.axes for h in ax.get_legend_handles_labels()[0]]
    if handles:
        fig.legend(
            handles=handles, loc="outside lower center", ncols=ncols, fontsize=7, frameon=False
        )


def stamp(ms: int) -> str:
    """``2026-11-22 17:37:27``, UTC."""
    return utc(ms).strftime("%Y-%m-%d %H:%M:%S")


def utc(ms: int) -> dt.datetime:
    """Epoch milliseconds as an aware UTC datetime."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def at(ms: int) -> float:
    """Epoch milliseconds as the time axis plots them (matplotlib's days since the epoch)."""
    return float(mdates.date2num(utc(ms)))  # type: ignore[no-untyped-call]


def times(values: Iterable[int]) -> list[float]:
    """Epoch milliseconds as the time axis plots them."""
    return [at(ms) for ms in values]


def time_axis(ax: Axes, *, label: bool = True) -> None:
    """Dates on ``ax``'s x axis, in UTC, as short as they can be read."""
    locator = mdates.AutoDateLocator(tz=dt.UTC, minticks=3, maxticks=8)  # type: ignore[no-untyped-call]
    ax.xaxis.set_major_locator(locator)
    concise = mdates.ConciseDateFormatter(  # type: ignore[no-untyped-call]
        locator,
        tz=dt.UTC,
        # Whole clock times (17:31:30, not "30"): the date is in the offset at the end.
        formats=["%Y", "%b", "%b %d", "%H:%M", "%H:%M", "%H:%M:%S"],
        zero_formats=["", "%Y", "%b", "%b %d", "%H:%M", "%H:%M"],
    )
    ax.xaxis.set_major_formatter(concise)
    ax.xaxis.get_offset_text().set_fontsize(7)
    if label:
        ax.set_xlabel("time (UTC)", fontsize=8)


def style(ax: Axes, ylabel: str) -> None:
    """The look every axes shares: small ticks, a light grid, the unit on the y axis."""
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3, linewidth=0.6)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def legend(ax: Axes, loc: Literal["best", "upper left", "lower left"] = "best") -> None:
    """A small legend inside the axes, if anything is labelled."""
    handles, _labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=7, framealpha=0.8, loc=loc)


def scale(values: Iterable[float]) -> tuple[float, str]:
    """A byte unit that reads well for these values: (divisor, unit)."""
    top = max((abs(v) for v in values), default=0.0)
    for div, unit in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
        if top >= 2 * div:
            return float(div), unit
    return 1.0, "bytes"


def seconds(values: Iterable[float]) -> tuple[float, str]:
    """A time unit that reads well for these durations in ms: (divisor, unit)."""
    top = max((abs(v) for v in values), default=0.0)
    if top >= 2 * 60_000:
        return 60_000.0, "min"
    if top >= 2_000:
        return 1_000.0, "s"
    return 1.0, "ms"


def log_scale(ax: Axes) -> None:
    """A log y axis with plain numbers (10, 20, 50, not 10^1): a limit far above the data."""
    ax.set_yscale("log", nonpositive="clip")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
