"""A real Prometheus server (Debian package) scrapes flinkwatch's exporter and runs a rule."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, start_http_server

from detectors import Alert, AlertStatus, Severity
from sinks import Transition, transition_key
from sinks.prometheus import ActiveAlerts, FlinkwatchCollector, Sources
from sinks.slack_emulator import SlackEmulator
from tests.conftest import wait_until
from tests.promserver import JOB_NAME, AlertmanagerServer, PrometheusServer, find_binary

BINARY = find_binary()

# A self-monitoring rule of the kind k8s/ ships: Slack deliveries are piling up.
RULES = """\
groups:
  - name: flinkwatch-self
    rules:
      - alert: FlinkwatchSlackBacklog
        expr: flinkwatch_delivery_backlog{sink="slack"} > 0
        for: 0s
        labels:
          severity: warning
"""


def need_binary() -> Path:
    if BINARY is None:
        pytest.fail("no prometheus binary: run `scripts/prometheus.sh fetch` (make setup does)")
    return BINARY


@pytest.fixture
def endpoint() -> Iterator[str]:
    """flinkwatch's collector on 127.0.0.1 with one open incident and a Slack backlog."""
    active = ActiveAlerts()
    a = Alert(
        alert_id="a1",
        detector="idle_heap_growth",
        entity="tm:c3",
        status=AlertStatus.FIRING,
        severity=Severity.CRITICAL,
        event_time_ms=1,
        summary="s",
        tm_id="container_e05_1699999999999_0042_01_000003",
        host="worker-7",
    )
    active.observe([Transition(1, transition_key(a), a)])
    registry = CollectorRegistry()
    registry.register(
        FlinkwatchCollector(
            Sources(
                kinds=dict,
                dead_letters=dict,
                progress=dict,
                reloads=lambda: (0, 0),
                config_hash=lambda: "h",
                active=active,
                cluster=lambda: "prod-eu",
                backlog=lambda: {"slack": 4},
            )
        )
    )
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_prometheus_scrapes_the_exporter_and_evaluates_a_rule_on_it(
    endpoint: str, tmp_path: Path
) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(RULES)
    with PrometheusServer(
        need_binary(), tmp_path / "prom", [endpoint], scrape_interval_s=1.0, rule_files=[rules]
    ) as prom:
        prom.wait_for(f'up{{job="{JOB_NAME}",instance="{endpoint}"}} == 1', timeout=30)
        (series,) = prom.wait_for('flinkwatch_alerts_active{detector="idle_heap_growth"}')
        assert series["metric"]["cluster"] == "prod-eu"
        assert series["metric"]["severity"] == "critical"
        assert series["metric"]["tm_id"] == "container_e05_1699999999999_0042_01_000003"
        assert series["metric"]["silenced"] == "false"
        deadline = time.monotonic() + 30
        firing: list[dict] = []
        while not firing and time.monotonic() < deadline:
            firing = [
                a
                for a in prom.alerts()
                if a["labels"].get("alertname") == "FlinkwatchSlackBacklog"
                and a["state"] == "firing"
            ]
            time.sleep(0.25)
        assert firing, f"rule not firing; alerts: {prom.alerts()}"
    assert not prom.running


def test_alertmanager_pages_the_local_slack_for_a_firing_rule(tmp_path: Path) -> None:
    """The peer benchmark's other side: a rule fires, Alertmanager posts it to Slack."""
    binary = need_binary()
    rules = tmp_path / "rules.yml"
    # True from a few seconds on: an alert that fires before Prometheus has found its
    # Alertmanager is dropped and only sent again a minute later (rules.alert.resend-delay).
    rules.write_text(
        "groups:\n  - name: t\n    rules:\n      - alert: FlinkCheckpointFailures\n"
        f"        expr: vector(time()) > {int(time.time()) + 8}\n"
        '        labels: {job_id: "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"}\n'
    )
    with SlackEmulator(channels=("#flink-alerts",)) as slack:
        am = AlertmanagerServer(
            binary.with_name("alertmanager"),
            tmp_path / "am",
            slack.webhook_url,
            "#flink-alerts",
            group_wait_s=1,
        ).start()
        try:
            with PrometheusServer(
                binary,
                tmp_path / "prom",
                targets=[],
                rule_files=[rules],
                alertmanagers=[am.target],
            ):
                wait_until(lambda: slack.webhook_messages(), timeout=60, what="the page")
        finally:
            am.stop()
    (page,) = slack.webhook_messages()[:1]
    assert page["text"].startswith("[FIRING:1] FlinkCheckpointFailures")
    assert "FlinkCheckpointFailures job_id=3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3" in page["text"]
