"""What the ledger's tests share: the alert they record and a sink that can be down or refuse."""

from __future__ import annotations

from detectors import Alert, AlertStatus, Severity
from sinks import DeliverySink, PermanentDeliveryError, RetryableDeliveryError
from sinks.base import Transition


def alert(
    alert_id: str, status: AlertStatus = AlertStatus.FIRING, severity: Severity = Severity.WARNING
) -> Alert:
    return Alert(
        alert_id=alert_id,
        detector="checkpoint_failures",
        entity="job:7f",
        status=status,
        severity=severity,
        event_time_ms=1_700_000_000_000,
        summary="3 checkpoints expired",
        job_id="7f",
    )


class Sink(DeliverySink):
    def __init__(self, name: str = "slack", notifies: bool = True) -> None:
        self.name = name
        self.notifies = notifies
        self.sent: list[str] = []
        self.down = False
        self.refuse: set[str] = set()

    def send(self, t: Transition) -> None:
        if self.down:
            raise RetryableDeliveryError("HTTP 503")
        if t.key in self.refuse:
            raise PermanentDeliveryError("channel_not_found")
        self.sent.append(t.key)
