"""The webhook sink: body, signature, retries and order, against a real local receiver."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from conf import AppConfig, ConfigError, WebhookConfig
from detectors import Alert, AlertStatus, Severity
from detectors.base import Member
from detectors.correlation import IncidentView
from lab.procs import free_port
from sinks import AlertLedger, AmbiguousDeliveryError, Transition
from sinks.dispatch import Dispatcher, deliver
from sinks.webhook import SCHEMA_VERSION, WebhookSink, pagerduty_event, webhook_sinks
from tests.conftest import REPO, wait_until
from tests.sinks.test_alertmanager import JOB, T0
from tests.sinks.test_alertmanager import alert as am_alert

NOW_S = T0 / 1000 + 90
SECRET = "s3cret-for-tests"


def alert(
    status: AlertStatus = AlertStatus.FIRING,
    severity: Severity = Severity.WARNING,
    *,
    alert_id: str = "a1",
    at: int = T0,
) -> Alert:
    """The Alertmanager tests' alert, with a host and evidence."""
    a = am_alert(status, severity, alert_id=alert_id, at=at)
    return a.model_copy(update={"host": "tm-3.example", "evidence": {"expired": 3}})


def cfg(url: str, **kw: Any) -> WebhookConfig:
    return WebhookConfig(name=kw.pop("name", "oncall"), url=url, secret="${WH_SECRET}", **kw)


def sink_for(c: WebhookConfig, clock: Callable[[], float] = lambda: NOW_S) -> WebhookSink:
    (sink,) = webhook_sinks([c], lambda: "prod", env={"WH_SECRET": SECRET, "WH_TOKEN": "t0k"})
    sink._clock = clock
    return sink


