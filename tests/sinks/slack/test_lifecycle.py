"""The bot sink's incident message: posted once, updated, routed to its channels, kept across restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from detectors import AlertStatus, Severity
from lab.slack import SlackEmulator
from sinks import AlertLedger, PermanentDeliveryError, RetryableDeliveryError, dispatch
from sinks.slack import further_channels
from tests.sinks.slack.helpers import JOB, TM, TOKEN, alert, bot, deliver, keys, named


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
