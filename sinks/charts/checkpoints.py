"""Charts of the checkpoint detectors: durations, sizes, failures and late acks."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from detectors.checkpoint_creep import CheckpointCreepEvidence
from detectors.checkpoint_failures import CheckpointFailuresEvidence
from detectors.checkpoint_state_growth import CheckpointStateGrowthEvidence
from detectors.late_barrier_acks import LateBarrierAcksEvidence
from detectors.model import Alert
from sinks.charts.frame import (
    FIT,
    GREY,
    LIMIT,
    PALETTE,
    at,
    figure,
    legend,
    log_scale,
    safe,
    scale,
    seconds,
    stamp,
    style,
    time_axis,
    times,
    title,
)

_MB = 1 << 20
#: A limit line further above the data than this draws on a log axis, or the data is flat.
_LOG_ABOVE = 4.0


def creep(alert: Alert, ev: CheckpointCreepEvidence) -> Figure | None:
    """Durations per checkpoint, the trend the detector fitted and the timeout; sizes behind."""
    durations = ev.durations_ms
    n = len(durations)
    if not n:
        return None
    timed = len(ev.times_ms) == n
    xs = times(ev.times_ms) if timed else list(range(1 - n, 1))
    div, unit = seconds(durations)
    fig, (ax,) = figure()
    sizes = [(x, s) for x, s in zip(xs, ev.sizes_bytes, strict=False) if s is not None]
    handles: list[Line2D] = []
    if sizes:
        size_ax = ax.twinx()
        sdiv, sunit = scale([s for _, s in sizes])
        handles += size_ax.plot(
            [x for x, _ in sizes],
            [s / sdiv for _, s in sizes],
            color=GREY,
            linewidth=1,
            alpha=0.7,
            label="checkpoint size",
        )
        size_ax.set_ylabel(f"checkpoint size ({sunit})", fontsize=8, color=GREY)
        size_ax.tick_params(labelsize=7, colors=GREY)
        size_ax.set_ylim(bottom=0)
        ax.set_zorder(size_ax.get_zorder() + 1)  # the durations over the sizes
        ax.patch.set_visible(False)
    handles += ax.plot(
        xs,
        [d / div for d in durations],
        "o-",
        color=PALETTE[0],
        markersize=3,
        linewidth=1,
        label="checkpoint duration",
    )
    fit = ev.fit
    if fit is not None and fit.samples >= 2:
        # The line is indexed by checkpoint, ending at the newest sample.
        m = min(fit.samples, n)
        line = [fit.level_ms - fit.slope_ms * (n - 1 - j) for j in range(n - m, n)]
        slope = fit.slope_ms / div
        handles += ax.plot(
            xs[n - m :],
            [y / div for y in line],
            "--",
            color=FIT,
            linewidth=1.6,
            label=f"fitted trend ({slope:+.3g} {unit} per checkpoint)",
        )
    timeout = ev.checkpoint_timeout_s * 1000 / div
    top = max(durations) / div
    handles.append(
        ax.axhline(
            timeout,
            color=LIMIT,
            linestyle=":",
            linewidth=1.4,
            label=f"checkpoint timeout ({timeout:g} {unit})",
        )
    )
    pending = ev.pending_checkpoints
    if pending:
        now = at(alert.event_time_ms) if timed else xs[-1]
        handles += ax.plot(
            [now] * len(pending),
            [p.pending_for_s * 1000 / div for p in pending],
            "^",
            color=LIMIT,
            markersize=6,
            label="pending, not completed",
        )
        top = max(top, *(p.pending_for_s * 1000 / div for p in pending))
    if timeout > _LOG_ABOVE * top:
        log_scale(ax)
    else:
        ax.set_ylim(0, max(timeout, top) * 1.08)
    style(ax, f"checkpoint duration ({unit})")
    if timed:
        time_axis(ax)
    else:
        ax.set_xlabel("checkpoints before the newest", fontsize=8)
    ax.legend(handles=handles, fontsize=7, framealpha=0.8, loc="upper left")
    z = f"Mann-Kendall z {ev.mann_kendall_z:g}" if ev.mann_kendall_z is not None else None
    title(fig, alert, z)
    return fig


def state_growth(alert: Alert, ev: CheckpointStateGrowthEvidence) -> Figure | None:
    """Checkpoint sizes over time, the fitted slope and, when set, the heap share line.

    A surge is judged on the newest checkpoints, unthinned, against an early level, with
    their durations following: those are drawn too, the durations on a second axis.
    """
    sizes = ev.sizes_bytes
    if len(ev.times_ms) != len(sizes) or not (sizes or ev.recent):
        return None
    heap = ev.heap_share * ev.state_heap_mb * _MB if ev.heap_share and ev.state_heap_mb else None
    div, unit = scale([*sizes, *(c.size for c in ev.recent)])
    fig, (ax,) = figure()
    ax.plot(
        times(ev.times_ms),
        [s / div for s in sizes],
        "o-",
        color=PALETTE[0],
        markersize=3,
        linewidth=1,
        label="checkpoint size (the window's samples)",
    )
    surge = ev.surge
    if ev.recent:
        ax.plot(
            times(c.t for c in ev.recent),
            [c.size / div for c in ev.recent],
            "s",
            color=PALETTE[0],
            markersize=4,
            markerfacecolor="none",
            label="newest checkpoints, each",
        )
    fit = ev.fit
    if fit is not None:
        per_h = (fit.to_bytes - fit.from_bytes) / max(fit.to_ms - fit.from_ms, 1) * 3_600_000
        ax.plot(
            times([fit.from_ms, fit.to_ms]),
            [fit.from_bytes / div, fit.to_bytes / div],
            "--",
            color=FIT,
            linewidth=1.8,
            label=f"fitted slope ({per_h / div:+,.3g} {unit}/h)",
        )
    if surge is not None:
        ax.axhline(
            surge.since_bytes / div,
            color=PALETTE[2],
            linestyle="-.",
            linewidth=1,
            label=f"size {surge.over_s / 60:.0f} min earlier (surge {surge.ratio:g}x)",
        )
        _surge_durations(ax, ev)
    top = max([*sizes, *(c.size for c in ev.recent)]) / div
    if heap is not None:
        share = f"{ev.heap_share:.0%} of the {ev.state_heap_mb:,.0f} MB heap"
        ax.axhline(heap / div, color=LIMIT, linestyle=":", linewidth=1.4, label=share)
        if heap / div > _LOG_ABOVE * top:
            log_scale(ax)
        else:
            ax.set_ylim(0, max(heap / div, top) * 1.08)
    else:
        ax.set_ylim(0, top * 1.08)
    style(ax, f"checkpoint size ({unit})")
    time_axis(ax)
    handles = [h for a in fig.axes for h in a.get_legend_handles_labels()[0]]
    ax.legend(handles=handles, fontsize=7, framealpha=0.8, loc="upper left")
    what = f"window {ev.window_s / 60:.0f} min"
    if surge is not None:
        what = f"surge {surge.ratio:g}x in {surge.over_s / 60:.0f} min; {what}"
    title(fig, alert, what)
    return fig


def _surge_durations(ax: Axes, ev: CheckpointStateGrowthEvidence) -> None:
    """The newest checkpoints' durations and their early level, on a second axis."""
    surge = ev.surge
    durations = [(c.t, c.duration) for c in ev.recent if c.duration is not None]
    if surge is None or not durations:
        return
    div, unit = seconds([d for _, d in durations])
    dur_ax = ax.twinx()
    dur_ax.plot(
        times(t for t, _ in durations),
        [d / div for _, d in durations],
        "^",
        color=GREY,
        markersize=4,
        label="their durations",
    )
    dur_ax.axhline(
        surge.since_duration_ms / div,
        color=GREY,
        linestyle=":",
        linewidth=1,
        label="duration earlier",
    )
    dur_ax.set_ylim(bottom=0)
    dur_ax.set_ylabel(f"checkpoint duration ({unit})", fontsize=8, color=GREY)
    dur_ax.tick_params(labelsize=7, colors=GREY)


