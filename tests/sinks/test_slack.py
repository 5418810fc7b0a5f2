"""The Slack sinks, through the real slack-sdk clients, against the local Slack emulator."""

from __future__ import annotations

import logging
import re
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from conf import ConfigError, SlackConfig
from detectors import Alert, AlertStatus, Severity
from lab.slack import SlackEmulator
from sinks import AlertLedger, PermanentDeliveryError, RetryableDeliveryError, dispatch
from sinks.slack import SlackBotSink, SlackWebhookSink, further_channels, slack_sink
from sinks.slack.message import esc, render

TOKEN = "xoxb-0000-secret-token"
JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
TM = "container_e05_1699999999999_0042_01_000003"


def alert(
    status: AlertStatus = AlertStatus.FIRING,
    severity: Severity = Severity.WARNING,
    alert_id: str = "a1",
    detector: str = "idle_heap_growth",
) -> Alert:
    return Alert(
        alert_id=alert_id,
        detector=detector,
        entity=f"tm:{TM}",
        status=status,
        severity=severity,
        event_time_ms=1_763_776_800_000,
        summary="post-GC heap floor rising 240 MB/h with zero records in/out for 62 min",
        job_id=JOB,
        job_name="orders-enrich",
        tm_id=TM,
        host="worker-7.example.internal",
        evidence={"growth_mb_per_h": 240.0, "floor_mb": 1890.5, "floors_mb": [1, 2]},
    )


@pytest.fixture
def slack():
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts", "#flink-pager")) as emu:
        yield emu


def config(emu: SlackEmulator, **kw) -> SlackConfig:
    base = {
        "mode": "bot",
        "api_url": emu.base_url,
        "channel": "#flink-alerts",
        "max_retries": 2,
        "routes": [{"channel": "#flink-pager", "severities": ["critical"]}],
        "runbook_url": "https://wiki.example/flink",
    }
    return SlackConfig.model_validate({**base, **kw})


def bot(emu: SlackEmulator, ledger: AlertLedger, **kw) -> SlackBotSink:
    cfg = config(emu, **kw)
    return SlackBotSink(TOKEN, ledger, lambda: cfg, lambda: "prod-eu")


def deliver(ledger: AlertLedger, sink, batch_id: int, *alerts: Alert) -> None:
    ledger.record(batch_id, list(alerts), [sink])
    dispatch.deliver(ledger, sink)


def test_one_message_per_incident_updated_on_escalation_and_resolve(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger)
    deliver(ledger, sink, 0, alert())
    deliver(ledger, sink, 1, alert(AlertStatus.ESCALATED, Severity.CRITICAL))
    deliver(ledger, sink, 2, alert(AlertStatus.RESOLVED, Severity.CRITICAL))
    [msg] = slack.messages("#flink-alerts")
    assert slack.messages("#flink-pager") == []  # updates stay with the incident's message
    assert msg["updates"] == 2
    assert "resolved" in msg["text"] and "orders-enrich" in msg["text"]
    assert [r["text"].split(":")[0] for r in msg["replies"]] == ["escalated", "resolved"]
    assert msg["metadata"]["event_payload"]["key"] == "a1:firing"
    first = msg["edited"][0]
    blocks = str(first["blocks"])
    for needle in (
        "prod-eu",
        "orders-enrich",
        JOB,
        TM,
        "worker-7",
        "240",
        "FLINK-33231",
        "https://wiki.example/flink#idle_heap_growth",
    ):
        assert needle in blocks, needle


def test_routes_pick_the_channel_and_webhook_mode_posts_every_transition(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger)
    deliver(ledger, sink, 0, alert(severity=Severity.CRITICAL, alert_id="crit"))
    assert len(slack.messages("#flink-pager")) == 1
    cfg = config(slack, mode="webhook")
    hook = SlackWebhookSink(slack.webhook_url, lambda: cfg, lambda: "prod-eu")
    deliver(ledger, hook, 1, alert(alert_id="w"), alert(AlertStatus.RESOLVED, alert_id="w"))
    texts = [m["text"] for m in slack.webhook_messages()]
    assert len(texts) == 2 and "resolved" in texts[1] and "resolved" not in texts[0]


def named(alert_id: str, job_name: str) -> Alert:
    return alert(alert_id=alert_id).model_copy(update={"job_name": job_name})


def test_a_route_matching_labels_sends_a_teams_jobs_to_its_channel(tmp_path: Path) -> None:
    # A platform with several teams: their jobs by name and cluster, the rest to the default.
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts", "#payments")) as emu:
        ledger = AlertLedger(tmp_path / "l.sqlite")
        team = {"channel": "#payments", "match": {"job_name": "pay-.*", "cluster": "prod-.*"}}
        sink = bot(emu, ledger, routes=[team])  # the sink's cluster is prod-eu
        deliver(ledger, sink, 0, named("p", "pay-etl"))
        deliver(ledger, sink, 1, named("o", "orders"))
        deliver(ledger, sink, 2, named("x", "xpay-etl"))  # whole value
        assert len(emu.messages("#payments")) == 1
        assert len(emu.messages("#flink-alerts")) == 2


