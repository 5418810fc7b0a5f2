"""One TaskManager in two spellings, for the sinks' tests that it is named once per incident.

Flink's Prometheus reporter labels a TaskManager ``localhost:40003_6cf67b`` where its logs
say ``localhost:40003-6cf67b`` (:mod:`detectors.tm_ids`): an incident's alerts may carry
either, and whatever a sink shows or sends names one.
"""

from __future__ import annotations

from detectors import Alert, AlertStatus, Severity
from detectors.base import Member
from detectors.correlation import IncidentView

SCRAPED = "localhost:40003_6cf67b"
LOGGED = "localhost:40003-6cf67b"
ENTITY = "tm:localhost_40003_6cf67b"


def tm_alert(
    alert_id: str, detector: str, tm_id: str, status: AlertStatus = AlertStatus.FIRING, at: int = 0
) -> Alert:
    """A critical alert about the TaskManager, spelled ``tm_id``."""
    return Alert(
        alert_id=alert_id,
        detector=detector,
        entity=ENTITY,
        status=status,
        severity=Severity.CRITICAL,
        event_time_ms=at,
        summary="s",
        tm_id=tm_id,
    )


def incident(*alerts: Alert, first_ms: int = 0) -> IncidentView:
    """A firing incident of ``alerts``, the first its root."""
    root = alerts[0]
    return IncidentView(
        incident_id=root.alert_id,
        headline="h",
        root_alert_id=root.alert_id,
        severity=root.severity,
        status=AlertStatus.FIRING,
        members=tuple(Member(**dict(a), first_ms=first_ms) for a in alerts),
    )


def lost_after(heap: Alert, gap_ms: int) -> Alert:
    """``tm_lost`` of the same TaskManager ``gap_ms`` later, once its logs named it."""
    return heap.model_copy(
        update={
            "alert_id": "lost-1",
            "detector": "tm_lost",
            "tm_id": LOGGED,
            "event_time_ms": heap.event_time_ms + gap_ms,
        }
    )
