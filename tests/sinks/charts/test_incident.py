"""The chart of a correlated incident (``sinks/charts/incident.py``): its members on one time axis."""

from __future__ import annotations

from detectors import REGISTRY, AlertStatus, Severity
from sinks.charts import render
from tests.sinks.charts.alerts import (
    HOSTILE,
    MIN,
    creep_alert,
    decoded,
    failures_alert,
    idle_heap_alert,
    incident_of,
    late_alert,
    restart_alert,
)


def test_an_incident_of_several_members_renders_them_on_one_axis() -> None:
    creep, failures, late = creep_alert(), failures_alert(), late_alert()
    incident = incident_of([creep, failures, late])
    assert len(incident.members) == 3 and incident.joined
    chart = render(late, incident)
    decoded(chart)
    # The incident's chart, not the member's own.
    assert chart != render(late)
    # Resolved members end their lane; the chart changes with them.
    resolved = failures.model_copy(
        update={"status": AlertStatus.RESOLVED, "event_time_ms": failures.event_time_ms + 9 * MIN}
    )
    assert render(resolved, incident_of([creep, failures, late, resolved])) != chart


def test_an_incident_of_one_member_is_the_alerts_own_chart() -> None:
    alert = restart_alert()
    incident = incident_of([alert])
    assert len(incident.members) == 1
    assert render(alert, incident) == render(alert)


def test_an_incident_with_hostile_names_and_many_members_renders() -> None:
    base = creep_alert()
    members = [
        base.model_copy(
            update={
                "alert_id": f"a{i}",
                "detector": sorted(REGISTRY)[i % len(REGISTRY)],
                "job_name": HOSTILE,
                "event_time_ms": base.event_time_ms + i * MIN,
                "severity": list(Severity)[i % 3],
            }
        )
        for i in range(20)
    ]
    incident = incident_of(members)
    assert len(incident.members) == 20
    decoded(render(members[-1], incident))


def test_one_taskmanager_is_named_alike_in_every_lane_whatever_each_member_fired_on() -> None:
    # The heap alert fired on the metrics' spelling, tm_lost after the logs named the
    # TaskManager: two lanes, one TaskManager, in its best spelling.
    from sinks.charts.incident import incident_chart
    from tests.sinks.spellings import ENTITY, SCRAPED, lost_after

    heap = idle_heap_alert().model_copy(update={"entity": ENTITY, "tm_id": SCRAPED, "job_id": None})
    lost = lost_after(heap, MIN)
    fig = incident_chart(incident_of([heap, lost]))
    lanes = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert lanes == ["idle_heap_growth\nlocalhost:40003-6cf67b", "tm_lost\nlocalhost:40003-6cf67b"]