def test_a_route_that_continues_takes_an_incident_to_each_channel_once(tmp_path: Path) -> None:
    # The team's channel first, then the platform's: both follow the incident to its end;
    # an incident the team's route does not take goes to the platform's channel alone.
    channels = ("#flink-alerts", "#payments", "#platform", "#never")
    with SlackEmulator(token=TOKEN, channels=channels) as emu:
        ledger = AlertLedger(tmp_path / "l.sqlite")
        routes = [
            {"channel": "#payments", "match": {"job_name": "pay-.*"}, "continue": True},
            {"channel": "#platform"},
            {"channel": "#never"},
        ]
        first = bot(emu, ledger, routes=routes, interactivity_port=0)
        sinks = [first, *further_channels(first)]
        assert [s.name for s in sinks] == ["slack", "slack:2"]
        pay = named("p", "pay-etl")
        for batch, status in enumerate(
            (AlertStatus.FIRING, AlertStatus.ESCALATED, AlertStatus.RESOLVED)
        ):
            sev = Severity.WARNING if status is AlertStatus.FIRING else Severity.CRITICAL
            ledger.record(
                batch, [pay.model_copy(update={"status": status, "severity": sev})], sinks
            )
        ledger.record(3, [named("o", "orders")], sinks)
        for sink in sinks:
            assert dispatch.deliver(ledger, sink) == 0
        [team] = emu.messages("#payments")
        platform = {keys([m])[0]: m for m in emu.messages("#platform")}
        assert sorted(platform) == ["o:firing", "p:firing"]
        for msg in (team, platform["p:firing"]):
            assert msg["updates"] == 2 and "resolved" in msg["text"]
            assert keys(msg["replies"]) == ["p:escalated:critical", "p:resolved"]
        # The buttons are on the incident's first message only, where presses are judged.
        first_versions = [str(v["blocks"]) for v in (team, platform["p:firing"])]
        assert ["Acknowledge" in b for b in first_versions] == [False, False]  # resolved now
        assert "Acknowledge" in str(team["edited"][0]["blocks"])
        assert "Acknowledge" not in str(platform["p:firing"]["edited"][0]["blocks"])
        assert "Acknowledge" in str(platform["o:firing"]["blocks"])  # its own first channel
        assert emu.messages("#flink-alerts") == [] and emu.messages("#never") == []
        assert ledger.counts()[("slack:2", "delivered")] == 3
        assert ledger.counts()[("slack:2", "unrouted")] == 1  # orders: one channel
        # On a second pass nothing is sent again, in either channel.
        for sink in (bot(emu, ledger, routes=routes), *further_channels(first)):
            assert dispatch.deliver(ledger, sink) == 0
        assert len(emu.messages("#payments")) == 1 and len(emu.messages("#platform")) == 2


def test_a_further_channel_takes_what_its_routes_add_and_follows_it_to_the_end(
    tmp_path: Path,
) -> None:
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts", "#payments", "#pager")) as emu:
        ledger = AlertLedger(tmp_path / "l.sqlite")
        routes = [
            {"channel": "#payments", "match": {"job_name": "pay-.*"}, "continue": True},
            {"channel": "#pager", "severities": ["critical"]},
        ]
        first = bot(emu, ledger, routes=routes)
        sinks = [first, *further_channels(first)]

        def record(batch: int, status: AlertStatus, severity: Severity) -> None:
            a = named("p", "pay-etl").model_copy(update={"status": status, "severity": severity})
            ledger.record(batch, [a], sinks)
            for sink in sinks:
                dispatch.deliver(ledger, sink)

        # A warning of a payments job: the team's channel only.
        record(0, AlertStatus.FIRING, Severity.WARNING)
        assert keys(emu.messages("#payments")) == ["p:firing"]
        assert emu.messages("#pager") == []
        assert ledger.counts()[("slack:2", "unrouted")] == 1
        # Its escalation to critical is what the pager's route takes: a message of its
        # own there; the resolve follows it, though the route would not take a resolve.
        record(1, AlertStatus.ESCALATED, Severity.CRITICAL)
        record(2, AlertStatus.RESOLVED, Severity.WARNING)
        [paged] = emu.messages("#pager")
        assert keys([paged]) == ["p:escalated:critical"]
        assert keys(paged["replies"]) == ["p:resolved"]
        [team] = emu.messages("#payments")
        assert keys(team["replies"]) == ["p:escalated:critical", "p:resolved"]


def test_a_copy_in_a_further_channel_cut_by_a_crash_is_found_not_posted_again(
    tmp_path: Path,
) -> None:
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts", "#payments", "#platform")) as emu:
        path = tmp_path / "l.sqlite"
        ledger = AlertLedger(path)
        routes = [{"channel": "#payments", "continue": True}, {"channel": "#platform"}]
        first = bot(emu, ledger, routes=routes)
        [second] = further_channels(first)
        [t] = ledger.record(0, [named("p", "pay-etl")], [first, second])
        ledger.mark("slack:2", t.seq, "sending")
        second.send(t)  # it arrived; the process died before the ledger heard
        restarted = AlertLedger(path)
        again = bot(emu, restarted, routes=routes)
        for sink in (again, *further_channels(again)):
            assert dispatch.deliver(restarted, sink) == 0
        assert restarted.outcomes[("slack:2", "confirmed")] == 1
        assert keys(emu.messages("#platform")) == ["p:firing"]
        assert keys(emu.messages("#payments")) == ["p:firing"]


