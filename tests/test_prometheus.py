"""The driver's Prometheus exporter: exact sample values, and a real HTTP scrape."""

from __future__ import annotations

import socket
import urllib.request
from collections import Counter
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, start_http_server

from detectors import Alert, AlertStatus, Severity
from sinks.prometheus import ActiveAlerts, FlinkwatchCollector, Sources


def alert(alert_id: str, status: AlertStatus, detector: str = "idle_heap_growth") -> Alert:
    return Alert(
        alert_id=alert_id,
        detector=detector,
        entity="tm:container_e05_1699999999999_0042_01_000003",
        status=status,
        severity=Severity.CRITICAL,
        event_time_ms=1,
        summary="heap floor +240 MB/h with zero input",
        tm_id="container_e05_1699999999999_0042_01_000003",
        job_id="3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3",
    )


@dataclass
class P:
    input_rows_per_s: float = 120.0
    processed_rows_per_s: float = 300.0
    batch_ms: int = 1500
    state_rows: int = 80
    state_bytes: int = 250_200
    late_rows_dropped: int = 4


def registry_with(active: ActiveAlerts, reloads=(2, 1)) -> CollectorRegistry:
    reg = CollectorRegistry()
    reg.register(
        FlinkwatchCollector(
            Sources(
                kinds=lambda: Counter({"checkpoint_completed": 7, "metric": 30}),
                dead_letters=lambda: Counter({"invalid_json": 2}),
                progress=lambda: {"flinkwatch-detect": P()},
                reloads=lambda: reloads,
                config_hash=lambda: "abc123def456",
                active=active,
            )
        )
    )
    return reg


def test_firing_alert_is_a_series_until_it_resolves() -> None:
    active = ActiveAlerts()
    reg = registry_with(active)
    labels = {
        "detector": "idle_heap_growth",
        "severity": "critical",
        "job_id": "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3",
        "tm_id": "container_e05_1699999999999_0042_01_000003",
    }
    active.deliver(0, [alert("a1", AlertStatus.FIRING)])
    assert reg.get_sample_value("flinkwatch_alerts_active", labels) == 1.0
    active.deliver(0, [alert("a1", AlertStatus.FIRING)])  # a replayed batch counts once
    active.deliver(1, [alert("a1", AlertStatus.RESOLVED)])
    assert reg.get_sample_value("flinkwatch_alerts_active", labels) is None
    t = {"detector": "idle_heap_growth"}
    assert (
        reg.get_sample_value("flinkwatch_alert_transitions_total", {**t, "status": "firing"}) == 1.0
    )
    assert (
        reg.get_sample_value("flinkwatch_alert_transitions_total", {**t, "status": "resolved"})
        == 1.0
    )


def test_pipeline_health_and_reload_outcomes_are_exported() -> None:
    reg = registry_with(ActiveAlerts())
    assert reg.get_sample_value("flinkwatch_events_total", {"kind": "metric"}) == 30.0
    assert reg.get_sample_value("flinkwatch_dead_letters_total", {"reason": "invalid_json"}) == 2.0
    assert reg.get_sample_value("flinkwatch_config_reloads_total", {"outcome": "success"}) == 2.0
    assert reg.get_sample_value("flinkwatch_config_reloads_total", {"outcome": "failure"}) == 1.0
    assert reg.get_sample_value("flinkwatch_config_info", {"hash": "abc123def456"}) == 1.0
    q = {"query": "flinkwatch-detect"}
    assert reg.get_sample_value("flinkwatch_batch_duration_seconds", q) == 1.5
    assert reg.get_sample_value("flinkwatch_state_bytes", q) == 250_200.0
    assert reg.get_sample_value("flinkwatch_late_rows_dropped_total", q) == 4.0


def test_metrics_are_served_over_http() -> None:
    active = ActiveAlerts()
    active.deliver(0, [alert("a1", AlertStatus.FIRING)])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry_with(active))
    try:
        body = (
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        )
    finally:
        server.shutdown()
        thread.join(timeout=10)
    assert (
        'flinkwatch_alerts_active{detector="idle_heap_growth",job_id="3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"'
        in body
    )
    assert 'flinkwatch_dead_letters_total{reason="invalid_json"} 2.0' in body
