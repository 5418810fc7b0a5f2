"""``flinkwatch run`` refuses to start, before anything starts, when a secret it needs is missing."""

from __future__ import annotations

import pytest

from streaming.cli import main


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
