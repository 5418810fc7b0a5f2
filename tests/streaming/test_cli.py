"""The CLI as a user runs it: replay and parse over files, config check."""

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


@pytest.mark.spark
def test_parse_prints_one_object_per_record_with_kind_or_reason(spark, tmp_path, capsys) -> None:
    log = tmp_path / "jm.log"
    log.write_text(
        (SCENARIOS / "single_expiry_1_9.log").read_text().splitlines()[0]
        + "\n"
        + '{"level":"INFO", broken\n'
        + "2024-06-03 10:10:00,003 WARN  org.apache.flink.runtime.checkpoint.CheckpointFailureManager [] - "
        "Failed to trigger or complete checkpoint 1843 for job 3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3. "
        "(0 consecutive failed attempts so far)\n"
        "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing.\n"
        "\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator$CheckpointCanceller.run(CheckpointCoordinator.java:2216)\n"
    )
    assert main(["parse", str(log)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r.get("kind"), r.get("error")) for r in rows] == [
        ("checkpoint_triggered", None),
        (None, "invalid_json"),
        ("checkpoint_failed", None),
    ]
    assert rows[0]["topic"] == "jm.log" and rows[0]["event_time"] == "2019-11-14T16:00:00.007Z"
    assert rows[2]["checkpoint_id"] == 1843
    assert rows[2]["reason"] == "Checkpoint expired before completing."


def test_a_file_record_without_its_own_time_takes_the_one_before_it(
    spark, tmp_path, capsys
) -> None:
    # A shipper without multiline handling wrote the JVM's lines as records of their own,
    # in envelopes that carry no time (kcat dump of the logs topic, one record per line).
    # On Kafka they take the record's timestamp (log_cases.yaml: oom_heap_lone_line); in a
    # file, the time of the record before them, and their kind is read as on Kafka.
    log = tmp_path / "tm.jsonl.log"
    log.write_text(
        '{"log":"2024-02-02 07:31:11,950 INFO  org.apache.flink.runtime.taskexecutor.TaskExecutor'
        ' [] - Un-registering task and sending final execution state FAILED.\\n",'
        '"kubernetes":{"pod_name":"orders-taskmanager-1-2"}}\n'
        '{"log":"java.lang.OutOfMemoryError: Java heap space\\n",'
        '"kubernetes":{"pod_name":"orders-taskmanager-1-2"}}\n'
        '{"log":"org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException: '
        "Could not register at the ResourceManager within the specified maximum registration "
        'duration 300000 ms. This indicates a problem with this instance. Terminating now.\\n",'
        '"kubernetes":{"pod_name":"orders-taskmanager-1-2"}}\n'
    )
    assert main(["parse", str(log)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r.get("kind"), r.get("error")) for r in rows] == [
        ("unparsed", None),
        ("jvm_oom", None),
        ("registration_timeout", None),
    ]
    assert {r["event_time"] for r in rows} == {"2024-02-02T07:31:11.950Z"}
    assert rows[1]["reason"] == "Java heap space"
    assert rows[1]["tm_id"] == "orders-taskmanager-1-2"


