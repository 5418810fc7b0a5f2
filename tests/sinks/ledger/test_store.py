"""The alert ledger: each transition once, to each sink once, in order, across restarts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from detectors import Alert, AlertStatus, Severity
from sinks import AlertLedger, AmbiguousDeliveryError, RetryableDeliveryError
from sinks.base import Transition
from sinks.dispatch import Dispatcher, deliver
from tests.sinks.ledger.helpers import Sink, alert


def test_a_replayed_batch_records_nothing_twice(tmp_path: Path) -> None:
    ledger, sink = AlertLedger(tmp_path / "l.sqlite"), Sink()
    first = ledger.record(0, [alert("a"), alert("b")], [sink])
    again = ledger.record(0, [alert("a"), alert("b")], [sink])
    assert [t.key for t in first] == ["a:firing", "b:firing"]
    assert again == []
    assert deliver(ledger, sink) == 0
    assert sink.sent == ["a:firing", "b:firing"]


def test_escalation_is_a_transition_of_its_own_once_per_severity(tmp_path: Path) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    up = alert("a", AlertStatus.ESCALATED, Severity.CRITICAL)
    keys = [t.key for t in ledger.record(0, [alert("a"), up, up], [])]
    assert keys == ["a:firing", "a:escalated:critical"]
    assert [t.alert.severity for t in ledger.active()] == [Severity.CRITICAL]


def test_an_outage_keeps_order_and_a_refused_transition_does_not_block_the_rest(
    tmp_path: Path,
) -> None:
    ledger, sink = AlertLedger(tmp_path / "l.sqlite"), Sink()
    sink.down = True
    ledger.record(0, [alert("a"), alert("b")], [sink])
    with pytest.raises(RetryableDeliveryError):
        deliver(ledger, sink)
    ledger.record(1, [alert("a", AlertStatus.RESOLVED), alert("c")], [sink])
    assert ledger.counts()[("slack", "pending")] == 4
    sink.down = False
    sink.refuse = {"b:firing"}
    assert deliver(ledger, sink) == 0
    assert sink.sent == ["a:firing", "a:resolved", "c:firing"]
    assert ledger.counts()[("slack", "failed")] == 1
    assert ledger.outcomes[("slack", "retry")] == 1


def test_a_send_cut_by_a_crash_is_asked_about_not_guessed(tmp_path: Path) -> None:
    class Asking(Sink):
        def __init__(self, arrived: bool | None) -> None:
            super().__init__()
            self.arrived = arrived

        def confirm(self, t: Transition) -> bool | None:
            return self.arrived

    path = tmp_path / "l.sqlite"
    for arrived, sent, outcome in [
        (True, [], "confirmed"),
        (False, ["a:firing"], "delivered"),
        (None, ["a:firing"], "resent_unconfirmed"),
    ]:
        path.unlink(missing_ok=True)
        ledger, sink = AlertLedger(path), Asking(arrived)
        [t] = ledger.record(0, [alert("a")], [sink])
        ledger.mark("slack", t.seq, "sending")  # then the process was killed
        ledger.close()
        restarted = AlertLedger(path)
        assert deliver(restarted, sink) == 0
        assert sink.sent == sent
        assert restarted.outcomes[("slack", outcome)] == 1


def test_silenced_transitions_skip_notifying_sinks_only_and_resolves_follow_their_firing(
    tmp_path: Path,
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    slack, file = Sink("slack"), Sink("file", notifies=False)
    in_window = {"a"}

    def silencer(a: Alert) -> str | None:
        return "maintenance" if a.alert_id in in_window else None

    ledger.record(0, [alert("a"), alert("b")], [slack, file], silencer)
    in_window = {"b"}  # the window moved on: a's resolve stays silent, b's is sent
    ledger.record(
        1,
        [alert("a", AlertStatus.RESOLVED), alert("b", AlertStatus.RESOLVED)],
        [slack, file],
        silencer,
    )
    deliver(ledger, slack)
    deliver(ledger, file)
    assert slack.sent == ["b:firing", "b:resolved"]
    assert file.sent == ["a:firing", "b:firing", "a:resolved", "b:resolved"]
    assert ledger.counts()[("slack", "silenced")] == 2


def test_prune_forgets_only_settled_closed_incidents(tmp_path: Path) -> None:
    now = {"ms": 0}
    ledger, sink = AlertLedger(tmp_path / "l.sqlite", clock=lambda: now["ms"]), Sink()
    ledger.record(0, [alert("old"), alert("old", AlertStatus.RESOLVED), alert("open")], [sink])
    ledger.record(1, [alert("stuck"), alert("stuck", AlertStatus.RESOLVED)], [Sink("other")])
    deliver(ledger, sink)
    now["ms"] = 10_000
    assert ledger.prune(older_than_ms=5_000) == 2  # "stuck" still waits for its sink
    assert [t.alert.alert_id for t in ledger.active()] == ["open"]
    # A pruned incident replayed from very old data would be recorded again; that is the
    # retention trade-off, so nothing younger than the cutoff is touched.
    assert ledger.record(2, [alert("open")], [sink]) == []


def test_the_dispatcher_backs_off_and_delivers_the_backlog_when_the_sink_returns(
    tmp_path: Path,
) -> None:
    ledger, sink = AlertLedger(tmp_path / "l.sqlite"), Sink()
    errors: list[str] = []
    d = Dispatcher(
        ledger,
        [sink],
        backoff_s=0.05,
        max_backoff_s=0.2,
        on_error=lambda name, exc: errors.append(name),
    )
    sink.down = True
    ledger.record(0, [alert("a"), alert("b")], [sink])
    assert d.drain_once() is False
    assert d.backlog == {"slack": 2}
    d.start()
    try:
        d.wake()
        sink.down = False
        deadline = time.monotonic() + 5
        while sink.sent != ["a:firing", "b:firing"] and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        d.stop()
    assert sink.sent == ["a:firing", "b:firing"]
    assert errors and set(errors) == {"slack"}
    assert d.backlog == {"slack": 0}


def test_one_sink_backing_off_does_not_hold_back_another(tmp_path: Path) -> None:
    ledger, slack, am = AlertLedger(tmp_path / "l.sqlite"), Sink("slack"), Sink("alertmanager")
    now = [100.0]
    d = Dispatcher(
        ledger,
        [slack, am],
        backoff_s=60,
        max_backoff_s=300,
        backoffs={"alertmanager": (2.0, 8.0)},
        clock=lambda: now[0],
    )
    slack.down = True
    ledger.record(0, [alert("a")], [slack, am])
    assert d.drain_once() is False
    assert am.sent == ["a:firing"] and slack.sent == []
    # A new batch while Slack backs off: Alertmanager gets it at once, Slack is not retried.
    slack.down = False
    ledger.record(1, [alert("b")], [slack, am])
    now[0] += 1
    assert d.drain_once() is False
    assert am.sent == ["a:firing", "b:firing"] and slack.sent == []
    now[0] += 60  # Slack's own back-off is over
    assert d.drain_once() is True
    assert slack.sent == ["a:firing", "b:firing"]
    # The second sink's back-off doubles from its own first wait up to its own ceiling.
    am.down = True
    ledger.record(2, [alert("c")], [slack, am])
    waits = []
    for _ in range(4):
        d.drain_once()
        waits.append(d._backoff.wait("alertmanager"))
        now[0] += d._backoff.wait("alertmanager") or 0
    assert waits == [2.0, 4.0, 8.0, 8.0]


def test_transitions_older_than_the_page_age_are_recorded_but_not_paged(tmp_path: Path) -> None:
    # After a checkpoint reset the query reads the topics again from `earliest`: the
    # incidents it finds in last month's records get new ids and must not page today.
    now = 1_700_000_000_000 + 30 * 86_400_000
    ledger = AlertLedger(tmp_path / "l.sqlite", clock=lambda: now)
    slack, file = Sink("slack"), Sink("file", notifies=False)
    fresh = alert("new").model_copy(update={"event_time_ms": now - 60_000})
    new = ledger.record(0, [alert("old"), fresh], [slack, file], max_age_ms=3_600_000)
    assert [t.key for t in new] == ["old:firing", "new:firing"]  # both recorded
    assert deliver(ledger, slack) == 0 and deliver(ledger, file) == 0
    assert slack.sent == ["new:firing"]
    assert file.sent == ["old:firing", "new:firing"]  # the record keeps everything
    assert ledger.counts()[("slack", "stale")] == 1
    assert ledger.outcomes[("slack", "stale")] == 1
    assert {t.alert.alert_id for t in ledger.active()} == {"old", "new"}


class Unsure(Sink):
    """A sink whose first send has an unknown outcome; what it says when asked is set."""

    def __init__(self, arrived: bool | None | Exception) -> None:
        super().__init__()
        self.arrived = arrived
        self.asked: list[str] = []
        self.unsure = 1

    def send(self, t: Transition) -> None:
        if self.unsure:
            self.unsure -= 1
            raise AmbiguousDeliveryError("chat_postMessage: HTTP 500")
        super().send(t)

    def confirm(self, t: Transition) -> bool | None:
        self.asked.append(t.key)
        if isinstance(self.arrived, Exception):
            raise self.arrived
        return self.arrived


@pytest.mark.parametrize(
    ("arrived", "sent", "then"),
    [
        (True, [], {"confirmed": 1, "delivered": 1}),
        (False, ["a:firing"], {"delivered": 2}),
        (None, ["a:firing"], {"resent_unconfirmed": 1, "delivered": 2}),
    ],
)
def test_a_send_with_an_unknown_outcome_stays_sending_and_is_asked_about_before_a_resend(
    tmp_path: Path, arrived: bool | None, sent: list[str], then: dict[str, int]
) -> None:
    ledger, sink = AlertLedger(tmp_path / "l.sqlite"), Unsure(arrived)
    ledger.record(0, [alert("a"), alert("b")], [sink])
    with pytest.raises(AmbiguousDeliveryError):
        deliver(ledger, sink)
    assert ledger.counts()[("slack", "sending")] == 1
    assert ledger.backlog() == {"slack": 2}  # "b" waits behind it, in order
    assert ledger.outcomes[("slack", "unknown")] == 1
    assert sink.asked == []
    assert deliver(ledger, sink) == 0
    assert sink.asked == ["a:firing"]
    assert sink.sent == [*sent, "b:firing"]
    assert dict(ledger.outcomes) == {("slack", k): n for k, n in {"unknown": 1, **then}.items()}


def test_a_sink_that_cannot_be_asked_yet_holds_the_send_back(tmp_path: Path) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = Unsure(RetryableDeliveryError("conversations_history: HTTP 503"))
    ledger.record(0, [alert("a")], [sink])
    with pytest.raises(AmbiguousDeliveryError):
        deliver(ledger, sink)
    with pytest.raises(RetryableDeliveryError, match="503"):
        deliver(ledger, sink)
    assert sink.sent == []  # not sent blind: it may be there already
    assert ledger.counts()[("slack", "sending")] == 1
    sink.arrived = False
    assert deliver(ledger, sink) == 0
    assert sink.sent == ["a:firing"]


def test_a_resolve_follows_its_firing_whatever_its_own_age(tmp_path: Path) -> None:
    # A paged incident whose resolve is recorded late (flinkwatch was down) still gets its
    # resolve; an incident withheld as stale does not get a lone "resolved" message.
    clock = {"now": 1_700_000_000_000}
    ledger = AlertLedger(tmp_path / "l.sqlite", clock=lambda: clock["now"])
    slack = Sink("slack")
    hour = 3_600_000
    paged = alert("paged").model_copy(update={"event_time_ms": clock["now"] - 60_000})
    ledger.record(0, [paged], [slack], max_age_ms=hour)
    clock["now"] += 2 * hour  # down for two hours; the resolve happened long ago
    late = alert("paged", AlertStatus.RESOLVED).model_copy(
        update={"event_time_ms": clock["now"] - 90 * 60_000}
    )
    old = alert("old")  # from 2023: stale
    fresh_resolve = alert("old", AlertStatus.RESOLVED).model_copy(
        update={"event_time_ms": clock["now"] - 1000}
    )
    ledger.record(1, [late, old, fresh_resolve], [slack], max_age_ms=hour)
    assert deliver(ledger, slack) == 0
    assert slack.sent == ["paged:firing", "paged:resolved"]
    assert ledger.counts()[("slack", "stale")] == 2


HOUR = 3_600_000


def at(a: Alert, ms: int) -> Alert:
    return a.model_copy(update={"event_time_ms": ms})


def test_an_escalation_of_an_incident_withheld_as_old_pages_as_what_it_is_now(
    tmp_path: Path,
) -> None:
    # flinkwatch was down: the incident opened meanwhile is old when recorded and withheld,
    # but its escalation happens now. The incident pages once, as the escalation; its
    # resolve then follows the page.
    now = 1_700_000_000_000
    ledger = AlertLedger(tmp_path / "l.sqlite", clock=lambda: now)
    slack, file = Sink("slack"), Sink("file", notifies=False)
    ledger.record(0, [at(alert("a"), now - 2 * HOUR)], [slack, file], max_age_ms=HOUR)
    up = at(alert("a", AlertStatus.ESCALATED, Severity.CRITICAL), now - 60_000)
    ledger.record(1, [up], [slack, file], max_age_ms=HOUR)
    assert deliver(ledger, slack) == 0
    assert slack.sent == ["a:escalated:critical"]
    done = at(alert("a", AlertStatus.RESOLVED, Severity.CRITICAL), now - 1000)
    ledger.record(2, [done], [slack, file], max_age_ms=HOUR)
    deliver(ledger, slack)
    deliver(ledger, file)
    assert slack.sent == ["a:escalated:critical", "a:resolved"]
    assert file.sent == ["a:firing", "a:escalated:critical", "a:resolved"]
    # An old escalation of a withheld incident is history like its firing.
    ledger.record(3, [at(alert("b"), now - 3 * HOUR)], [slack], max_age_ms=HOUR)
    late_up = at(alert("b", AlertStatus.ESCALATED, Severity.CRITICAL), now - 2 * HOUR)
    ledger.record(4, [late_up], [slack], max_age_ms=HOUR)
    assert deliver(ledger, slack) == 0
    assert slack.sent == ["a:escalated:critical", "a:resolved"]


def test_an_incident_withheld_while_flinkwatch_was_behind_pages_once_if_still_open_after(
    tmp_path: Path,
) -> None:
    clock = {"now": 1_700_000_000_000}
    ledger = AlertLedger(tmp_path / "l.sqlite", clock=lambda: clock["now"])
    slack = Sink("slack")

    def batch(batch_id: int, alerts: list[Alert], frontier_ago_ms: int) -> None:
        ledger.record(
            batch_id,
            alerts,
            [slack],
            max_age_ms=HOUR,
            frontier_ms=clock["now"] - frontier_ago_ms,
        )
        deliver(ledger, slack)

    batch(0, [at(alert("x"), clock["now"] - 60_000)], 30_000)  # running, up to date
    ledger.close()
    clock["now"] += 3 * HOUR  # down for three hours; the backlog is read on restart
    ledger = AlertLedger(tmp_path / "l.sqlite", clock=lambda: clock["now"])
    ago = 2 * HOUR
    batch(1, [at(alert("open"), clock["now"] - ago), at(alert("over"), clock["now"] - ago)], ago)
    batch(2, [at(alert("over", AlertStatus.RESOLVED), clock["now"] - 100 * 60_000)], 90 * 60_000)
    assert slack.sent == ["x:firing"]  # still catching up: nothing of the backlog yet
    batch(3, [], 20_000)  # caught up: "open" is still open, "over" ended in the backlog
    assert slack.sent == ["x:firing", "open:firing"]
    assert ledger.outcomes[("slack", "paged_late")] == 1
    batch(4, [], 10_000)
    assert slack.sent == ["x:firing", "open:firing"]  # once
    batch(5, [at(alert("open", AlertStatus.RESOLVED), clock["now"] - 5_000)], 5_000)
    assert slack.sent == ["x:firing", "open:firing", "open:resolved"]
    # An old firing while flinkwatch is up to date is not flinkwatch catching up (records
    # an hour late, history replayed): it stays withheld, whatever happens later.
    batch(6, [at(alert("late"), clock["now"] - 2 * HOUR)], 1_000)
    batch(7, [], 500)
    assert slack.sent == ["x:firing", "open:firing", "open:resolved"]


def test_an_incident_the_replayed_batch_no_longer_raises_is_closed_saying_why(
    tmp_path: Path,
) -> None:
    # A reload restarts the queries after the ledger recorded batch 5 and before Spark
    # committed it. Spark runs batch 5 again, on the state before it, with the new
    # settings: they raise "b" instead of "a". The detector holds no "a" and would never
    # resolve it; the ledger closes it, once, and nothing of "a" opens it again.
    ledger, slack = AlertLedger(tmp_path / "l.sqlite"), Sink()
    ledger.record(4, [alert("x")], [slack], run="q1")
    ledger.record(5, [alert("a"), alert("x", AlertStatus.RESOLVED)], [slack], run="q1")
    assert deliver(ledger, slack) == 0
    new = ledger.record(5, [alert("b"), alert("x", AlertStatus.RESOLVED)], [slack], run="q1")
    assert [t.key for t in new] == ["a:resolved", "b:firing"]
    closing = new[0].alert
    assert "did not raise it when run again" in closing.summary
    assert closing.evidence == {"reason": "not raised again after a restart", "batch": 5}
    assert [t.alert.alert_id for t in ledger.active()] == ["b"]
    assert deliver(ledger, slack) == 0
    assert slack.sent == ["x:firing", "a:firing", "x:resolved", "a:resolved", "b:firing"]
    # Run a third time: nothing more. Later output about "a" does not open it again.
    assert ledger.record(5, [alert("b"), alert("x", AlertStatus.RESOLVED)], [slack], run="q1") == []
    up = alert("a", AlertStatus.ESCALATED, Severity.CRITICAL)
    assert ledger.record(6, [up, alert("a", AlertStatus.RESOLVED)], [slack], run="q1") == []
    assert [t.alert.alert_id for t in ledger.active()] == ["b"]
    # Batch ids of another checkpoint (a reset one, a new shard count) are not compared.
    assert ledger.record(5, [], [slack], run="q2") == []
    assert [t.alert.alert_id for t in ledger.active()] == ["b"]


def test_a_resolve_is_final_so_nothing_later_leaves_the_incident_open(tmp_path: Path) -> None:
    # A resolve recorded by a batch that is then run again without it stands, while the
    # detector still holds the incident: what it says next (an escalation) must not open
    # the incident again, since its own resolve would then be a repeat, ignored, and the
    # incident would stay open forever.
    ledger, slack = AlertLedger(tmp_path / "l.sqlite"), Sink()
    ledger.record(0, [alert("a"), alert("a", AlertStatus.RESOLVED)], [slack])
    up = alert("a", AlertStatus.ESCALATED, Severity.CRITICAL)
    assert ledger.record(1, [up], [slack]) == []
    assert ledger.record(2, [alert("a", AlertStatus.RESOLVED)], [slack]) == []
    assert ledger.active() == []
    assert deliver(ledger, slack) == 0
    assert slack.sent == ["a:firing", "a:resolved"]


class Marking(Sink):
    """A sink that pages nobody and keeps each transition's silence (the alert file)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, notifies=False)
        self.marked: dict[str, str | None] = {}

    def send(self, t: Transition) -> None:
        super().send(t)
        self.marked[t.key] = t.silenced_by