def test_rate_limits_are_retried_by_slack_sdk_and_a_server_error_is_confirmed_first(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger)
    slack.fail_next(1, 429, retry_after=1)
    slack.fail_next(1, 500)
    ledger.record(0, [alert()], [sink])
    # A 429 is Slack saying it did nothing: slack-sdk waits and sends again. After a 500
    # the message may exist: the send stays open until Slack has been asked.
    with pytest.raises(RetryableDeliveryError, match="HTTP 500"):
        dispatch.deliver(ledger, sink)
    assert ledger.counts()[("slack", "sending")] == 1
    assert dispatch.deliver(ledger, sink) == 0
    assert [(p.rsplit("/", 1)[1], s) for p, s in slack.requests] == [
        ("chat.postMessage", 429),
        ("chat.postMessage", 500),
        ("conversations.list", 200),
        ("conversations.history", 200),
        ("chat.postMessage", 200),
    ]
    assert len(slack.messages("#flink-alerts")) == 1


def test_an_outage_longer_than_the_retries_keeps_the_backlog_in_order(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger, max_retries=0)
    slack.set_down(True)
    ledger.record(0, [alert(alert_id="a"), alert(alert_id="b")], [sink])
    ledger.record(1, [alert(AlertStatus.RESOLVED, alert_id="a")], [sink])
    with pytest.raises(RetryableDeliveryError, match="503"):
        dispatch.deliver(ledger, sink)
    slack.set_down(False)
    assert dispatch.deliver(ledger, sink) == 0
    msgs = slack.messages("#flink-alerts")
    assert [m["metadata"]["event_payload"]["key"] for m in msgs] == ["a:firing", "b:firing"]
    assert [r["metadata"]["event_payload"]["key"] for r in msgs[0]["replies"]] == ["a:resolved"]


def test_a_refused_message_is_skipped_and_the_rest_delivered(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger, channel="#no-such-channel", routes=[])
    with pytest.raises(PermanentDeliveryError, match="channel_not_found"):
        sink.send(ledger.record(0, [alert()], [])[0])


