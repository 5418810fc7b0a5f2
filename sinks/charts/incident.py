"""The chart of a correlated incident: its members on one time axis, a lane each."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from detectors.base import Member
from detectors.correlation import IncidentView
from detectors.model import AlertStatus, Severity
from detectors.tm_ids import spellings, tm_key
from sinks.charts.frame import (
    GREY,
    SEVERITY,
    at,
    figure,
    legend_below,
    safe,
    stamp,
    style,
    subtitle,
    time_axis,
)

#: Lanes drawn at most; an incident takes up to ``correlation.max_members`` (20 by default).
_MAX_LANES = 12
#: The headline's characters per line under the title (two lines at most).
_HEADLINE = 92


def _lane(m: Member, spelled: Mapping[str, str]) -> str:
    # A TaskManager as the incident spells it best: a member fired on the metrics'
    # spelling is not another TaskManager than one fired after the logs named it.
    tm = spelled.get(tm_key(m.tm_id)) if m.tm_id else None
    about = m.job_name or m.job_id or tm or m.host or m.entity
    return f"{m.detector}\n{safe(about, 30)}"


def incident_chart(incident: IncidentView) -> Figure:
    """One lane per member, from its firing to its resolve (or on, while it fires)."""
    members = sorted(incident.members, key=lambda m: (m.first_ms, m.detector))[:_MAX_LANES]
    start = min(m.first_ms for m in members)
    end = max(m.last_ms for m in members)
    pad = max((end - start) // 20, 30_000)
    fig, (ax,) = figure()
    for i, m in enumerate(members):
        closed = m.status is AlertStatus.RESOLVED
        stop = m.last_ms if closed else end + pad
        colour = SEVERITY[m.severity]
        ax.barh(
            i,
            at(max(stop, m.first_ms + 1)) - at(m.first_ms),
            left=at(m.first_ms),
            height=0.55,
            color=colour,
            alpha=0.85 if closed else 0.55,
            hatch=None if closed else "//",
            edgecolor=colour,
        )
        ax.plot([at(m.first_ms)], [i], "o", color="black", markersize=4)
        if closed:
            ax.plot([at(m.last_ms)], [i], "|", color="black", markersize=12)
    spelled = spellings(m.tm_id for m in incident.members if m.tm_id)
    labels = [_lane(m, spelled) for m in members]
    root = next((i for i, m in enumerate(members) if m.alert_id == incident.root_alert_id), None)
    ax.set_yticks(range(len(members)), labels)
    if root is not None:
        ax.get_yticklabels()[root].set_fontweight("bold")
    ax.set_ylim(-0.7, len(members) - 0.3)
    ax.invert_yaxis()
    ax.set_xlim(at(start - pad), at(end + 2 * pad))
    style(ax, "")
    ax.tick_params(axis="y", labelsize=7)
    time_axis(ax)
    keys = [Patch(color=SEVERITY[s], label=s.value) for s in Severity]
    keys += [
        Patch(facecolor="white", edgecolor=GREY, hatch="//", label="still firing"),
    ]
    legend_below(fig, keys, ncols=4)
    n = len(incident.members)
    head = f"incident of {n} alerts, {incident.status.value}, {incident.severity.value}"
    fig.suptitle(head, fontsize=11, fontweight="bold", x=0.01, ha="left")
    wrapped = textwrap.wrap(incident.headline, _HEADLINE) or [""]
    lines = [safe(line, _HEADLINE) for line in wrapped[:2]]
    if len(wrapped) > 2:
        lines[1] = lines[1][: _HEADLINE - 1] + "…"
    since = f"since {stamp(start)} UTC, the root in bold"
    subtitle(fig, "\n".join([*lines, since]))
    return fig
