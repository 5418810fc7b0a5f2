"""`flinkwatch replay` and `run` as a user runs them, and the outputs `run` builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.cli import main

DATA = Path(__file__).resolve().parent.parent / "data"
SCENARIOS = DATA / "checkpoint_failures"  # also replayed by test_scenarios


@pytest.mark.spark
def test_replay_gives_exactly_the_expected_alerts_per_scenario(spark, tmp_path, capsys) -> None:
    expected = json.loads((SCENARIOS / "expected.json").read_text())
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(
        '{"name": "flink_jobmanager_job_lastCheckpointDuration", "value": 2214, '
        '"timestamp": "2024-06-03T09:50:02.479Z", "labels": {"job_id": "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"}}\n'
        '{"name": "flink_jobmanager_job_lastCheckpointDuration", "value": "slow", "timestamp": 1717408202479}\n'
    )
    out = tmp_path / "alerts.jsonl"
    rc = main(
        [
            "replay",
            "--logs",
            *(str(SCENARIOS / name) for name in expected),
            "--metrics",
            str(metrics),
            "--output",
            str(out),
            "--deadletters",
            str(tmp_path / "dead"),
        ]
    )
    assert rc == 0
    got = [json.loads(line) for line in out.read_text().splitlines()]
    # On the expiry streak late_barrier_acks and checkpoint_creep (overdue checkpoints)
    # rightly fire too; this test pins checkpoint_failures, test_scenarios the others.
    got = [a for a in got if a["detector"] == "checkpoint_failures"]
    want = [a for alerts in expected.values() for a in alerts]
    assert [
        {
            "status": a["status"],
            "job_id": a["job_id"],
            "event_time": a["event_time"],
            "expired_checkpoints": a["evidence"]["expired_checkpoints"],
        }
        for a in got
    ] == want
    for a in got:
        assert a["detector"] == "checkpoint_failures"
        assert a["severity"] == "warning"
        assert len(a["alert_id"]) == 16
    summary = capsys.readouterr().out
    assert "checkpoint_failures" in summary and "dead letters:   bad_type=1" in summary
    letters = [
        json.loads(x)
        for f in (tmp_path / "dead").glob("*.jsonl")
        for x in f.read_text().splitlines()
    ]
    assert [(d["error"], d["offset"]) for d in letters] == [("bad_type", 1)]


@pytest.mark.spark
def test_replay_ends_with_the_records_it_read_and_the_event_time_reached(
    spark, tmp_path, caplog
) -> None:
    import logging

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(
        '{"name": "flink_jobmanager_job_lastCheckpointDuration", "value": 2214, '
        '"timestamp": "2024-06-03T09:50:02.479Z", "labels": {"job_id": "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"}}\n'
        '{"name": "flink_jobmanager_job_lastCheckpointDuration", "value": "slow", "timestamp": 1717408202479}\n'
        '{"name": "flink_jobmanager_job_lastCheckpointDuration", "value": 2300, '
        '"timestamp": "2024-06-03T09:40:00.000Z", "labels": {"job_id": "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"}}\n'
    )
    caplog.set_level(logging.INFO, logger="flinkwatch")
    argv = ["replay", "--metrics", str(metrics), "--output", str(tmp_path / "alerts.jsonl")]
    assert main(argv) == 0
    done = [r.getMessage() for r in caplog.records if r.getMessage().startswith("replay: done")]
    assert len(done) == 1
    # Two events and a dead letter; the newest time is the first line's.
    assert "3 records read" in done[0]
    assert "event time 2024-06-03T09:50:02Z," in done[0]


def test_run_refuses_to_start_when_the_metrics_password_is_missing(
    tmp_path, monkeypatch, caplog, keep_signal_handlers
) -> None:
    monkeypatch.delenv("FLINKWATCH_METRICS_PASSWORD", raising=False)
    cfg = tmp_path / "basic_auth_without_password.yaml"
    # Port 1: should it get that far, the job meets no broker (nobody else's either).
    cfg.write_text(
        "metrics: {basic_auth_username: prometheus}\nkafka: {bootstrap_servers: '127.0.0.1:1'}\n"
    )
    state = tmp_path / "state"
    assert main(["run", "--config", str(cfg), "--state-dir", str(state)]) == 2
    assert "metrics.basic_auth_username is set but $FLINKWATCH_METRICS_PASSWORD" in caplog.text
    # Refused before anything started: no ledger opened, no Spark session.
    assert not state.exists()


@pytest.mark.parametrize(
    ("section", "field"),
    [
        (
            "alertmanager: {urls: ['http://127.0.0.1:1'], bearer_token: '${FW_TEST_SECRET}'}",
            "alertmanager.bearer_token",
        ),
        (
            "webhooks: [{name: oncall, url: 'http://127.0.0.1:1/x', secret: '${FW_TEST_SECRET}'}]",
            "webhooks.0.secret",
        ),
    ],
    ids=["alertmanager_token_unset", "webhook_secret_unset"],
)
def test_run_refuses_to_start_when_a_sinks_secret_is_missing(
    tmp_path, monkeypatch, caplog, keep_signal_handlers, section, field
) -> None:
    monkeypatch.delenv("FW_TEST_SECRET", raising=False)
    cfg = tmp_path / "secret_unset.yaml"
    cfg.write_text(
        f"{section}\nkafka: {{bootstrap_servers: '127.0.0.1:1'}}\nmetrics: {{enabled: false}}\n"
    )
    assert main(["run", "--config", str(cfg), "--state-dir", str(tmp_path / "state")]) == 2
    assert f"{field}: environment variable FW_TEST_SECRET" in caplog.text


def test_alertmanager_is_drained_by_the_dispatcher_with_its_own_back_off(tmp_path) -> None:
    from conf import AppConfig
    from sinks import AlertLedger
    from sinks.alertmanager import alertmanager_sink
    from streaming.runtime import build_outputs as _outputs

    cfg = AppConfig.model_validate(
        {
            "output": {"state_dir": str(tmp_path / "state")},
            "alertmanager": {"urls": ["http://127.0.0.1:1"], "retry_backoff_s": 1},
        }
    )
    ledger = AlertLedger(tmp_path / "l.sqlite")
    am = alertmanager_sink(lambda: cfg.alertmanager, lambda: cfg.cluster, ledger)
    out = _outputs(cfg, ledger, None, am)
    try:
        assert [s.name for s in out.dispatcher.sinks] == ["alertmanager"]
        assert out.dispatcher._backoffs["alertmanager"] == (1.0, 60.0)
        assert [s.name for s in out.delivery_sinks()] == ["file", "alertmanager"]
    finally:
        out.dispatcher.stop()
    # Nothing configured: no dispatcher thread at all.
    assert _outputs(AppConfig(), ledger, None, None).dispatcher is None


def test_each_webhook_is_drained_by_the_dispatcher_with_its_own_back_off(tmp_path) -> None:
    from conf import AppConfig
    from sinks import AlertLedger
    from sinks.webhook import webhook_sinks
    from streaming.runtime import build_outputs as _outputs

    hook = {"url": "http://127.0.0.1:1/x", "secret": "${S}"}
    cfg = AppConfig.model_validate(
        {
            "output": {"state_dir": str(tmp_path / "state")},
            "webhooks": [
                {"name": "oncall", **hook, "retry_backoff_s": 1},
                {"name": "chat", **hook, "max_backoff_s": 10},
            ],
        }
    )
    ledger = AlertLedger(tmp_path / "l.sqlite")
    hooks = webhook_sinks(cfg.webhooks, lambda: cfg.cluster, env={"S": "k"})
    out = _outputs(cfg, ledger, None, None, hooks)
    try:
        assert [s.name for s in out.dispatcher.sinks] == ["webhook:oncall", "webhook:chat"]
        assert out.dispatcher._backoffs["webhook:oncall"] == (1.0, 60.0)
        assert out.dispatcher._backoffs["webhook:chat"] == (5.0, 10.0)
        assert [s.name for s in out.delivery_sinks()] == ["file", "webhook:oncall", "webhook:chat"]
    finally:
        out.dispatcher.stop()


def test_slack_routes_are_checked_at_start_and_after_a_reload_that_changes_them(
    tmp_path, caplog
) -> None:
    from conf import AppConfig
    from lab.slack import SlackEmulator
    from sinks import AlertLedger
    from sinks.slack import SlackBotSink
    from streaming.runtime import route_checks

    with SlackEmulator(channels=("#flink-alerts",)) as emu:
        slack = {"mode": "bot", "api_url": emu.base_url, "channel": "#flink-alerts"}
        start = AppConfig.model_validate({"slack": slack})
        current = {"cfg": start}
        sink = SlackBotSink(
            emu.token, AlertLedger(tmp_path / "l.sqlite"), lambda: current["cfg"].slack, lambda: "c"
        )
        check = route_checks(sink, run=lambda work: work())
        check(start)
        check(start)  # every pass of the run loop: no change, no new check
        fixed = start.model_copy(update={"cluster": "renamed"})
        check(fixed)  # a reload that leaves channel and routes alone
        assert [p for p, _ in emu.requests].count("/api/auth.test") == 1
        typo = {**slack, "routes": [{"channel": "#flink-pagr"}]}
        current["cfg"] = AppConfig.model_validate({"slack": typo})
        check(current["cfg"])
        assert [p for p, _ in emu.requests].count("/api/auth.test") == 2
    assert "slack: route slack.routes[0] (#flink-pagr): channel not found" in caplog.text
    # Webhook mode: nothing to check, nothing started.
    started: list[object] = []
    route_checks(object(), run=started.append)(start)
    assert started == []