def test_after_a_crash_mid_send_the_message_is_found_by_its_metadata_not_reposted(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    path = tmp_path / "l.sqlite"
    ledger = AlertLedger(path)
    sink = bot(slack, ledger)
    deliver(ledger, sink, 0, alert(alert_id="seen"))  # the channel id is known from here on
    for status in (AlertStatus.FIRING, AlertStatus.RESOLVED):
        [t] = ledger.record(1 + (status is AlertStatus.RESOLVED), [alert(status)], [sink])
        ledger.mark("slack", t.seq, "sending")
        sink.send(t)  # it arrived; the process died before the ledger heard
        restarted = AlertLedger(path)
        assert dispatch.deliver(restarted, bot(slack, restarted)) == 0
        assert restarted.outcomes[("slack", "confirmed")] == 1
    msgs = {m["metadata"]["event_payload"]["alert_id"]: m for m in slack.messages("#flink-alerts")}
    assert sorted(msgs) == ["a1", "seen"]
    assert len(msgs["a1"]["replies"]) == 1


def test_secrets_never_reach_logs_or_errors(
    slack: SlackEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ledger = AlertLedger(tmp_path / "l.sqlite")
    cfg = config(slack, max_retries=0)
    wrong = SlackBotSink("xoxb-wrong-secret", ledger, lambda: cfg, lambda: "c")
    hook_url = slack.webhook_url.replace("XXXX", "SECRETPATH")
    hook = SlackWebhookSink(hook_url, lambda: cfg, lambda: "c")
    gone = SlackWebhookSink("http://127.0.0.1:9/services/T/B/SECRETPATH", lambda: cfg, lambda: "c")
    errors = []
    for sink in (wrong, hook, gone):
        [t] = ledger.record(len(errors), [alert(alert_id=f"x{len(errors)}")], [])
        with pytest.raises((RetryableDeliveryError, PermanentDeliveryError)) as exc:
            sink.send(t)
        errors.append(str(exc.value))
    assert "invalid_auth" in errors[0]
    for text in [caplog.text, *errors]:
        assert "xoxb-wrong-secret" not in text and "SECRETPATH" not in text


def test_slack_sink_needs_its_secret_in_the_environment(tmp_path: Path) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    cfg = SlackConfig(mode="bot", token_env="FW_TEST_TOKEN")
    with pytest.raises(ConfigError, match=r"\$FW_TEST_TOKEN \(slack.token_env\) is empty") as err:
        slack_sink(lambda: cfg, lambda: "c", ledger, env={})
    assert err.value.fields == ("slack.token_env",)
    assert slack_sink(lambda: SlackConfig(), lambda: "c", ledger, env={}) is None
    made = slack_sink(lambda: cfg, lambda: "c", ledger, env={"FW_TEST_TOKEN": "xoxb-1"})
    assert isinstance(made, SlackBotSink)


def test_render_mentions_only_open_critical_alerts() -> None:
    kw = {"cluster": "c", "runbook_url": None, "mention": "<!here>"}
    assert render(alert(severity=Severity.CRITICAL), **kw)[0].startswith("<!here>")
    assert not render(alert(), **kw)[0].startswith("<!here>")
    resolved = render(alert(AlertStatus.RESOLVED, Severity.CRITICAL), **kw)
    assert not resolved[0].startswith("<!here>")
    assert "What to do" not in str(resolved[1])


def test_related_alerts_update_one_incident_message_and_broadcast_only_a_severity_rise(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    from detectors.correlation import Correlator

    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger, mention_on_critical="<!here>")
    correlator = Correlator()
    heap = alert(alert_id="heap")
    lost = alert(alert_id="lost", detector="tm_lost", severity=Severity.CRITICAL).model_copy(
        update={"evidence": {"cause": "memory_kill"}, "job_id": None, "summary": "TM lost"}
    )
    storm = alert(alert_id="storm", detector="restart_storm").model_copy(
        update={"tm_id": None, "evidence": {"restarts": 3, "tm_ids": [TM]}}
    )
    for i, a in enumerate((heap, lost, storm)):
        ledger.record(i, [a], [sink], correlate=correlator.observe)
        dispatch.deliver(ledger, sink)
    for i, a in enumerate((heap, lost, storm)):
        done = a.model_copy(update={"status": AlertStatus.RESOLVED})
        ledger.record(10 + i, [done], [sink], correlate=correlator.observe)
        dispatch.deliver(ledger, sink)

    [msg] = slack.messages("#flink-alerts")  # the critical tm_lost did not open a pager thread
    assert slack.messages("#flink-pager") == []
    replies = msg["replies"]
    assert [r["text"].split(":")[0] for r in replies] == [
        "<!here> tm_lost firing",
        "restart_storm firing",
        "resolved",
        "resolved",
        "resolved",
    ]
    assert [r["broadcast"] for r in replies] == [True, False, False, False, False]
    assert msg["updates"] == 5
    # "edited" keeps each version before an update: [1] is the message after tm_lost joined.
    first_edit = str(msg["edited"][1]["blocks"])
    assert "killed for memory after its heap grew 240 MB/h" in first_edit
    assert "(+1 related)" in first_edit
    final = msg["text"]
    assert "resolved" in final and "(+2 related)" in final and "FLINK-33231" in final


def test_the_ledger_keeps_incidents_across_a_restart_and_migrates_old_files(
    tmp_path: Path,
) -> None:
    import sqlite3

    from detectors.correlation import Correlator

    path = tmp_path / "l.sqlite"
    old = sqlite3.connect(path)
    old.executescript(
        "CREATE TABLE transitions (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL "
        "UNIQUE, alert_id TEXT NOT NULL, status TEXT NOT NULL, batch_id INTEGER NOT NULL, "
        "silenced_by TEXT, alert TEXT NOT NULL, recorded_ms INTEGER NOT NULL);"
    )
    old.execute(
        "INSERT INTO transitions (key, alert_id, status, batch_id, alert, recorded_ms) "
        "VALUES ('old:firing', 'old', 'firing', 0, ?, 0)",
        (alert(alert_id="old").model_dump_json(),),
    )
    old.commit()
    old.close()
    ledger = AlertLedger(path)  # a ledger from before correlation opens and gains the columns
    c = Correlator()
    c.restore(ledger.history())
    [t] = ledger.record(1, [alert(alert_id="new", detector="tm_lost")], [], correlate=c.observe)
    assert t.incident is not None and t.incident.incident_id == "old"  # same TaskManager
    ledger.close()

    again = AlertLedger(path)
    restarted = Correlator()
    restarted.restore(again.history())
    assert restarted.incident_of("new") == "old"


def test_log_text_cannot_ping_the_channel_or_forge_a_link() -> None:
    import json

    from detectors.correlation import Correlator
    from sinks.slack.message import render_incident

    hostile = alert(severity=Severity.CRITICAL).model_copy(
        update={
            "job_name": "<!channel> pay now",
            "summary": "job <!channel> x: see <https://evil.example|Runbook> & co",
            "host": "<@U123>",
            "evidence": {"why": "x", "reason": "<!everyone>"},
        }
    )
    kw = {"cluster": "prod", "runbook_url": "https://wiki/flink", "mention": "<!here>"}

    def parsed(text: str, blocks: list) -> str:
        # What Slack parses as mrkdwn: the text and every block but the plain_text header.
        return text + json.dumps([b for b in blocks if b["type"] != "header"])

    text, blocks = render(hostile, **kw)
    out = parsed(text, blocks)
    for raw in ("<!channel>", "<!everyone>", "<@U123>", "<https://evil"):
        assert raw not in out
    assert "&lt;!channel&gt; pay now" in out and "&amp; co" in out
    # What the operator configured stays live: the mention and the runbook link.
    assert text.startswith("<!here> ") and "<https://wiki/flink#idle_heap_growth|Runbook>" in out
    # An incident of several alerts: its headline and every member's line likewise.
    correlator = Correlator()
    correlator.observe(hostile)
    lost = alert(alert_id="lost", detector="tm_lost", severity=Severity.CRITICAL).model_copy(
        update={"summary": "<!subteam^S1> TM lost", "evidence": {"cause": "memory_kill"}}
    )
    view = correlator.observe(lost)
    assert len(view.members) == 2
    text, blocks = render_incident(view, lost, **kw)
    out = parsed(text, blocks)
    assert "<!subteam" not in out and "<!channel>" not in out and "&lt;!subteam^S1&gt;" in out


def test_a_route_to_a_missing_channel_falls_back_to_the_default_channel(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger, routes=[{"channel": "#flink-pagr", "severities": ["critical"]}])
    deliver(ledger, sink, 1, alert(severity=Severity.CRITICAL))
    (msg,) = slack.messages("#flink-alerts")
    assert msg["text"].startswith(
        "(route #flink-pagr failed: chat_postMessage: HTTP 200 channel_not_found)"
    )
    # The incident lives on there: its resolve updates that message.
    deliver(ledger, sink, 2, alert(AlertStatus.RESOLVED, Severity.CRITICAL))
    assert [r["text"].split(":")[0] for r in slack.messages("#flink-alerts")[0]["replies"]] == [
        "resolved"
    ]


def keys(messages: list[dict]) -> list[str]:
    return [m["metadata"]["event_payload"]["key"] for m in messages if m.get("metadata")]


LOST_ANSWERS: dict[str, Callable[[SlackEmulator], None]] = {
    "500": lambda emu: emu.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True),
    "timeout": lambda emu: emu.stall_next(1, 3.0, path_prefix="/api/chat.postMessage"),
    "cut": lambda emu: emu.cut_next(1, path_prefix="/api/chat.postMessage"),
}


@pytest.mark.parametrize("lost", LOST_ANSWERS.values(), ids=LOST_ANSWERS.keys())
def test_a_post_slack_stored_but_did_not_answer_is_confirmed_not_posted_again(
    slack: SlackEmulator, tmp_path: Path, lost: Callable[[SlackEmulator], None]
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger, timeout_s=1)
    lost(slack)
    ledger.record(0, [alert()], [sink])
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, sink)
    assert ledger.counts()[("slack", "sending")] == 1  # outcome unknown: not back to pending
    assert dispatch.deliver(ledger, sink) == 0
    assert keys(slack.messages("#flink-alerts")) == ["a1:firing"]
    assert ledger.outcomes[("slack", "confirmed")] == 1
    # The confirmed message is the incident's: its resolve goes into that thread.
    deliver(ledger, sink, 1, alert(AlertStatus.RESOLVED))
    [msg] = slack.messages("#flink-alerts")
    assert keys(msg["replies"]) == ["a1:resolved"]


