"""``flinkwatch kafka create-topics`` (and the other tools) refusing before they connect."""

from __future__ import annotations

import pytest

from streaming.cli import main

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
