"""Charts of the job and JobManager detectors: restarts, a lost job, JobManager crashes."""

from __future__ import annotations

from collections import Counter

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from detectors.jm_k8s_watch_crash import JmK8sWatchCrashEvidence
from detectors.job_lost import JobLostEvidence
from detectors.model import Alert
from detectors.restart_storm import RestartStormEvidence
from sinks.charts.frame import (
    GREY,
    LIMIT,
    PALETTE,
    at,
    figure,
    legend,
    legend_below,
    safe,
    stamp,
    style,
    time_axis,
    times,
    title,
)


def restarts(alert: Alert, ev: RestartStormEvidence) -> Figure | None:
    """Restarts and failovers on a time line, counted up, coloured by cause."""
    marks = ev.timeline
    if not marks:
        return None
    fig, (ax,) = figure()
    now = alert.event_time_ms
    xs = times([m.time_ms for m in marks])
    counts = list(range(1, len(marks) + 1))
    ax.step(
        [*xs, at(max(now, marks[-1].time_ms))],
        [*counts, counts[-1]],
        where="post",
        color=GREY,
        linewidth=1,
    )
    by_cause = [c for c, _ in Counter(m.cause for m in marks).most_common()]
    for i, cause in enumerate(by_cause):
        for failover in (False, True):
            mine = [
                (x, k)
                for x, k, m in zip(xs, counts, marks, strict=True)
                if m.cause == cause and m.failover == failover
            ]
            if not mine:
                continue
            kind = "failover" if failover else "restart"
            ax.plot(
                [x for x, _ in mine],
                [k for _, k in mine],
                "D" if failover else "o",
                color=PALETTE[i % len(PALETTE)],
                markersize=6,
                label=f"{kind}: {safe(cause.replace('_', ' '), 30)}",
            )
    start = max(now - int(ev.window_s * 1000), marks[0].time_ms - 60_000)
    ax.axvspan(
        at(start),
        at(now),
        color=PALETTE[4],
        alpha=0.08,
        label=f"window ({ev.window_s / 60:.0f} min)",
    )
    if ev.fired_for == "slow_recovery" and ev.not_running_s:
        down = now - int(ev.not_running_s * 1000)
        ax.axvspan(
            at(down),
            at(now),
            color=LIMIT,
            alpha=0.12,
            label=f"not RUNNING {ev.not_running_s:.0f} s",
        )
    ax.axvline(at(now), color=LIMIT, linestyle=":", linewidth=1)
    ax.set_ylim(0, len(marks) + 0.8)
    ax.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    style(ax, "restarts and failovers (count)")
    time_axis(ax)
    legend(ax, loc="upper left")
    title(fig, alert, f"{ev.restarts} in the window, status {safe(ev.status or '?', 16)}")
    return fig


def _rows(ax: Axes, labels: list[str]) -> None:
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.invert_yaxis()


def job_lost(alert: Alert, ev: JobLostEvidence) -> Figure | None:
    """The job's last signs of life, the TaskManagers' report, and the silence that paged."""
    now = alert.event_time_ms
    fig, (ax,) = figure()
    seen = ev.last_seen_ms
    start = seen - max(int(ev.silence_s * 1000), now - seen)
    if ev.last_state_ms is not None:
        state_from = max(ev.last_state_ms, start)
        ax.barh(
            0,
            (at(seen) - at(state_from)),
            left=at(state_from),
            height=0.5,
            color=PALETTE[2],
            alpha=0.7,
            label=f"{safe(ev.last_state or '?', 16)} since {stamp(ev.last_state_ms)[11:]}",
        )
    ax.barh(
        0,
        at(now) - at(seen),
        left=at(seen),
        height=0.5,
        color=LIMIT,
        alpha=0.25,
        label=f"silent {ev.silent_s:.0f} s",
    )
    ax.plot(
        [at(seen)],
        [0],
        "o",
        color=PALETTE[0],
        markersize=7,
        label=f"last record: {safe(ev.last_seen, 40)}",
    )
    if ev.reported_ms is not None:
        what = "released the job" if ev.why == "released" else "reported JobManager lost"
        ax.plot(
            [at(ev.reported_ms)],
            [1],
            "v",
            color=PALETTE[1],
            markersize=8,
            label=f"TaskManager {what}",
        )
    deadline = seen + int(ev.silence_s * 1000)
    if deadline <= now + int(ev.silence_s * 1000):
        ax.axvline(
            at(deadline),
            color=GREY,
            linestyle="--",
            linewidth=1,
            label=f"silence deadline ({ev.silence_s:g} s)",
        )
    ax.axvline(at(now), color=LIMIT, linestyle=":", linewidth=1.2, label="this transition")
    _rows(ax, ["job", "TaskManagers"])
    style(ax, "")
    time_axis(ax)
    legend_below(fig, ncols=2)
    title(fig, alert, f"why: {safe(ev.why or '?', 16)}")
    return fig


def jm_crash(alert: Alert, ev: JmK8sWatchCrashEvidence) -> Figure | None:
    """The JobManager's crashes, its restart and its jobs coming back, on one time line."""
    if not ev.crash_times_ms:
        return None
    fig, (ax,) = figure()
    crashes = ev.crash_times_ms
    ax.plot(
        times(crashes),
        [0] * len(crashes),
        "X",
        color=LIMIT,
        markersize=9,
        label=f"crash ({len(crashes)} in the loop window)",
    )
    last = crashes[-1]
    if ev.jm_restart_s is not None:
        ax.plot(
            [at(last + int(ev.jm_restart_s * 1000))],
            [1],
            "o",
            color=PALETTE[0],
            markersize=7,
            label=f"JobManager started again (+{ev.jm_restart_s:.0f} s)",
        )
    if ev.recovery_s is not None:
        lost = f", {len(ev.lost_job_ids)} without state" if ev.lost_job_ids else ""
        ax.plot(
            [at(last + int(ev.recovery_s * 1000))],
            [2],
            "s",
            color=PALETTE[2],
            markersize=7,
            label=f"jobs back (+{ev.recovery_s:.0f} s{lost})",
        )
    ax.axvline(
        at(alert.event_time_ms), color=LIMIT, linestyle=":", linewidth=1.2, label="this transition"
    )
    _rows(ax, ["crash", "JobManager", "jobs"])
    style(ax, "")
    time_axis(ax)
    legend_below(fig, ncols=2)
    title(fig, alert, f"restored: {ev.restored}")
    return fig