def failures(alert: Alert, ev: CheckpointFailuresEvidence) -> Figure | None:
    """Failed checkpoints on a time line, one row per reason; hollow: does not count."""
    marks = ev.timeline
    if not marks:
        return None
    reasons = list(dict.fromkeys(m.reason for m in marks))
    fig, (ax,) = figure()
    colour = PALETTE[5]
    for i, reason in enumerate(reasons):
        mine = [m for m in marks if m.reason == reason]
        for counted in (True, False):
            group = [m for m in mine if m.counted == counted]
            if not group:
                continue
            ax.plot(
                times(m.time_ms for m in group),
                [i] * len(group),
                "o",
                markersize=7,
                color=colour if counted else GREY,
                markerfacecolor=colour if counted else "none",
                label=None,
            )
    window_start = at(alert.event_time_ms - int(ev.window_s * 1000))
    ax.axvspan(window_start, at(alert.event_time_ms), color=PALETTE[4], alpha=0.08)
    ax.axvline(at(alert.event_time_ms), color=LIMIT, linewidth=1, linestyle=":")
    ax.set_yticks(range(len(reasons)), [safe(r.replace("_", " "), 28) for r in reasons])
    ax.set_ylim(-0.7, len(reasons) - 0.3)
    style(ax, "failure reason")
    time_axis(ax)
    keys = [
        Line2D([], [], marker="o", color=colour, linestyle="", label="counts"),
        Line2D(
            [],
            [],
            marker="o",
            color=GREY,
            markerfacecolor="none",
            linestyle="",
            label="does not count",
        ),
        Line2D(
            [],
            [],
            color=LIMIT,
            linestyle=":",
            label=f"this transition; window {ev.window_s / 60:.0f} min",
        ),
    ]
    ax.legend(handles=keys, fontsize=7, framealpha=0.8, loc="upper left")
    n = sum(1 for m in marks if m.counted)
    title(fig, alert, f"{n} counted, {len(marks) - n} not")
    return fig


