"""The run's metrics (``streaming/metrics.py``): each part's collector on the one registry, served.

What each collector says: ``tests/sinks/test_prometheus.py``; the endpoint itself:
``tests/sinks/inbound/test_metrics_server.py``.
"""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from conf import AppConfig
from conf.running import RunningConfig
from sinks import AlertLedger
from sinks.inbound.metrics_server import MetricsEndpoint
from sinks.prometheus import ActiveAlerts
from streaming.delivery import Outputs, PipelineStats
from streaming.listener import ProgressLogger
from streaming.metrics import register_run, serve


def _families(registry: CollectorRegistry) -> set[str]:
    text = generate_latest(registry).decode()
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}


def test_each_part_of_a_run_counts_on_the_one_registry_read_at_scrape_time(
    tmp_path: Path,
) -> None:
    registry = CollectorRegistry()
    stats = PipelineStats()
    outputs = Outputs(AlertLedger(tmp_path / "l.sqlite"), observers=[ActiveAlerts()])
    running = RunningConfig(AppConfig(cluster="prod-eu"))
    register_run(registry, running, outputs, stats, ProgressLogger())
    assert {
        "flinkwatch_alerts_active",  # the open incidents
        "flinkwatch_deliveries_total",  # the sends per sink
        "flinkwatch_slack_actions_total",  # the buttons, off: at 0
        "flinkwatch_ledger_errors_total",  # the queries' counters
        "flinkwatch_config_reloads_total",  # no file watched: at 0
        "flinkwatch_watermark_delay_seconds",  # the config in force
    } <= _families(registry)
    # No signal board: no signal gauges.
    assert not any("signal" in f for f in _families(registry))
    assert registry.get_sample_value("flinkwatch_ledger_errors_total") == 0
    stats.count_ledger_error()
    assert registry.get_sample_value("flinkwatch_ledger_errors_total") == 1


def test_a_metrics_port_in_use_is_logged_and_the_run_goes_on_without_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = AppConfig()
    running = RunningConfig(cfg)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.INFO, logger="flinkwatch"):
            serve(
                cfg,
                MetricsEndpoint("127.0.0.1", port),
                CollectorRegistry(),
                ProgressLogger(),
                running,
            )
    assert f"metrics: cannot listen on {cfg.metrics.host}:{cfg.metrics.port}" in caplog.text
    assert "running without /metrics" in caplog.text
