"""What every sink shares: the transition's identity, the errors a send raises, a sink's defaults."""

from __future__ import annotations

from detectors import AlertStatus, Severity
from sinks.base import (
    AmbiguousDeliveryError,
    DeliveryError,
    DeliverySink,
    PermanentDeliveryError,
    RetryableDeliveryError,
    Transition,
    transition_key,
)
from tests.sinks.ledger.helpers import alert


class Quiet(DeliverySink):
    def send(self, t: Transition) -> None:
        pass


def test_an_incident_fires_and_resolves_once_and_escalates_once_per_severity() -> None:
    assert transition_key(alert("a")) == "a:firing"
    assert transition_key(alert("a", AlertStatus.RESOLVED, Severity.CRITICAL)) == "a:resolved"
    up = alert("a", AlertStatus.ESCALATED, Severity.CRITICAL)
    assert transition_key(up) == "a:escalated:critical"
    assert transition_key(up) != transition_key(alert("a", AlertStatus.ESCALATED))


def test_an_uncorrelated_alert_is_its_own_incident() -> None:
    t = Transition(1, "a:firing", alert("a"))
    assert t.incident_id == "a" and t.member is None


def test_a_sink_takes_everything_and_cannot_tell_by_default() -> None:
    sink, t = Quiet(), Transition(1, "a:firing", alert("a"))
    assert sink.wants(t) and sink.confirm(t) is None
    assert (sink.name, sink.notifies, sink.per_pass, sink.lane) == ("sink", False, None, None)


def test_an_unknown_outcome_is_retried_by_whoever_only_knows_retryable() -> None:
    assert issubclass(AmbiguousDeliveryError, RetryableDeliveryError)
    assert not issubclass(PermanentDeliveryError, RetryableDeliveryError)
    assert issubclass(PermanentDeliveryError, DeliveryError)
