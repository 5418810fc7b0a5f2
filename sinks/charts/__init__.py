"""Evidence charts: a small PNG of what decided an alert, drawn from its typed evidence.

:func:`render` is the one entry point (Slack attaches its result to an incident's message,
``flinkwatch replay --report`` writes it beside an HTML page). Each detector with a
series to show has one chart function in :data:`CHARTS`, keyed by detector name, with the
evidence model it reads: the alert's evidence is validated into that model first, so a
chart draws what the detector wrote, field by field. A chart is 720 x 360 px, titled with
the detector and its job or TaskManager, its axes labelled with units, times in UTC.

Rendering uses matplotlib's Agg canvas on a :class:`~matplotlib.figure.Figure` of its
own, never ``pyplot``: no global state, so the driver's delivery threads may render at
once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

from matplotlib.figure import Figure
from pydantic import ValidationError

from detectors.base import Evidence
from detectors.checkpoint_creep import CheckpointCreepEvidence
from detectors.checkpoint_failures import CheckpointFailuresEvidence
from detectors.checkpoint_state_growth import CheckpointStateGrowthEvidence
from detectors.correlation import IncidentView
from detectors.idle_heap_growth import IdleHeapGrowthEvidence
from detectors.jm_k8s_watch_crash import JmK8sWatchCrashEvidence
from detectors.job_lost import JobLostEvidence
from detectors.late_barrier_acks import LateBarrierAcksEvidence
from detectors.model import Alert
from detectors.restart_storm import RestartStormEvidence
from sinks.charts import checkpoints, heap, jobs
from sinks.charts.frame import png
from sinks.charts.incident import incident_chart

log = logging.getLogger(__name__)


class Chart(NamedTuple):
    """How one detector's alerts are drawn.

    Attributes:
        evidence: The detector's evidence model; the alert's evidence is validated into it.
        draw: Draws the figure from the alert and its typed evidence; ``None``: the
            evidence has nothing to draw (no samples yet, say).
    """

    evidence: type[Evidence]
    draw: Callable[[Alert, Any], Figure | None]


#: Every charted detector. ``tm_lost`` and ``jvm_fatal`` have none: their evidence is one
#: event (a loss, a fatal exit), with no series to draw.
CHARTS: dict[str, Chart] = {
    "checkpoint_creep": Chart(CheckpointCreepEvidence, checkpoints.creep),
    "checkpoint_state_growth": Chart(CheckpointStateGrowthEvidence, checkpoints.state_growth),
    "checkpoint_failures": Chart(CheckpointFailuresEvidence, checkpoints.failures),
    "late_barrier_acks": Chart(LateBarrierAcksEvidence, checkpoints.late_acks),
    "idle_heap_growth": Chart(IdleHeapGrowthEvidence, heap.idle_heap),
    "restart_storm": Chart(RestartStormEvidence, jobs.restarts),
    "job_lost": Chart(JobLostEvidence, jobs.job_lost),
    "jm_k8s_watch_crash": Chart(JmK8sWatchCrashEvidence, jobs.jm_crash),
}


def render(alert: Alert, incident: IncidentView | None = None) -> bytes | None:
    """The PNG of one alert transition, or ``None`` when its evidence has nothing to draw.

    With an incident of two or more members (a transition that joined one, or any later
    transition of it) the chart is the incident's: its members on one time axis, as the
    incident's message shows them. Otherwise it is the alert's own detector chart.

    Args:
        alert: The transition, its evidence as the detector wrote it (JSON-ready).
        incident: The incident it was put in, if correlation is on.

    Returns:
        PNG bytes (720 x 360 px), or ``None``: no chart for this detector, evidence of
        another shape (an older release, a resolve without a verdict) or without a series,
        or values no axis can place (logged).
    """
    try:
        if incident is not None and len(incident.members) >= 2:
            return png(incident_chart(incident))
        chart = CHARTS.get(alert.detector)
        if chart is None:
            return None
        evidence = chart.evidence.model_validate(alert.evidence)
        fig = chart.draw(alert, evidence)
        return None if fig is None else png(fig)
    except ValidationError as exc:
        log.debug("chart: evidence of %s %s does not fit: %s", alert.detector, alert.alert_id, exc)
        return None
    except (ValueError, OverflowError) as exc:
        # A value the axes cannot place (a time past year 9999 from a garbled log line):
        # the message goes without its chart rather than not at all.
        log.warning("chart: %s %s cannot be drawn: %s", alert.detector, alert.alert_id, exc)
        return None
