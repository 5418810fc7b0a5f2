"""``python -m lab``: the demo tooling's command line, without a broker."""

from __future__ import annotations

from typing import Any

import pytest

import lab.cli
import lab.slack
from lab import fleet
from lab.cli import LOCAL_BOOTSTRAP, build_parser, local_bootstrap
from lab.cli import main as lab_main
from lab.fleet import Incident


def _simulate_connects_to(monkeypatch, argv: list[str]) -> str:
    sent: list[Any] = []
    monkeypatch.setattr(
        fleet, "produce", lambda records, bootstrap, *a, **k: sent.append(bootstrap) or 0
    )
    assert lab_main(["simulate", "--duration", "1", *argv]) == 0
    return str(sent[0]["bootstrap_servers"])


def test_simulate_follows_a_moved_local_kafka_port(monkeypatch) -> None:
    monkeypatch.setenv("FLINKWATCH_KAFKA_PORT", "19092")
    assert _simulate_connects_to(monkeypatch, []) == "127.0.0.1:19092"
    assert _simulate_connects_to(monkeypatch, ["--bootstrap", "b:9"]) == "b:9"
    monkeypatch.delenv("FLINKWATCH_KAFKA_PORT")
    assert _simulate_connects_to(monkeypatch, []) == LOCAL_BOOTSTRAP


def test_a_config_naming_other_brokers_keeps_them_whatever_the_port(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FLINKWATCH_KAFKA_PORT", "19092")
    conf = tmp_path / "remote.yaml"
    conf.write_text("kafka:\n  bootstrap_servers: kafka-1.prod:9092\n")
    assert _simulate_connects_to(monkeypatch, ["--config", str(conf)]) == "kafka-1.prod:9092"


def test_a_port_that_is_not_a_number_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="FLINKWATCH_KAFKA_PORT='x' is not a port number"):
        local_bootstrap(LOCAL_BOOTSTRAP, None, {"FLINKWATCH_KAFKA_PORT": "x"})


class _Process:
    pid = 4242

    def terminate(self) -> None:
        pass

    def wait(self, timeout: float) -> int:
        return 0


def test_demo_runs_the_job_and_the_simulator_on_a_moved_local_kafka_port(
    tmp_path, monkeypatch
) -> None:
    import subprocess

    monkeypatch.setenv("FLINKWATCH_KAFKA_PORT", "19092")
    started: list[list[str]] = []
    jobs: list[tuple[Any, Any]] = []
    monkeypatch.setattr(subprocess, "Popen", lambda argv, **_: started.append(argv) or _Process())
    monkeypatch.setattr(
        lab.cli, "run_job", lambda cfg, *_, base, **__: jobs.append((cfg, base)) or 0
    )
    conf = tmp_path / "demo.yaml"
    conf.write_text("slack:\n  mode: webhook\n  webhook_url_env: FLINKWATCH_TEST_HOOK\n")
    assert lab_main(["demo", "--config", str(conf), "--state-dir", str(tmp_path / "s")]) == 0
    ((cfg, base),) = jobs
    assert cfg.kafka.bootstrap_servers == "127.0.0.1:19092"
    # Re-applied on every reload of the file, which says 9092 (the packaged default).
    assert base["kafka"]["bootstrap_servers"] == "127.0.0.1:19092"
    simulate = started[0]
    assert simulate[simulate.index("--bootstrap") + 1] == "127.0.0.1:19092"


def test_simulate_takes_incidents_as_kind_at_job_colon_onset(capsys) -> None:
    args = build_parser().parse_args(
        ["simulate", "--incident", "restart_storm@2:300", "--incident", "tm_heap_oom@0:12.5"]
    )
    assert args.incident == [
        Incident("restart_storm", 2, 300.0),
        Incident("tm_heap_oom", 0, 12.5),
    ]
    for bad, why in (
        ("no_such_kind@1:10", "unknown incident kind"),
        ("restart_storm@x:10", "KIND@JOB:ONSET"),
    ):
        with pytest.raises(SystemExit):
            build_parser().parse_args(["simulate", "--incident", bad])
        assert why in capsys.readouterr().err


def test_lab_slack_emulator_takes_its_options_as_the_docs_show(monkeypatch) -> None:
    got: list[list[str]] = []
    monkeypatch.setattr(lab.slack, "main", lambda argv: got.append(list(argv)) or 0)
    args = build_parser().parse_args(["slack-emulator", "--channel", "#x", "--channel", "#y"])
    assert args.func(args) == 0
    assert got == [
        ["--port", "0", "--token", "xoxb-flinkwatch-local", "--channel", "#x", "--channel", "#y"]
    ]
