"""A real Prometheus server (Debian package) scrapes flinkwatch's exporter and runs a rule."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, start_http_server

from detectors import Alert, AlertStatus, Severity
from lab.promserver import JOB_NAME, AlertmanagerServer, PrometheusServer, find_binary
from lab.slack import SlackEmulator
from sinks import Transition, transition_key
from sinks.inbound.metrics_server import BasicAuth, MetricsEndpoint, TlsFiles
from sinks.prometheus import ActiveAlerts
from tests.certs import self_signed
from tests.conftest import wait_until
from tests.sinks.test_prometheus import Ledger, Outs, Sink, bare_registry

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
        pytest.fail("no prometheus binary: run `scripts/prometheus.sh fetch` (make test does)")
    return BINARY


def registry() -> CollectorRegistry:
    """flinkwatch's collector with one open incident and a Slack backlog."""
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
    registry = bare_registry(
        active=active,
        cluster="prod-eu",
        outputs=Outs(Ledger(waiting={"slack": 4}), sinks=[Sink("slack")]),
    )
    return registry


@pytest.fixture
def endpoint() -> Iterator[str]:
    """flinkwatch's collector on 127.0.0.1, served by prometheus-client."""
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry())
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


def test_prometheus_scrapes_over_https_with_basic_auth_and_not_with_a_wrong_password(
    tmp_path: Path,
) -> None:
    """The documented set-up: a self-signed certificate is its own CA, the password a file."""
    cert, key = self_signed(tmp_path / "certs")
    (tmp_path / "password").write_text("s3cret-Pa55word\n")  # as `openssl rand` writes it
    (tmp_path / "wrong").write_text("guess\n")
    flinkwatch = MetricsEndpoint(
        "127.0.0.1",
        0,
        tls=TlsFiles(cert, key),
        auth=BasicAuth("prometheus", "s3cret-Pa55word"),
    )

    def job(name: str, target: str, password_file: Path, **more: object) -> dict[str, object]:
        return {
            "job_name": name,
            "scheme": "https",
            # The name Prometheus checks the certificate against, as the ServiceMonitor's
            # serverName: the target is an address the certificate does not name.
            "tls_config": {"ca_file": str(cert), "server_name": "flinkwatch.flinkwatch.svc"},
            "basic_auth": {"username": "prometheus", "password_file": str(password_file)},
            "static_configs": [{"targets": [target]}],
            **more,
        }

    with flinkwatch.serve(registry()) as server:
        target = f"127.0.0.1:{server.port}"
        jobs = [
            job("flinkwatch-tls", target, tmp_path / "password"),
            job("flinkwatch-wrong-password", target, tmp_path / "wrong"),
            job("flinkwatch-plain-http", target, tmp_path / "password", scheme="http"),
        ]
        with PrometheusServer(
            need_binary(), tmp_path / "prom", [], extra_scrape_configs=jobs
        ) as prom:
            prom.wait_for('up{job="flinkwatch-tls"} == 1', timeout=30)
            (series,) = prom.wait_for('flinkwatch_alerts_active{job="flinkwatch-tls"}')
            assert series["metric"]["cluster"] == "prod-eu"
            prom.wait_for('up{job="flinkwatch-wrong-password"} == 0', timeout=30)
            prom.wait_for('up{job="flinkwatch-plain-http"} == 0', timeout=30)
            errors = {t["labels"]["job"]: t["lastError"] for t in prom.targets()}
            assert prom.query('flinkwatch_alerts_active{job!="flinkwatch-tls"}') == []
    assert errors["flinkwatch-tls"] == ""
    assert "401" in errors["flinkwatch-wrong-password"]
    assert errors["flinkwatch-plain-http"], "plain HTTP to the HTTPS port must fail"


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
