"""The channels a route names: the check at start and reload of whether each can take alerts."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from lab.slack import SlackEmulator
from sinks import AlertLedger
from sinks.slack import SlackBotSink, further_channels
from tests.sinks.slack.helpers import TOKEN, bot, config


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
