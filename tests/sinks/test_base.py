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


def test_a_taskmanager_is_spelled_once_in_an_incidents_label_sets() -> None:
    # idle_heap_growth fires on the metrics' spelling; the TaskManager's logs then say
    # its id, jvm_fatal fires on that spelling and joins the incident, and the heap alert
    # resolves on it too. Every label set of the incident names one TaskManager.
    from detectors.correlation import Correlator
    from tests.sinks.spellings import LOGGED as logged
    from tests.sinks.spellings import SCRAPED as scraped
    from tests.sinks.spellings import tm_alert

    heap_fires = tm_alert("h", "idle_heap_growth", scraped, at=1_000)
    fatal_fires = tm_alert("f", "jvm_fatal", logged, at=2_000)
    heap_resolves = tm_alert("h", "idle_heap_growth", logged, AlertStatus.RESOLVED, 3_000)
    lost_fires = tm_alert("l", "tm_lost", "localhost:40004-aaaaaa", at=4_000)
    c = Correlator()
    seen = [
        Transition(i, transition_key(a), a, incident=c.observe(a))
        for i, a in enumerate([heap_fires, fatal_fires, heap_resolves, lost_fires])
    ]
    assert len({t.incident_id for t in seen[:3]}) == 1
    assert [t.tm_id for t in seen] == [scraped, scraped, scraped, "localhost:40004-aaaaaa"]
    # The incident's own record keeps each alert's spelling (Slack shows the logged one).
    assert seen[2].incident is not None
    assert {m.alert_id: m.tm_id for m in seen[2].incident.members} == {"h": scraped, "f": logged}
    # Without an incident, the alert's own.
    assert Transition(9, "f:firing", fatal_fires).tm_id == logged