def test_config_check_accepts_the_default_and_names_the_bad_field(tmp_path, capsys) -> None:
    assert main(["config", "check", "conf/flinkwatch.yaml"]) == 0
    assert "OK" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("detectors:\n  checkpoint_failures:\n    min_expired: -1\n")
    assert main(["config", "check", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "detectors.checkpoint_failures.min_expired" in err


def test_config_check_in_json_says_ok_and_on_error_the_field_and_message(tmp_path, capsys) -> None:
    assert main(["config", "check", "-o", "json", "conf/flinkwatch.yaml"]) == 0
    good = json.loads(capsys.readouterr().out)
    assert good["ok"] is True and good["file"] == "conf/flinkwatch.yaml"
    assert "checkpoint_failures" in good["detectors_enabled"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("detectors:\n  checkpoint_failures:\n    min_expired: -1\n")
    assert main(["config", "check", "--output", "json", str(bad)]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False and out["file"] == str(bad)
    assert out["fields"] == ["detectors.checkpoint_failures.min_expired"]
    assert "greater than" in out["message"]


def test_every_option_of_every_command_says_what_it_does() -> None:
    import argparse

    from streaming.cli import build_parser

    def walk(parser: argparse.ArgumentParser, path: str) -> list[str]:
        missing = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    missing += walk(sub, f"{path} {name}")
            elif not isinstance(action, argparse._HelpAction) and not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        return missing

    assert walk(build_parser(), "flinkwatch") == []
    from lab.cli import build_parser as lab_parser

    assert walk(lab_parser(), "python -m lab") == []


def test_the_product_cli_does_not_carry_the_demo_tooling() -> None:
    # `flinkwatch` is the product; the simulator and the local Slack are `python -m lab`.
    import argparse
    import subprocess
    import sys

    from streaming.cli import build_parser

    code = (
        "import sys, streaming.cli, streaming.app, sinks, conf; "
        "sys.exit(any(m == 'lab' or m.startswith('lab.') for m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert not {"simulate", "demo", "slack-emulator"} & set(sub.choices)


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["config", "check", "conf/flinkwatch.yaml"], ["deliveries", "--help"]],
    ids=["help", "config-check", "deliveries-help"],
)
def test_commands_that_need_no_spark_do_not_import_it(argv: list[str]) -> None:
    # The command table imports a command's module only when that command runs.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from streaming.cli import main\n"
        "try:\n"
        f"    rc = main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    rc = exc.code\n"
        "spark = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))\n"
        "sys.exit(3 if spark else rc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_every_command_in_the_table_has_its_module() -> None:
    import importlib

    from streaming.cli import COMMANDS, build_parser

    for name, command in COMMANDS.items():
        assert callable(importlib.import_module(command.module).add_arguments), name
    # One command's options alone: the others are listed, with no options of their own.
    sub = next(a for a in build_parser(only="config")._actions if a.dest == "command")
    assert sub.choices["config"]._subparsers is not None
    assert sub.choices["run"]._actions[1:] == []


@pytest.fixture
def keep_signal_handlers():
    """`run` installs its own SIGTERM/SIGINT/SIGHUP handlers; put pytest's back."""
    import signal

    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


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


def _ledger_with_failures(tmp_path):
    from detectors import Alert, AlertStatus, Severity
    from sinks import AlertLedger, DeliverySink, PermanentDeliveryError
    from sinks.dispatch import deliver

    class Refusing(DeliverySink):
        name = "slack"
        notifies = True

        def send(self, t):
            if t.alert.alert_id != "ok":
                raise PermanentDeliveryError("chat_postMessage: HTTP 200 channel_not_found")

    def alert(alert_id: str) -> Alert:
        return Alert(
            alert_id=alert_id,
            detector="checkpoint_failures",
            entity="job:7f",
            status=AlertStatus.FIRING,
            severity=Severity.WARNING,
            event_time_ms=1_700_000_000_000,
            summary=f"3 checkpoints of {alert_id} expired",
        )

    state = tmp_path / "state"
    conf = tmp_path / "flinkwatch.yaml"
    conf.write_text(f"output:\n  state_dir: {state}\n")
    ledger = AlertLedger(state / "ledger.sqlite")
    sink = Refusing()
    ledger.record(0, [alert("lost1"), alert("ok"), alert("lost2")], [sink])
    deliver(ledger, sink)
    return conf, ledger


def test_deliveries_list_shows_the_ledger_by_state(tmp_path, capsys) -> None:
    conf, _ = _ledger_with_failures(tmp_path)
    assert main(["deliveries", "list", "--config", str(conf)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["seq", "sink", "state", "attempts", "transition", "summary"]
    assert "lost1:firing" in out and "lost2:firing" in out and "ok:firing" not in out
    assert out.count("error: chat_postMessage: HTTP 200 channel_not_found") == 2
    assert "3 checkpoints of lost1 expired" in out
    assert main(["deliveries", "list", "--state", "all", "--config", str(conf)]) == 0
    assert "ok:firing" in capsys.readouterr().out
    assert main(["deliveries", "list", "--state", "pending", "--config", str(conf)]) == 0
    assert "no deliveries" in capsys.readouterr().err


def test_deliveries_list_in_json_is_an_array_of_one_object_per_delivery(tmp_path, capsys) -> None:
    conf, _ = _ledger_with_failures(tmp_path)
    assert main(["deliveries", "list", "-o", "json", "--config", str(conf)]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["seq"], r["sink"], r["state"], r["transition"]) for r in rows] == [
        (1, "slack", "failed", "lost1:firing"),
        (3, "slack", "failed", "lost2:firing"),
    ]
    assert {r["error"] for r in rows} == {"chat_postMessage: HTTP 200 channel_not_found"}
    assert rows[0]["alert"]["summary"] == "3 checkpoints of lost1 expired"
    assert rows[0]["alert"]["status"] == "firing" and rows[0]["attempts"] >= 1
    argv = ["deliveries", "list", "--state", "pending", "-o", "json", "--config", str(conf)]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_deliveries_resend_puts_failed_ones_back_in_the_queue(tmp_path, capsys) -> None:
    conf, ledger = _ledger_with_failures(tmp_path)
    assert main(["deliveries", "resend", "1", "2", "--config", str(conf)]) == 1
    captured = capsys.readouterr()
    assert "seq 1 (slack): failed -> pending" in captured.out
    assert "seq 2: no failed delivery" in captured.err  # delivered: nothing to do
    assert ledger.counts()[("slack", "pending")] == 1
    assert main(["deliveries", "resend", "--all-failed", "--config", str(conf)]) == 0
    assert "seq 3 (slack): failed -> pending" in capsys.readouterr().out
    assert ledger.counts()[("slack", "pending")] == 2
    assert ("slack", "failed") not in ledger.counts()


def test_deliveries_needs_a_ledger_and_one_way_of_choosing(tmp_path, capsys) -> None:
    conf = tmp_path / "flinkwatch.yaml"
    conf.write_text(f"output:\n  state_dir: {tmp_path / 'nothing'}\n")
    assert main(["deliveries", "list", "--config", str(conf)]) == 2
    assert "no ledger at" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()  # looking does not create one
    for argv in (["deliveries", "resend"], ["deliveries", "resend", "1", "--all-failed"]):
        with pytest.raises(SystemExit):
            main([*argv, "--config", str(conf)])
        assert "give SEQ... or --all-failed" in capsys.readouterr().err


def test_deliveries_list_in_json_without_a_ledger_is_an_empty_array(tmp_path, capsys) -> None:
    # Scripts and jq read the array: nothing recorded yet is nothing delivered, not an error.
    conf = tmp_path / "flinkwatch.yaml"
    conf.write_text(f"output:\n  state_dir: {tmp_path / 'nothing'}\n")
    assert main(["deliveries", "list", "-o", "json", "--config", str(conf)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == []
    assert "no ledger at" in captured.err
    assert not (tmp_path / "nothing").exists()


SASL_CONFIG = (
    "kafka:\n"
    "  bootstrap_servers: 127.0.0.1:1\n"
    "  security_protocol: SASL_SSL\n"
    "  sasl_mechanism: SCRAM-SHA-512\n"
    "  sasl_username: flinkwatch\n"
    "  sasl_password_env: FLINKWATCH_TEST_UNSET_PASSWORD\n"
)


@pytest.mark.parametrize(
    "command",
    [
        ["kafka", "create-topics", "flink.logs"],
        ["simulate", "--duration", "10"],
        ["run", "--duration", "1"],
    ],
)
def test_a_tool_without_its_kafka_password_names_the_variable_before_connecting(
    tmp_path, monkeypatch, caplog, keep_signal_handlers, command: list[str]
) -> None:
    monkeypatch.delenv("FLINKWATCH_TEST_UNSET_PASSWORD", raising=False)
    monkeypatch.chdir(tmp_path)  # `run` keeps its state in ./var
    f = tmp_path / "sasl.yaml"
    f.write_text(SASL_CONFIG + "metrics: {enabled: false}\n")
    from lab.cli import main as lab_main

    run = lab_main if command[0] == "simulate" else main
    assert run([*command, "--config", str(f)]) == 2
    assert (
        "kafka.sasl_password_env: environment variable FLINKWATCH_TEST_UNSET_PASSWORD is empty "
        "or unset"
    ) in caplog.text
    # Refused before anything started: `run` opened no ledger in ./var.
    assert not (tmp_path / "var").exists()


def test_the_spark_ui_is_on_by_default_and_no_spark_ui_turns_it_off() -> None:
    from conf import AppConfig
    from streaming.cli import build_parser
    from streaming.cli.args import base_overrides, with_overrides

    assert AppConfig().spark.ui_port == 4040
    args = build_parser().parse_args(["run", "--no-spark-ui"])
    assert with_overrides(AppConfig(), base_overrides(args)).spark.ui_port is None
    args = build_parser().parse_args(["run"])
    assert with_overrides(AppConfig(), base_overrides(args)).spark.ui_port == 4040


def test_version_prints_the_installed_distributions_version(monkeypatch, capsys) -> None:
    from importlib import metadata

    monkeypatch.setattr(metadata, "version", lambda name: {"flinkwatch": "9.8.7"}[name])
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == "flinkwatch 9.8.7"


def test_version_outside_an_install_says_the_source_trees_version(monkeypatch, capsys) -> None:
    import tomllib
    from importlib import metadata

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", not_installed)
    with pytest.raises(SystemExit):
        main(["--version"])
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    expected = f"flinkwatch {pyproject['project']['version']} (source tree, not installed)"
    assert capsys.readouterr().out.strip() == expected


def test_config_check_prints_the_route_a_sample_jobs_incidents_take(tmp_path, capsys) -> None:
    conf = tmp_path / "c.yaml"
    conf.write_text(
        "cluster: prod-eu\n"
        "slack:\n"
        "  routes:\n"
        "    - {channel: '#pager', severities: [critical]}\n"
        "    - {channel: '#payments', match: {job_name: 'pay-.*', cluster: 'prod-.*'}}\n"
    )
    assert main(["config", "check", str(conf), "--sample", "job_name=pay-etl", "-o", "json"]) == 0
    routes = json.loads(capsys.readouterr().out)["routes"]
    by = {(r["detector"], r["severity"]): (r["channel"], r["route"]) for r in routes}
    assert by[("checkpoint_creep", "critical")] == ("#pager", "slack.routes[0]")
    assert by[("checkpoint_creep", "warning")] == ("#payments", "slack.routes[1]")
    other = ["--sample", "job_name=pay-etl", "--sample", "cluster=staging"]
    assert main(["config", "check", str(conf), *other]) == 0
    text = capsys.readouterr().out
    assert "checkpoint_creep" in text and "#flink-alerts  (slack.channel)" in text
    assert main(["config", "check", str(conf), "--sample", "team=payments"]) == 2


def test_config_check_prints_every_route_an_incident_continues_to(tmp_path, capsys) -> None:
    conf = tmp_path / "c.yaml"
    conf.write_text(
        "slack:\n"
        "  routes:\n"
        "    - {channel: '#payments', match: {job_name: 'pay-.*'}, continue: true}\n"
        "    - {channel: '#pager', severities: [critical]}\n"
    )
    assert main(["config", "check", str(conf), "--sample", "job_name=pay-etl", "-o", "json"]) == 0
    routes = json.loads(capsys.readouterr().out)["routes"]
    taken = [(r["route"], r["channel"]) for r in routes if r["detector"] == "checkpoint_creep"]
    assert taken == [
        ("slack.routes[0]", "#payments"),  # warning: the team's route, then nothing matches
        ("slack.routes[0]", "#payments"),  # critical: the team's, continued to the pager
        ("slack.routes[1]", "#pager"),
    ]
