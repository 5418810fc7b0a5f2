"""The Alertmanager sink: payloads, retries, re-sends; and against Debian's real Alertmanager."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from conf import AlertmanagerConfig, AppConfig, ConfigError
from detectors import Alert, AlertStatus, Severity
from detectors.base import Member
from detectors.correlation import IncidentView
from lab.procs import free_port
from lab.promserver import AlertmanagerServer, find_binary
from lab.slack import SlackEmulator
from sinks import (
    AlertLedger,
    AmbiguousDeliveryError,
    PermanentDeliveryError,
    RetryableDeliveryError,
    Transition,
)
from sinks.alertmanager import (
    RESEND_INTERVALS,
    AlertmanagerSink,
    Resender,
    alertmanager_sink,
    classify,
    rfc3339,
    transition_alerts,
)
from sinks.dispatch import Dispatcher, deliver
from tests.conftest import wait_until
from tests.sinks.receivers import Hung, Recording
from tests.sinks.spellings import LOGGED, SCRAPED, incident, tm_alert

JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
OTHER_JOB = "aa4c2a9b7d1e4f60a8b5c2d1e0f9a7ff"
T0 = 1_763_776_800_000  # 2025-11-22T02:00:00Z
NOW = T0 + 90_000
#: The label set of ``alert()`` in cluster ``prod`` with the static label ``team: data``.
LABELS = {
    "team": "data",
    "alertname": "checkpoint_failures",
    "detector": "checkpoint_failures",
    "severity": "warning",
    "cluster": "prod",
    "job_id": JOB,
    "job_name": "orders-enrich",
    "incident": "a1",
}


def alert(
    status: AlertStatus = AlertStatus.FIRING,
    severity: Severity = Severity.WARNING,
    *,
    alert_id: str = "a1",
    job_id: str = JOB,
    at: int = T0,
    job_name: str | None = "orders-enrich",
) -> Alert:
    return Alert(
        alert_id=alert_id,
        detector="checkpoint_failures",
        entity=f"job:{job_id}",
        status=status,
        severity=severity,
        event_time_ms=at,
        summary=f"3 checkpoints of job {job_id} expired within 30 min",
        job_id=job_id,
        job_name=job_name,
    )


def cfg(**kw: Any) -> AlertmanagerConfig:
    return AlertmanagerConfig(urls=kw.pop("urls", ("http://127.0.0.1:1",)), **kw)


def tr(a: Alert, seq: int = 1, incident: IncidentView | None = None) -> Transition:
    return Transition(seq=seq, key=f"{a.alert_id}:{a.status.value}", alert=a, incident=incident)


# --- payloads ------------------------------------------------------------------------


def test_times_are_rfc3339_utc_to_the_millisecond() -> None:
    assert rfc3339(T0) == "2025-11-22T02:00:00.000Z"
    assert rfc3339(T0 + 753) == "2025-11-22T02:00:00.753Z"


def test_a_firing_carries_only_labels_with_a_value_and_ends_four_intervals_ahead() -> None:
    c = cfg(resend_interval_s=60, labels={"team": "data"}, runbook_url="https://wiki/flink")
    (p,) = transition_alerts(tr(alert()), previous=None, cfg=c, cluster="prod", now_ms=NOW)
    assert p.labels == LABELS  # no tm_id: the alert has none
    assert p.annotations["summary"].startswith("3 checkpoints")
    assert p.annotations["runbook"]  # the detector's own
    assert p.annotations["runbook_url"] == "https://wiki/flink#checkpoint_failures"
    assert "root_cause" not in p.annotations  # an incident of one alert
    body = p.to_json()
    assert body["startsAt"] == "2025-11-22T02:00:00.000Z"
    assert body["endsAt"] == rfc3339(NOW + RESEND_INTERVALS * 60_000)
    assert "generatorURL" not in body


def test_a_fixed_alertname_and_the_incident_root_cause() -> None:
    first = alert(at=T0 - 60_000)
    member = Member(**dict(first), first_ms=T0 - 60_000)
    other = Member(**dict(alert(alert_id="b2")), first_ms=T0)
    incident = IncidentView(
        incident_id="a1",
        headline="checkpoints expire: state grows",
        root_alert_id="a1",
        severity=Severity.WARNING,
        status=AlertStatus.FIRING,
        members=(member, other),
    )
    c = cfg(alertname="FlinkIncident", generator_url="https://grafana/d/flink")
    (p,) = transition_alerts(
        tr(alert(alert_id="b2"), incident=incident), previous=None, cfg=c, cluster="c", now_ms=NOW
    )
    assert p.labels["alertname"] == "FlinkIncident" and p.labels["incident"] == "a1"
    assert p.annotations["root_cause"] == "checkpoints expire: state grows"
    assert p.to_json()["generatorURL"] == "https://grafana/d/flink"


def test_an_escalation_resolves_the_old_severity_and_fires_the_new() -> None:
    up = alert(AlertStatus.ESCALATED, Severity.CRITICAL, at=T0 + 30_000)
    old, new = transition_alerts(
        tr(up, seq=2), previous=alert(), cfg=cfg(), cluster="c", now_ms=NOW
    )
    assert old.labels["severity"] == "warning" and old.resolved_at(NOW)
    assert old.to_json()["endsAt"] == rfc3339(T0 + 30_000)
    assert new.labels["severity"] == "critical" and not new.resolved_at(NOW)
    assert {k: v for k, v in old.labels.items() if k != "severity"} == {
        k: v for k, v in new.labels.items() if k != "severity"
    }


def test_a_resolve_ends_at_its_time_with_the_firings_labels() -> None:
    member = Member(**dict(alert()), first_ms=T0)
    # The resolve does not name the job any more; the incident's member still does.
    done = alert(AlertStatus.RESOLVED, at=T0 + 60_000, job_name=None)
    incident = IncidentView(
        incident_id="a1",
        headline="h",
        root_alert_id="a1",
        severity=Severity.WARNING,
        status=AlertStatus.RESOLVED,
        members=(member.model_copy(update={"event_time_ms": T0 + 60_000}),),
    )
    (p,) = transition_alerts(
        tr(done, 2, incident), previous=alert(), cfg=cfg(), cluster="c", now_ms=NOW
    )
    assert p.labels["job_name"] == "orders-enrich"
    assert p.to_json()["startsAt"] == rfc3339(T0)
    assert p.to_json()["endsAt"] == rfc3339(T0 + 60_000)
    # A resolve time ahead of the clock would keep it firing in Alertmanager: it ends now.
    late = done.model_copy(update={"event_time_ms": NOW + 100_000})
    (p,) = transition_alerts(tr(late, 2), previous=alert(), cfg=cfg(), cluster="c", now_ms=NOW)
    assert p.to_json()["endsAt"] == rfc3339(NOW)


def test_an_incident_names_its_taskmanager_in_one_spelling_in_every_label_set() -> None:
    # The heap alert fired on the metrics' spelling; jvm_fatal joined after the logs said
    # the TaskManager's id, and resolves on it. An `inhibit_rules: equal: [tm_id]` must
    # see one TaskManager, and the resolve must end the alert it fired.
    heap = tm_alert("h", "idle_heap_growth", SCRAPED, at=T0)
    fatal = tm_alert("f", "jvm_fatal", LOGGED, at=T0)
    both = incident(heap, fatal, first_ms=T0)
    done = fatal.model_copy(update={"status": AlertStatus.RESOLVED})
    posted = [
        p
        for a, prev in [(heap, None), (fatal, None), (done, fatal)]
        for p in transition_alerts(
            tr(a, incident=both), previous=prev, cfg=cfg(), cluster="c", now_ms=NOW
        )
    ]
    assert [p.labels["tm_id"] for p in posted] == [SCRAPED] * 3


def test_http_answers_are_classified_by_whether_a_retry_can_help() -> None:
    assert classify(200) is None
    for status in (500, 502, 503):  # it may have been taken: retried all the same
        assert classify(status) is AmbiguousDeliveryError, status
    for status in (429, 408, 401, 403, 404):
        assert classify(status) is RetryableDeliveryError, status
    for status in (400, 422, 413):
        assert classify(status) is PermanentDeliveryError, status


# --- config ---------------------------------------------------------------------------


def test_static_labels_cannot_replace_flinkwatchs_and_secrets_stay_out_of_the_file() -> None:
    with pytest.raises(ValidationError, match="set by flinkwatch"):
        cfg(labels={"severity": "page"})
    with pytest.raises(ValidationError, match="ENV_VAR"):
        cfg(bearer_token="s3cret")
    with pytest.raises(ValidationError, match="come together"):
        cfg(basic_auth_username="flinkwatch")
    assert not AppConfig().alertmanager.enabled
    assert cfg(urls=["http://am-0:9093/", "http://am-1:9093"]).urls == (
        "http://am-0:9093",
        "http://am-1:9093",
    )


def test_a_secret_variable_that_is_unset_stops_the_start(tmp_path: Path) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    c = cfg(bearer_token="${AM_TOKEN}")
    with pytest.raises(ConfigError, match="AM_TOKEN"):
        alertmanager_sink(lambda: c, lambda: "c", ledger, env={})
    assert alertmanager_sink(lambda: cfg(urls=()), lambda: "c", ledger) is None


# --- HTTP, against a recording server ---------------------------------------------------


class Recorder:
    """A stand-in Alertmanager answering a set status, recording each post."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.posts: list[tuple[dict[str, str], list[dict[str, Any]]]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - name fixed by BaseHTTPRequestHandler
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recorder.posts.append((dict(self.headers), json.loads(body)))
                self.send_response(recorder.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    r = Recorder()
    yield r
    r.close()


def test_one_alertmanager_of_two_taking_it_is_a_delivery(
    tmp_path: Path, recorder: Recorder
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    down = f"http://127.0.0.1:{free_port()}"
    c = cfg(urls=(down, recorder.url), bearer_token="${AM_TOKEN}")
    sink = alertmanager_sink(lambda: c, lambda: "c", ledger, env={"AM_TOKEN": "t0k"})
    assert sink is not None
    ledger.record(0, [alert()], [sink])
    assert deliver(ledger, sink) == 0
    ((headers, body),) = recorder.posts
    assert headers["Authorization"] == "Bearer t0k"
    assert body[0]["labels"]["job_id"] == JOB


def test_a_5xx_everywhere_is_retried_in_order_and_a_400_is_skipped(
    tmp_path: Path, recorder: Recorder
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = AlertmanagerSink(ledger, lambda: cfg(urls=(recorder.url,)), lambda: "c")
    ledger.record(0, [alert(alert_id="a"), alert(alert_id="b")], [sink])
    recorder.status = 503
    with pytest.raises(RetryableDeliveryError, match="HTTP 503"):
        deliver(ledger, sink)
    assert ledger.backlog() == {"alertmanager": 2}
    recorder.status = 400
    assert deliver(ledger, sink) == 0  # refused for good: failed, the rest goes on
    assert ledger.counts()[("alertmanager", "failed")] == 2


def test_a_send_cut_by_a_crash_is_posted_again_without_asking(
    tmp_path: Path, recorder: Recorder
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = AlertmanagerSink(ledger, lambda: cfg(urls=(recorder.url,)), lambda: "c")
    (t,) = ledger.record(0, [alert()], [sink])
    ledger.mark(sink.name, t.seq, "sending")  # the process died during the post
    assert deliver(ledger, sink) == 0
    assert len(recorder.posts) == 1  # one request: no lookup, the post itself
    assert ledger.outcomes[("alertmanager", "delivered")] == 1
    assert ledger.outcomes[("alertmanager", "resent_unconfirmed")] == 0


def test_the_open_alerts_are_what_was_delivered_and_nothing_newer_is_on_its_way(
    tmp_path: Path, recorder: Recorder
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = AlertmanagerSink(
        ledger, lambda: cfg(urls=(recorder.url,)), lambda: "c", clock=lambda: NOW
    )
    silenced = alert(alert_id="s")
    ledger.record(
        0,
        [alert(alert_id="open"), alert(alert_id="done"), silenced],
        [sink],
        silencer=lambda a: "maintenance" if a.alert_id == "s" else None,
    )
    deliver(ledger, sink)
    ledger.record(1, [alert(AlertStatus.RESOLVED, alert_id="done", at=T0 + 1)], [sink])
    assert [t.alert.alert_id for t in ledger.standing(sink.name)] == ["open"]  # resolve recorded
    up = alert(AlertStatus.ESCALATED, Severity.CRITICAL, alert_id="open", at=T0 + 2)
    ledger.record(2, [up], [sink])
    assert ledger.standing(sink.name) == []  # its escalation is on its way: not repeated
    deliver(ledger, sink)
    recorder.posts.clear()
    assert sink.repost() == 1
    ((_, body),) = recorder.posts
    assert [(a["labels"]["severity"], a["endsAt"]) for a in body] == [
        ("critical", rfc3339(NOW + RESEND_INTERVALS * 60_000))
    ]


class CountingSink:
    """Counts re-posts; raises while down."""

    def __init__(self) -> None:
        self.calls = 0
        self.down = False

    def repost(self) -> int:
        self.calls += 1
        if self.down:
            msg = "connection refused"
            raise RetryableDeliveryError(msg)
        return 3


def test_the_resender_posts_at_start_then_every_interval_even_after_a_failure() -> None:
    now, interval = [0.0], [60.0]
    sink = CountingSink()
    r = Resender(sink, lambda: interval[0], clock=lambda: now[0])  # type: ignore[arg-type]
    assert r.tick() == 60.0 and sink.calls == 1  # at once: after a restart endsAt may be near
    now[0] = 59.9
    assert r.tick() == pytest.approx(0.1) and sink.calls == 1
    now[0], sink.down = 60.0, True
    assert r.tick() == 60.0 and sink.calls == 2  # failed: logged, the next pass as usual
    now[0], sink.down, interval[0] = 120.0, False, 30.0  # a reload shortened it
    assert r.tick() == 30.0 and sink.calls == 3 and r.posted == 3
    now[0] = 150.0
    r.tick()
    assert sink.calls == 4 and r.passes == 4


def test_the_resender_thread_stops_when_asked() -> None:
    sink = CountingSink()
    r = Resender(sink, lambda: 3600.0).start()  # type: ignore[arg-type]
    wait_until(lambda: sink.calls == 1, timeout=60, what="the first pass")
    started = time.monotonic()
    r.stop()
    assert r._thread is not None and not r._thread.is_alive()
    assert time.monotonic() - started < 2


# --- against Debian's real Alertmanager ---------------------------------------------


def alertmanager_binary() -> Path:
    prom = find_binary()
    if prom is None or not prom.with_name("alertmanager").is_file():
        pytest.fail("no alertmanager binary: run `scripts/prometheus.sh fetch` (make setup does)")
    return prom.with_name("alertmanager")


class RealAlertmanager:
    """Debian's Alertmanager routing to a local Slack webhook, and its v2 API."""

    def __init__(self, tmp_path: Path, slack: SlackEmulator) -> None:
        self.server = AlertmanagerServer(
            alertmanager_binary(),
            tmp_path / "am",
            slack.webhook_url,
            "#flink-alerts",
            group_wait_s=0.2,
        )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> RealAlertmanager:
        self.server.start(timeout=30, port=self.port)
        return self

    def api(self, path: str, body: object = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(  # noqa: S310 - a local URL
            f"{self.url}/api/v2/{path}",
            data=data,
            headers={"Content-Type": "application/json"},
            method="GET" if body is None else "POST",
        )
        with urllib.request.urlopen(req, timeout=5) as resp:  # noqa: S310
            return json.load(resp)

    def active(self, job_id: str = JOB) -> list[dict[str, Any]]:
        return [a for a in self.api("alerts") if a["labels"].get("job_id") == job_id]


@pytest.fixture
def slack() -> Iterator[SlackEmulator]:
    with SlackEmulator(channels=("#flink-alerts",)) as emu:
        yield emu


@pytest.fixture
def am(tmp_path: Path, slack: SlackEmulator) -> Iterator[RealAlertmanager]:
    real = RealAlertmanager(tmp_path, slack)
    yield real
    real.server.stop()


def sink_for(ledger: AlertLedger, am: RealAlertmanager) -> AlertmanagerSink:
    c = cfg(urls=(am.url,), labels={"team": "data"})
    return AlertmanagerSink(ledger, lambda: c, lambda: "prod")


def test_real_alertmanager_fires_escalates_and_resolves_one_alert(
    tmp_path: Path, am: RealAlertmanager
) -> None:
    am.start()
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = sink_for(ledger, am)
    now = int(time.time() * 1000)
    ledger.record(0, [alert(at=now - 60_000)], [sink])
    deliver(ledger, sink)
    wait_until(lambda: len(am.active()) == 1, timeout=60, what="the firing alert")
    (firing,) = am.active()
    assert firing["labels"] == LABELS
    assert firing["status"]["state"] in ("active", "unprocessed")
    ledger.record(1, [alert(AlertStatus.ESCALATED, Severity.CRITICAL, at=now - 30_000)], [sink])
    deliver(ledger, sink)
    wait_until(
        lambda: [a["labels"]["severity"] for a in am.active()] == ["critical"],
        timeout=60,
        what="one alert, critical",
    )
    ledger.record(2, [alert(AlertStatus.RESOLVED, Severity.CRITICAL, at=now)], [sink])
    deliver(ledger, sink)
    wait_until(lambda: am.active() == [], timeout=60, what="the resolve")
    sink.repost()  # the resolved alert is not posted again
    assert am.active() == []


def test_real_alertmanager_silence_suppresses_the_notification(
    tmp_path: Path, am: RealAlertmanager, slack: SlackEmulator
) -> None:
    am.start()
    now = int(time.time() * 1000)
    am.api(
        "silences",
        {
            "matchers": [{"name": "job_id", "value": JOB, "isRegex": False, "isEqual": True}],
            "startsAt": rfc3339(now - 1000),
            "endsAt": rfc3339(now + 3_600_000),
            "createdBy": "test",
            "comment": "maintenance, in Alertmanager",
        },
    )
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = sink_for(ledger, am)
    quiet = alert(at=now - 60_000)
    loud = alert(alert_id="b1", job_id=OTHER_JOB, at=now - 60_000)
    ledger.record(0, [quiet, loud], [sink])
    assert deliver(ledger, sink) == 0  # both delivered: the silence is Alertmanager's business
    wait_until(
        lambda: [a["status"]["state"] for a in am.active()] == ["suppressed"],
        timeout=60,
        what="the silenced alert suppressed",
    )
    # The other job's alert pages: the receiver works, and it is the only page.
    wait_until(lambda: slack.webhook_messages(), timeout=60, what="the page of the other job")
    texts = [m["text"] for m in slack.webhook_messages()]
    assert any(OTHER_JOB in t for t in texts)
    assert not any(JOB in t for t in texts)


def test_real_alertmanager_down_the_transitions_wait_and_go_out_in_order(
    tmp_path: Path, am: RealAlertmanager
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = sink_for(ledger, am)
    now = int(time.time() * 1000)
    ledger.record(0, [alert(at=now - 60_000), alert(alert_id="b1", job_id=OTHER_JOB)], [sink])
    ledger.record(1, [alert(AlertStatus.ESCALATED, Severity.CRITICAL, at=now - 20_000)], [sink])
    ledger.record(2, [alert(AlertStatus.RESOLVED, alert_id="b1", job_id=OTHER_JOB, at=now)], [sink])
    d = Dispatcher(ledger, [sink], backoff_s=0.1, max_backoff_s=0.3).start()
    try:
        wait_until(lambda: ledger.outcomes[("alertmanager", "retry")] >= 2, 60, "failed tries")
        assert ledger.backlog() == {"alertmanager": 4}
        am.start()
        wait_until(lambda: not ledger.backlog(), 60, "the backlog sent")
    finally:
        d.stop()
    sent = [d.key for d in ledger.deliveries(["delivered"])]
    assert sent == ["a1:firing", "b1:firing", "a1:escalated:critical", "b1:resolved"]
    # In order: the escalation left one critical alert; the resolve left none of job b.
    assert [a["labels"]["severity"] for a in am.active()] == ["critical"]
    assert am.active(OTHER_JOB) == []


# --- a member of an HA pair that hangs (issue #35, item 2) ------------------------------


def test_a_silent_member_of_an_ha_pair_is_backed_off_on_its_own(tmp_path: Path) -> None:
    # It takes connections and never answers: each post to it costs the whole time-out.
    silent, ok = Hung("silent"), Recording()
    try:
        ledger = AlertLedger(tmp_path / "l.sqlite")
        c = cfg(urls=(silent.url, ok.url), timeout_s=0.5, retry_backoff_s=600, max_backoff_s=600)
        sink = AlertmanagerSink(ledger, lambda: c, lambda: "prod")
        ledger.record(0, [alert(alert_id=f"a{i}") for i in range(4)], [sink])
        assert deliver(ledger, sink) == 0
        assert len(ok.got) == 4  # the other member took every post
        assert silent.requests == 1  # tried once, then left alone while it backs off
        assert sink.repost() == 4
        assert (len(ok.got), silent.requests) == (5, 1)  # the re-sends skip it too
    finally:
        silent.close()
        ok.close()


def test_a_lone_alertmanager_backing_off_is_still_tried(tmp_path: Path) -> None:
    # With no other member to take the post, its own back-off must not skip it: the
    # dispatcher's back-off of the sink paces the tries.
    silent = Hung("silent")
    try:
        ledger = AlertLedger(tmp_path / "l.sqlite")
        c = cfg(urls=(silent.url,), timeout_s=0.3, retry_backoff_s=600, max_backoff_s=600)
        sink = AlertmanagerSink(ledger, lambda: c, lambda: "prod")
        ledger.record(0, [alert()], [sink])
        for _ in range(2):
            with pytest.raises(RetryableDeliveryError, match="no answer"):
                deliver(ledger, sink)
        assert silent.requests == 2
    finally:
        silent.close()