def documented_verify() -> Callable[..., bool]:
    """The receiver's verification snippet of docs/webhooks.md, as the docs print it."""
    text = (REPO / "docs" / "webhooks.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    space: dict[str, Any] = {}
    exec(code, space)  # noqa: S102 - our own documentation
    verify: Callable[..., bool] = space["verify"]
    return verify


class Receiver:
    """A webhook receiver on a local port: answers the next queued status (then 200)."""

    def __init__(self, port: int = 0) -> None:
        self.answers: list[int] = []
        self.posts: list[tuple[dict[str, str], bytes]] = []
        self.port = port
        self.server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - name fixed by BaseHTTPRequestHandler
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append((dict(self.headers), body))
                status = receiver.answers.pop(0) if receiver.answers else 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.port = self.server.server_address[1]
        server = self.server
        threading.Thread(
            target=lambda: server.serve_forever(poll_interval=0.05), daemon=True
        ).start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/flinkwatch"

    def keys(self) -> list[str]:
        return [h["Idempotency-Key"] for h, _ in self.posts]

    def close(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    r.close()


def incident_of(status: AlertStatus, *member_ids: str) -> IncidentView:
    members = tuple(Member(**dict(alert(alert_id=m)), first_ms=T0) for m in member_ids)
    return IncidentView(
        incident_id="a1",
        headline="checkpoints expire: state grows",
        root_alert_id="a1",
        severity=Severity.WARNING,
        status=status,
        members=members,
    )


def lifecycle() -> list[Alert]:
    return [
        alert(),
        alert(AlertStatus.ESCALATED, Severity.CRITICAL, at=T0 + 30_000),
        alert(AlertStatus.RESOLVED, Severity.CRITICAL, at=T0 + 60_000),
    ]


# --- body and signature -------------------------------------------------------------


def test_the_body_follows_the_documented_schema_and_the_signature_verifies(
    tmp_path: Path, receiver: Receiver
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite", clock=lambda: T0 + 1_000)
    c = cfg(receiver.url, runbook_url="https://wiki/flink", headers={"X-Team": "data"})
    sink = sink_for(c)
    (t,) = ledger.record(0, [alert()], [sink])
    assert deliver(ledger, sink) == 0
    ((headers, raw),) = receiver.posts
    assert headers["Content-Type"] == "application/json"
    assert headers["Idempotency-Key"] == t.key == "a1:firing"
    assert headers["X-Team"] == "data"
    assert headers["X-Flinkwatch-Timestamp"] == str(int(NOW_S))
    body = json.loads(raw)
    assert body == {
        "version": SCHEMA_VERSION,
        "key": "a1:firing",
        "status": "firing",
        "severity": "warning",
        "detector": "checkpoint_failures",
        "alert_id": "a1",
        "labels": {
            "cluster": "prod",
            "job_id": JOB,
            "job_name": "orders-enrich",
            "tm_id": None,
            "host": "tm-3.example",
        },
        "incident": {
            "id": "a1",
            "headline": alert().summary,
            "status": "firing",
            "severity": "warning",
            "alerts": 1,
        },
        "summary": alert().summary,
        "evidence": {"expired": 3},
        "event_time": "2025-11-22T02:00:00.000Z",
        "recorded_time": "2025-11-22T02:00:01.000Z",
        "runbook": body["runbook"],  # the detector's own hint
        "runbook_url": "https://wiki/flink#checkpoint_failures",
    }
    assert body["runbook"]
    verify = documented_verify()
    stamp, signature = headers["X-Flinkwatch-Timestamp"], headers["X-Flinkwatch-Signature"]
    assert signature.startswith("v1=")
    assert verify(SECRET.encode(), stamp, signature, raw, now=NOW_S)
    tampered = raw.replace(b'"warning"', b'"info"', 1)
    assert tampered != raw
    assert not verify(SECRET.encode(), stamp, signature, tampered, now=NOW_S)
    assert not verify(b"another secret", stamp, signature, raw, now=NOW_S)
    # A signed post replayed later than the window is refused too.
    assert not verify(SECRET.encode(), stamp, signature, raw, now=NOW_S + 301)


def test_the_body_keeps_the_firings_job_when_the_resolve_omits_it(tmp_path: Path) -> None:
    done = alert(AlertStatus.RESOLVED, at=T0 + 60_000).model_copy(
        update={"job_name": None, "host": None}
    )
    incident = incident_of(AlertStatus.RESOLVED, "a1")
    sink = sink_for(cfg("http://127.0.0.1:1"))
    raw = sink.body(Transition(seq=2, key="a1:resolved", alert=done, incident=incident))
    assert raw is not None
    body = json.loads(raw)
    assert body["labels"]["job_name"] == "orders-enrich"
    assert body["labels"]["host"] == "tm-3.example"
    assert body["incident"]["headline"] == "checkpoints expire: state grows"
    assert body["runbook_url"] is None


def test_firing_escalated_and_resolved_are_each_posted_once_in_order(
    tmp_path: Path, receiver: Receiver
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = sink_for(cfg(receiver.url))
    for i, a in enumerate(lifecycle()):
        ledger.record(i, [a], [sink])
        ledger.record(i, [a], [sink])  # a replayed batch adds nothing
        assert deliver(ledger, sink) == 0
    assert deliver(ledger, sink) == 0
    assert receiver.keys() == ["a1:firing", "a1:escalated:critical", "a1:resolved"]
    statuses = [json.loads(b)["status"] for _, b in receiver.posts]
    assert statuses == ["firing", "escalated", "resolved"]


def test_a_route_posts_the_incidents_it_matches_and_each_to_its_end(
    tmp_path: Path, receiver: Receiver
) -> None:
    # The pager takes criticals only: an incident that escalates to critical is posted from
    # its escalation on, and its resolve follows; a warning that stays one is never posted.
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = sink_for(cfg(receiver.url, route={"severities": ["critical"]}))
    quiet = [alert(alert_id="w"), alert(AlertStatus.RESOLVED, alert_id="w", at=T0 + 5_000)]
    for i, a in enumerate([*lifecycle(), *quiet]):
        ledger.record(i, [a], [sink])
    assert deliver(ledger, sink) == 0
    assert receiver.keys() == ["a1:escalated:critical", "a1:resolved"]
    assert ledger.counts()[("webhook:oncall", "unrouted")] == 3
    by_label = sink_for(cfg(receiver.url, name="pay", route={"match": {"job_name": "nope-.*"}}))
    ledger.record(9, [alert(alert_id="n")], [by_label])
    assert deliver(ledger, by_label) == 0
    assert len(receiver.posts) == 2


# --- retries, order, exactly once ----------------------------------------------------


def test_a_receiver_down_then_up_gets_the_waiting_transitions_in_order(tmp_path: Path) -> None:
    late = Receiver(port=free_port())  # nothing listens yet: connection refused
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = sink_for(cfg(late.url))
    for i, a in enumerate(lifecycle()):
        ledger.record(i, [a], [sink])
    d = Dispatcher(ledger, [sink], backoffs={sink.name: (0.05, 0.2)}).start()
    try:
        wait_until(lambda: ledger.outcomes[(sink.name, "retry")] >= 2, 60, "failed tries")
        assert ledger.backlog() == {"webhook:oncall": 3}
        assert ledger.counts().get((sink.name, "sending"), 0) == 0  # surely not sent
        late.start()
        wait_until(lambda: not ledger.backlog(), 60, "the backlog sent")
    finally:
        d.stop()
        late.close()
    assert late.keys() == ["a1:firing", "a1:escalated:critical", "a1:resolved"]
    assert ledger.outcomes[(sink.name, "resent_unconfirmed")] == 0


def test_a_500_is_retried_with_the_same_idempotency_key_and_counted_unconfirmed(
    tmp_path: Path, receiver: Receiver
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    stamps = iter([NOW_S, NOW_S + 7, NOW_S + 8])
    sink = sink_for(cfg(receiver.url), clock=lambda: next(stamps))
    ledger.record(0, [alert(), alert(alert_id="b2")], [sink])
    receiver.answers = [500]
    with pytest.raises(AmbiguousDeliveryError, match="HTTP 500"):
        deliver(ledger, sink)  # it may have been taken: kept `sending`, nothing after it sent
    assert receiver.keys() == ["a1:firing"]
    assert ledger.counts()[(sink.name, "sending")] == 1
    assert deliver(ledger, sink) == 0
    assert receiver.keys() == ["a1:firing", "a1:firing", "b2:firing"]
    (h1, b1), (h2, b2) = receiver.posts[:2]
    assert b1 == b2  # the same body, signed anew
    assert h1["X-Flinkwatch-Timestamp"] != h2["X-Flinkwatch-Timestamp"]
    assert ledger.outcomes[(sink.name, "resent_unconfirmed")] == 1


def test_a_400_is_skipped_and_the_next_delivered(tmp_path: Path, receiver: Receiver) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = sink_for(cfg(receiver.url))
    ledger.record(0, [alert(), alert(alert_id="b2")], [sink])
    receiver.answers = [400]
    assert deliver(ledger, sink) == 0
    assert receiver.keys() == ["a1:firing", "b2:firing"]
    failed = ledger.deliveries(["failed"])
    assert [(d.sink, d.key) for d in failed] == [("webhook:oncall", "a1:firing")]
    assert "HTTP 400" in (failed[0].error or "")


def test_408_and_429_are_retried_in_order(tmp_path: Path, receiver: Receiver) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = sink_for(cfg(receiver.url))
    ledger.record(0, [alert(), alert(alert_id="b2")], [sink])
    for status in (429, 408):
        receiver.answers = [status]
        with pytest.raises(Exception, match=f"HTTP {status}") as err:
            deliver(ledger, sink)
        assert not isinstance(err.value, AmbiguousDeliveryError)  # surely not taken
    assert deliver(ledger, sink) == 0
    assert receiver.keys() == ["a1:firing", "a1:firing", "a1:firing", "b2:firing"]
    assert ledger.outcomes[(sink.name, "resent_unconfirmed")] == 0


def test_a_send_cut_by_a_crash_is_sent_again_with_the_same_idempotency_key(
    tmp_path: Path, receiver: Receiver
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = sink_for(cfg(receiver.url))
    (t,) = ledger.record(0, [alert()], [sink])
    ledger.mark(sink.name, t.seq, "sending")  # the process died during the post
    ledger.close()
    ledger = AlertLedger(tmp_path / "l.sqlite")  # the next start
    assert deliver(ledger, sink) == 0
    assert receiver.keys() == [t.key]
    assert ledger.outcomes[(sink.name, "resent_unconfirmed")] == 1
    assert ledger.outcomes[(sink.name, "delivered")] == 1


def test_two_webhooks_back_off_independently(tmp_path: Path, receiver: Receiver) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    down = sink_for(cfg(f"http://127.0.0.1:{free_port()}/x", name="down"))
    up = sink_for(cfg(receiver.url, name="up"))
    assert (down.name, up.name) == ("webhook:down", "webhook:up")
    ledger.record(0, [alert()], [down, up])
    d = Dispatcher(
        ledger, [down, up], backoffs={down.name: (0.05, 0.1), up.name: (30.0, 60.0)}
    ).start()
    try:
        wait_until(lambda: ledger.backlog() == {down.name: 1}, 60, "the up webhook served")
        wait_until(lambda: ledger.outcomes[(down.name, "retry")] >= 3, 60, "the down one retried")
        ledger.record(1, [alert(alert_id="b2")], [down, up])
        d.wake()
        # The up webhook is not held back by the other's outage (nor its back-off).
        wait_until(lambda: receiver.keys() == ["a1:firing", "b2:firing"], 60, "the second post")
        assert d._backoff.due(up.name) is None
    finally:
        d.stop()
    assert ledger.backlog() == {down.name: 2}


# --- PagerDuty Events API v2 ----------------------------------------------------------


def test_pagerduty_events_are_valid_v2_with_one_dedup_key_per_incident(
    tmp_path: Path, receiver: Receiver
) -> None:
    c = WebhookConfig(
        name="pd",
        url=receiver.url,
        format="pagerduty",
        routing_key="${PD_KEY}",
        runbook_url="https://wiki/flink",
    )
    (sink,) = webhook_sinks([c], lambda: "prod", env={"PD_KEY": "R0UTING"})
    ledger = AlertLedger(tmp_path / "l.sqlite")
    firing = alert()
    joined = alert(alert_id="b2", at=T0 + 10_000)
    up = alert(AlertStatus.ESCALATED, Severity.CRITICAL, at=T0 + 30_000)
    b2_done = alert(AlertStatus.RESOLVED, alert_id="b2", at=T0 + 40_000)
    done = alert(AlertStatus.RESOLVED, Severity.CRITICAL, at=T0 + 60_000)
    views = {
        firing.status.value + firing.alert_id: incident_of(AlertStatus.FIRING, "a1"),
        joined.status.value + joined.alert_id: incident_of(AlertStatus.FIRING, "a1", "b2"),
        up.status.value + up.alert_id: incident_of(AlertStatus.FIRING, "a1", "b2"),
        b2_done.status.value + b2_done.alert_id: incident_of(AlertStatus.FIRING, "a1", "b2"),
        done.status.value + done.alert_id: incident_of(AlertStatus.RESOLVED, "a1", "b2"),
    }
    for i, a in enumerate([firing, joined, up, b2_done, done]):
        ledger.record(i, [a], [sink], correlate=lambda x: views[x.status.value + x.alert_id])
    assert deliver(ledger, sink) == 0
    events = [json.loads(b) for _, b in receiver.posts]
    # b2's own resolve is not sent: resolving the dedup_key would close the incident.
    assert [e["event_action"] for e in events] == ["trigger", "trigger", "trigger", "resolve"]
    assert {e["dedup_key"] for e in events} == {"a1"}
    assert {e["routing_key"] for e in events} == {"R0UTING"}
    for e in events[:3]:
        p = e["payload"]
        assert set(p) >= {"summary", "source", "severity"}
        assert p["severity"] in ("critical", "error", "warning", "info")
        assert 0 < len(p["summary"]) <= 1024
        assert p["source"] == "tm-3.example"
        assert p["custom_details"]["version"] == SCHEMA_VERSION
        assert e["links"] == [{"href": "https://wiki/flink#checkpoint_failures", "text": "runbook"}]
    assert events[2]["payload"]["severity"] == "critical"
    assert set(events[3]) == {"routing_key", "event_action", "dedup_key"}
    # A repeat is harmless to PagerDuty (dedup_key): a crash's resend is not "unconfirmed".
    assert sink.confirm(Transition(seq=1, key="a1:firing", alert=firing)) is False
    assert "X-Flinkwatch-Signature" not in receiver.posts[0][0]  # no secret configured


def test_the_body_names_the_incidents_taskmanager_as_its_first_member_spelled_it() -> None:
    from sinks.webhook import payload
    from tests.sinks.spellings import LOGGED, SCRAPED, incident

    first = alert().model_copy(update={"tm_id": SCRAPED})
    later = alert(alert_id="b2").model_copy(update={"tm_id": LOGGED})
    both = incident(first, later, first_ms=T0)
    c = cfg("http://127.0.0.1:1")
    body = payload(Transition(seq=2, key="b2:firing", alert=later, incident=both), c, "p")
    assert body["labels"]["tm_id"] == SCRAPED
    assert body["summary"] == later.summary


def test_an_uncorrelated_resolve_resolves_its_own_dedup_key() -> None:
    c = WebhookConfig(
        name="pd",
        url="https://events.pagerduty.com/v2/enqueue",
        format="pagerduty",
        routing_key="${PD_KEY}",
    )
    done = Transition(seq=2, key="a1:resolved", alert=alert(AlertStatus.RESOLVED))
    assert pagerduty_event(done, c, "prod", "k") == {
        "routing_key": "k",
        "event_action": "resolve",
        "dedup_key": "a1",
    }


# --- config and secrets ---------------------------------------------------------------


def test_secrets_stay_out_of_the_file_and_flinkwatchs_headers_cannot_be_replaced() -> None:
    url = "https://hooks.example/x"
    with pytest.raises(ValidationError, match="ENV_VAR"):
        WebhookConfig(name="a", url=url, secret="s3cret")
    with pytest.raises(ValidationError, match="signs every post"):
        WebhookConfig(name="a", url=url)
    with pytest.raises(ValidationError, match="routing_key"):
        WebhookConfig(name="a", url=url, format="pagerduty")
    with pytest.raises(ValidationError, match="set by flinkwatch"):
        cfg(url, headers={"idempotency-key": "x"})
    with pytest.raises(ValidationError, match="Authorization is a secret"):
        cfg(url, headers={"Authorization": "Bearer t0k"})
    with pytest.raises(ValidationError, match="unique"):
        AppConfig.model_validate({"webhooks": [dict(name="a", url=url, secret="${S}")] * 2})
    assert AppConfig().webhooks == ()


def test_a_missing_secret_stops_the_start_and_header_secrets_come_from_the_environment(
    receiver: Receiver, tmp_path: Path
) -> None:
    c = cfg(receiver.url, headers={"Authorization": "${WH_TOKEN}"})
    with pytest.raises(ConfigError, match=r"webhooks\.0\.secret: environment variable WH_SECRET"):
        webhook_sinks([c], lambda: "prod", env={"WH_TOKEN": "Bearer t0k"})
    with pytest.raises(ConfigError, match=r"webhooks\.0\.headers\.Authorization"):
        webhook_sinks([c], lambda: "prod", env={"WH_SECRET": SECRET})
    (sink,) = webhook_sinks(
        [c], lambda: "prod", env={"WH_SECRET": SECRET, "WH_TOKEN": "Bearer t0k"}
    )
    ledger = AlertLedger(tmp_path / "l.sqlite")
    ledger.record(0, [alert()], [sink])
    assert deliver(ledger, sink) == 0
    assert receiver.posts[0][0]["Authorization"] == "Bearer t0k"