def test_a_post_that_timed_out_before_slack_stored_it_is_sent_after_asking(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger, timeout_s=1)
    slack.stall_next(1, 3.0, path_prefix="/api/chat.postMessage", after_store=False)
    ledger.record(0, [alert()], [sink])
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, sink)
    assert dispatch.deliver(ledger, sink) == 0
    assert keys(slack.messages("#flink-alerts")) == ["a1:firing"]
    assert ledger.outcomes[("slack", "delivered")] == 1


def test_a_thread_reply_slack_stored_but_answered_500_is_not_replied_twice(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger)
    deliver(ledger, sink, 0, alert())
    slack.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True)
    ledger.record(1, [alert(AlertStatus.RESOLVED)], [sink])
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, sink)
    assert dispatch.deliver(ledger, sink) == 0
    [msg] = slack.messages("#flink-alerts")
    assert keys(msg["replies"]) == ["a1:resolved"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_send_that_could_not_connect_is_retried_and_sent_again_without_asking(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    ledger = AlertLedger(tmp_path / "l.sqlite")
    cfg = SlackConfig(
        mode="bot", api_url=f"http://127.0.0.1:{port}/api/", channel="#flink-alerts", max_retries=1
    )
    sink = SlackBotSink(TOKEN, ledger, lambda: cfg, lambda: "prod-eu")
    ledger.record(0, [alert()], [sink])
    with pytest.raises(RetryableDeliveryError, match="Connection refused"):
        dispatch.deliver(ledger, sink)
    # slack-sdk tried twice (max_retries=1): a request that never left is safe to repeat.
    refused = [r for r in caplog.records if "Connection refused" in r.getMessage()]
    assert len(refused) == 2
    assert ledger.counts()[("slack", "pending")] == 1  # definitely not sent
    with SlackEmulator(token=TOKEN, port=port, channels=("#flink-alerts",)) as emu:
        assert dispatch.deliver(ledger, sink) == 0
        assert keys(emu.messages("#flink-alerts")) == ["a1:firing"]
        assert [p for p, _ in emu.requests] == ["/api/chat.postMessage"]  # nothing to ask


@pytest.fixture
def busy():
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts", "#flink-pager"), max_page=2) as emu:
        yield emu


def test_confirming_in_a_busy_channel_follows_the_cursor(
    busy: SlackEmulator, tmp_path: Path
) -> None:
    from slack_sdk import WebClient

    human = WebClient(token=TOKEN, base_url=busy.base_url, retry_handlers=[])
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(busy, ledger, timeout_s=1)
    busy.stall_next(1, 3.0, path_prefix="/api/chat.postMessage")
    ledger.record(0, [alert()], [sink])
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, sink)
    for i in range(5):  # the channel moves on: flinkwatch's message is on page 3 of 3
        human.chat_postMessage(channel="#flink-alerts", text=f"chatter {i}")
    assert dispatch.deliver(ledger, sink) == 0
    assert keys(busy.messages("#flink-alerts")) == ["a1:firing"]
    reads = [p for p, _ in busy.requests if p.endswith("conversations.history")]
    assert len(reads) == 3

    # The same in a busy thread, read oldest first: the reply comes after the humans'
    # and is on page 3 of conversations.replies.
    [parent] = [m for m in busy.messages("#flink-alerts") if m.get("metadata")]
    for i in range(3):
        human.chat_postMessage(channel="#flink-alerts", text=f"on it {i}", thread_ts=parent["ts"])
    busy.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True)
    ledger.record(1, [alert(AlertStatus.RESOLVED)], [sink])
    with pytest.raises(RetryableDeliveryError):
        dispatch.deliver(ledger, sink)
    assert dispatch.deliver(ledger, sink) == 0
    [msg] = [m for m in busy.messages("#flink-alerts") if m["ts"] == parent["ts"]]
    assert keys(msg["replies"]) == ["a1:resolved"]
    assert len([p for p, _ in busy.requests if p.endswith("conversations.replies")]) == 3