def late_acks(alert: Alert, ev: LateBarrierAcksEvidence) -> Figure | None:
    """Late acks per checkpoint, stacked by the host they came from."""
    rows = ev.per_checkpoint
    if not rows:
        return None
    hosts = [str(h.get("host")) for h in ev.top_hosts]
    fig, (ax,) = figure()
    xs = list(range(len(rows)))
    bottom = [0] * len(rows)
    for i, host in enumerate(hosts):
        counts = [r.by_host[i] if i < len(r.by_host) else 0 for r in rows]
        if not any(counts):
            continue
        ax.bar(
            xs,
            counts,
            bottom=bottom,
            color=PALETTE[i % len(PALETTE)],
            width=0.7,
            label=f"host {safe(host, 36)}",
        )
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    rest = [max(r.late_acks - b, 0) for r, b in zip(rows, bottom, strict=True)]
    if any(rest):
        ax.bar(
            xs,
            rest,
            bottom=bottom,
            color=GREY,
            width=0.7,
            alpha=0.6,
            label="other hosts or none named",
        )
    labels = [f"{r.checkpoint_id}\n{stamp(r.time_ms)[11:16]}" for r in rows]
    ax.set_xticks(xs, labels)
    ax.set_xlabel("checkpoint id, first late line (UTC)", fontsize=8)
    style(ax, "late acks")
    ax.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    legend(ax, loc="upper left")
    what = None
    if ev.concentrated_host and ev.top_hosts:
        what = f"{ev.top_hosts[0]['share']:.0%} from {safe(ev.concentrated_host, 30)}"
    title(fig, alert, what)
    return fig