class Critical(Sink):
    """A pager routed critical transitions only (PagerDuty for what escalated, say)."""

    def wants(self, t: Transition) -> bool:
        return t.alert.severity is Severity.CRITICAL


def test_every_sink_that_got_a_page_of_an_incident_gets_its_resolve_whatever_was_silenced(
    tmp_path: Path,
) -> None:
    # A job silenced for an hour: its incident fires under the silence. The silence ends,
    # the incident escalates and pages critical, then resolves. The resolve goes where the
    # escalation went (the pages must not stay open forever), not where the firing did.
    ledger = AlertLedger(tmp_path / "l.sqlite")
    slack, pager, file = Sink("slack"), Critical("pager"), Marking("file")
    sinks = [slack, pager, file]
    silenced = {"a", "quiet"}

    def silencer(a: Alert) -> str | None:
        return "upgrade" if a.alert_id in silenced else None

    ledger.record(0, [alert("a"), alert("quiet"), alert("paged")], sinks, silencer)
    silenced = {"paged"}  # the upgrade's silence is over; another one starts
    up = alert("a", AlertStatus.ESCALATED, Severity.CRITICAL)
    ledger.record(1, [up], sinks, silencer)
    ledger.record(
        2,
        [
            alert("a", AlertStatus.RESOLVED, Severity.CRITICAL),
            # Withheld all along: still no lone "resolved".
            alert("quiet", AlertStatus.RESOLVED),
            # Paged before its silence started: a silence withholds no resolve of a page.
            alert("paged", AlertStatus.RESOLVED),
        ],
        sinks,
        silencer,
    )
    for sink in sinks:
        assert deliver(ledger, sink) == 0
    assert slack.sent == ["paged:firing", "a:escalated:critical", "a:resolved", "paged:resolved"]
    assert pager.sent == ["a:escalated:critical", "a:resolved"]
    assert len(file.sent) == 7  # the record keeps everything
    states = {(d.key, d.sink): d.state for d in ledger.deliveries()}
    assert states[("a:firing", "slack")] == "silenced"
    assert states[("quiet:resolved", "slack")] == "silenced"
    # The alert file says what was withheld: the resolve of a paged incident was not.
    assert file.marked["a:resolved"] is None
    assert file.marked["quiet:resolved"] == "upgrade"
    assert file.marked["paged:resolved"] is None


def test_a_resolve_reaches_no_sink_that_got_no_page_of_its_incident(tmp_path: Path) -> None:
    # Paged to Slack before a silence started; escalated to critical under it, so the
    # critical-only pager got nothing of the incident: the resolve goes to Slack only.
    ledger = AlertLedger(tmp_path / "l.sqlite")
    slack, pager = Sink("slack"), Critical("pager")
    silence: list[str] = []

    def silencer(a: Alert) -> str | None:
        return silence[0] if silence else None

    ledger.record(0, [alert("a")], [slack, pager], silencer)
    silence.append("night")
    up = alert("a", AlertStatus.ESCALATED, Severity.CRITICAL)
    ledger.record(1, [up], [slack, pager], silencer)
    done = alert("a", AlertStatus.RESOLVED, Severity.CRITICAL)
    ledger.record(2, [done], [slack, pager], silencer)
    assert deliver(ledger, slack) == 0 and deliver(ledger, pager) == 0
    assert slack.sent == ["a:firing", "a:resolved"]
    assert pager.sent == []