def test_a_webhook_cannot_be_asked_so_an_unknown_outcome_is_sent_again_and_counted(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    cfg = config(slack, mode="webhook")
    hook = SlackWebhookSink(slack.webhook_url, lambda: cfg, lambda: "prod-eu")
    slack.fail_next(1, 500, path_prefix="/services", after_store=True)
    ledger.record(0, [alert()], [hook])
    with pytest.raises(RetryableDeliveryError, match="HTTP 500"):
        dispatch.deliver(ledger, hook)
    assert dispatch.deliver(ledger, hook) == 0
    assert len(slack.webhook_messages()) == 2  # the documented cost of webhook mode
    assert ledger.outcomes[("slack", "resent_unconfirmed")] == 1


def test_the_route_check_names_each_route_whose_channel_cannot_take_alerts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from sinks.slack import RouteProblem

    caplog.set_level(logging.INFO, logger="sinks.slack")
    with SlackEmulator(
        token=TOKEN, channels=("#flink-alerts",), archived=("#old-pager",), without_bot=("#ops",)
    ) as emu:
        routes = [
            {"channel": "#flink-pagr", "severities": ["critical"]},  # the typo of issue #14
            {"channel": "#old-pager", "detectors": ["tm_lost"]},
            {"channel": "#ops", "detectors": ["restart_storm"]},
            {"channel": "C0000099", "detectors": ["idle_heap_growth"]},  # an id that is gone
            {"channel": "#flink-alerts", "detectors": ["checkpoint_failures"]},
        ]
        sink = bot(emu, AlertLedger(tmp_path / "l.sqlite"), routes=routes)
        problems = sink.check_routes()
        asked = {p.rsplit("/", 1)[1] for p, _ in emu.requests}
    assert [(p.route, p.channel) for p in problems] == [
        ("slack.routes[0]", "#flink-pagr"),
        ("slack.routes[1]", "#old-pager"),
        ("slack.routes[2]", "#ops"),
        ("slack.routes[3]", "C0000099"),
    ]
    assert all(isinstance(p, RouteProblem) for p in problems)
    assert "not found" in problems[0].problem and "not found" in problems[3].problem
    assert "archived" in problems[1].problem
    assert "not a member" in problems[2].problem
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4
    assert warnings[0].startswith("slack: route slack.routes[0] (#flink-pagr): channel not found")
    assert all("its alerts go to #flink-alerts instead" in w for w in warnings)
    assert asked == {"auth.test", "conversations.list", "conversations.info"}


def test_a_reload_that_adds_continue_routes_says_a_restart_adds_their_channels(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts", "#a", "#b")) as emu:
        cfg = {"now": config(emu, routes=[])}
        sink = SlackBotSink(TOKEN, AlertLedger(tmp_path / "l.sqlite"), lambda: cfg["now"], str)
        assert further_channels(sink) == []
        cfg["now"] = config(emu, routes=[{"channel": "#a", "continue": True}, {"channel": "#b"}])
        caplog.set_level(logging.WARNING, logger="sinks.slack")
        assert sink.check_routes() == []
        assert further_channels(sink) == []  # made at the start only
    assert "up to 2 channels, but flinkwatch started with 1: restart" in caplog.text


def test_a_default_channel_that_cannot_take_alerts_is_a_warning_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with SlackEmulator(token=TOKEN, channels=("#flink-pager",), archived=("#flink-alerts",)) as emu:
        sink = bot(emu, AlertLedger(tmp_path / "l.sqlite"))
        [problem] = sink.check_routes()
    assert (problem.route, problem.channel) == ("slack.channel", "#flink-alerts")
    assert "alerts routed nowhere else cannot be delivered" in caplog.text


def test_the_route_check_only_notes_what_the_token_may_not_ask(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sinks.slack")
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts",), scopes=("chat:write",)) as emu:
        routes = [{"channel": "#flink-pagr"}, {"channel": "C0000001"}]
        sink = bot(emu, AlertLedger(tmp_path / "l.sqlite"), routes=routes)
        assert sink.check_routes() == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("missing_scope" in m and "channels:read" in m for m in infos)


def test_the_route_check_waits_for_a_slack_that_is_down(
    slack: SlackEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = bot(slack, AlertLedger(tmp_path / "l.sqlite"), max_retries=0)
    slack.set_down(True)
    assert sink.check_routes() == []
    assert "slack: cannot check the routes now" in caplog.text


@pytest.mark.parametrize("channel", ["#flink-alerts", "C0000001"], ids=["by-name", "by-id"])
def test_a_send_slack_will_not_let_us_look_for_waits_and_is_never_posted_twice(
    tmp_path: Path, channel: str
) -> None:
    # Without channels:read (a channel by name, not posted to yet) or channels:history
    # flinkwatch cannot tell whether a message of unknown outcome arrived: it waits, in
    # order, rather than posting it a second time, and goes on once the scope is granted.
    with SlackEmulator(token=TOKEN, channels=("#flink-alerts",), scopes=("chat:write",)) as emu:
        ledger = AlertLedger(tmp_path / "l.sqlite")
        sink = bot(emu, ledger, channel=channel, routes=[])
        emu.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True)
        ledger.record(0, [alert(alert_id="a"), alert(alert_id="b")], [sink])
        for _ in range(3):
            with pytest.raises(RetryableDeliveryError):
                dispatch.deliver(ledger, sink)
        assert keys(emu.messages("#flink-alerts")) == ["a:firing"]  # not sent again
        assert ledger.counts()[("slack", "sending")] == 1
        assert ledger.backlog() == {"slack": 2}  # "b" waits behind it
        [waiting] = ledger.deliveries(["sending"])
        assert waiting.error is not None and "missing_scope" in waiting.error
        emu.set_scopes(None)  # the workspace admin adds the scopes
        assert dispatch.deliver(ledger, sink) == 0
        assert keys(emu.messages("#flink-alerts")) == ["a:firing", "b:firing"]
        assert ledger.outcomes[("slack", "confirmed")] == 1
        assert ledger.outcomes[("slack", "resent_unconfirmed")] == 0


def test_a_search_past_the_page_limit_goes_on_at_the_next_try_instead_of_posting_again(
    busy: SlackEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slack_sdk import WebClient

    import sinks.slack.transport

    monkeypatch.setattr(
        sinks.slack.transport, "MAX_PAGES", 2
    )  # pages of 2 (busy): 4 messages a try
    human = WebClient(token=TOKEN, base_url=busy.base_url, retry_handlers=[])
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(busy, ledger)
    deliver(ledger, sink, 0, alert(alert_id="seen"))  # the channel's id is known from here on
    busy.fail_next(1, 500, path_prefix="/api/chat.postMessage", after_store=True)
    ledger.record(1, [alert()], [sink])
    with pytest.raises(RetryableDeliveryError, match="HTTP 500"):
        dispatch.deliver(ledger, sink)
    for i in range(6):  # the channel moves on: flinkwatch's message is on page 4, newest first
        human.chat_postMessage(channel="#flink-alerts", text=f"chatter {i}")
    with pytest.raises(RetryableDeliveryError, match="next try"):
        dispatch.deliver(ledger, sink)
    assert keys(busy.messages("#flink-alerts")) == ["seen:firing", "a1:firing"]  # not again
    assert dispatch.deliver(ledger, sink) == 0
    assert keys(busy.messages("#flink-alerts")) == ["seen:firing", "a1:firing"]
    assert ledger.outcomes[("slack", "confirmed")] == 1
    # The second try went on from the first one's cursor: 2 pages, then 2 more.
    reads = [p for p, _ in busy.requests if p.endswith("conversations.history")]
    assert len(reads) == 4


# --- hostile text in every message kind ---------------------------------------------------

#: Names a job can be given; each must reach Slack as the text it is, in every message kind.
HOSTILE = [
    "<!channel>",
    "<!here>",
    "<@U123>",
    "<http://x|y>",
    "&",
    "*bold*",
    "<!subteam^S9|@oncall>",
    "&lt;!channel&gt;",  # already looks escaped: must still show literally
]
MENTION = "<!subteam^SONCALL>"
RUNBOOK = re.compile(r"<https://wiki\.example/flink#\w+\|Runbook>")


def _texts(blocks: object, kind: str) -> list[str]:
    """Every text object of type ``kind`` (mrkdwn or plain_text) in Block Kit blocks."""
    if isinstance(blocks, list):
        return [t for b in blocks for t in _texts(b, kind)]
    if not isinstance(blocks, dict):
        return []
    own = [str(blocks["text"])] if blocks.get("type") == kind and "text" in blocks else []
    return own + [t for v in blocks.values() for t in _texts(v, kind)]


def _versions(messages: list[dict]) -> list[dict]:
    """Every version Slack was given: each message as posted and as each update left it."""
    out = []
    for m in messages:
        out += [m, *m["edited"]]
        out += _versions(m.get("replies", []))
    return out


def _hostile_alert(name: str, **kw: object) -> Alert:
    base = alert(detector="checkpoint_failures").model_copy(
        update={
            "entity": f"job:{JOB}",
            "job_name": f"{name} pay-etl",
            "tm_id": None,
            "host": name,
            "summary": f"3 checkpoints of job {name} pay-etl expired within 30 min",
            "evidence": {"reason": name, name: 1},
        }
    )
    return base.model_copy(update=kw)


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_job_name_reaches_slack_as_text_in_every_message_kind(
    slack: SlackEmulator, tmp_path: Path, name: str
) -> None:
    # Seen live: a job named `<!channel> pay-etl` got an escaped top-level message, then
    # the thread reply `late_barrier_acks firing: job <!channel> pay-etl: ...`, broadcast.
    from detectors.correlation import Correlator

    ledger = AlertLedger(tmp_path / "l.sqlite")
    routes = [{"channel": "#no-such-channel", "severities": ["critical"]}]
    sink = bot(slack, ledger, mention_on_critical=MENTION, routes=routes)
    correlator = Correlator()
    failures = _hostile_alert(name, alert_id="cf")
    late = _hostile_alert(
        name,
        alert_id="late",
        detector="late_barrier_acks",
        severity=Severity.CRITICAL,
        summary=f"job {name} pay-etl: late checkpoint acks in 3 checkpoints within 60 min",
    )
    other = "cc" * 16  # another job: a new critical incident, its route to a missing channel
    transitions = [
        failures,  # posts the incident's message
        late,  # joins it: update, thread reply broadcast (severity rose), with the mention
        failures.model_copy(
            update={"status": AlertStatus.ESCALATED, "severity": Severity.CRITICAL}
        ),  # update, reply broadcast
        late.model_copy(update={"status": AlertStatus.RESOLVED}),  # update, reply
        failures.model_copy(update={"status": AlertStatus.RESOLVED}),  # update, reply
        _hostile_alert(
            name, alert_id="routed", severity=Severity.CRITICAL, job_id=other, entity=f"job:{other}"
        ),  # a message of its own in the default channel, saying why
        _hostile_alert(
            name, alert_id="orphan", status=AlertStatus.RESOLVED, job_id="dd" * 16
        ),  # a resolve whose firing never reached Slack: a message of its own
    ]
    for i, a in enumerate(transitions):
        ledger.record(i, [a], [sink], correlate=correlator.observe)
        assert dispatch.deliver(ledger, sink) == 0
    cfg = config(slack, mode="webhook", mention_on_critical=MENTION)
    hook = SlackWebhookSink(slack.webhook_url, lambda: cfg, lambda: name)
    for i, a in enumerate(transitions[:3]):
        ledger.record(100 + i, [a.model_copy(update={"alert_id": f"w{i}"})], [hook])
        assert dispatch.deliver(ledger, hook) == 0

    posted = slack.messages()
    versions = _versions(posted)
    replies = [r for m in posted for r in m["replies"]]
    assert len(posted) == 6 and len(replies) == 4 and sum(r["broadcast"] for r in replies) == 2
    assert sum(len(m["edited"]) for m in posted) == 4
    assert any(v["text"].startswith("(route #no-such-channel failed") for v in versions)
    escaped = esc(f"{name} pay-etl")
    for v in versions:
        parsed = [v["text"], *_texts(v["blocks"], "mrkdwn")]
        for text in parsed:
            # What the operator configured stays live; nothing else may be markup.
            bare = RUNBOOK.sub("", text.replace(MENTION, ""))
            assert "<" not in bare and ">" not in bare, text
            assert re.fullmatch(r"([^&]|&(amp|lt|gt);)*", bare, re.S), text
        # Every text names the job as the header does: the one name, escaped.
        assert escaped in v["text"], v["text"]
        # plain_text is shown as it is: the header has the name unescaped.
        for header in _texts(v["blocks"], "plain_text"):
            assert f"{name} pay-etl" in header and "&amp;" not in header.replace(name, "")
