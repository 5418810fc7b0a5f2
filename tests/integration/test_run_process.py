"""`flinkwatch run` as a process: /metrics scraped by a real Prometheus, SIGHUP, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
import yaml

from lab.promserver import PrometheusServer
from tests.conftest import REPO, wait_until
from tests.integration.test_kafka_e2e import expired_cycle
from tests.integration.test_prometheus_server import need_binary

pytestmark = [pytest.mark.kafka]

JOB = "6a1f0e2d3c4b5a69788796a5b4c3d2e1"


def scrape(port: int) -> str:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return ""


def healthz(port: int) -> tuple[int, str]:
    """(status, body) of /healthz on ``port``; (0, "") while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports (all held at once while they are picked)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def sample(body: str, prefix: str) -> float | None:
    for line in body.splitlines():
        if line.startswith(prefix):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_run_serves_metrics_reloads_on_sighup_and_stops_on_sigterm(kafka, tmp_path) -> None:
    kafka.create_topics("proc.logs", "proc.metrics")
    port, health_port = free_ports(2)
    conf = tmp_path / "flinkwatch.yaml"
    doc = {
        "kafka": {
            "bootstrap_servers": kafka.bootstrap,
            "logs_topic": "proc.logs",
            "metrics_topic": "proc.metrics",
            "events_topic": "proc.events",
            "deadletters_topic": "proc.deadletters",
        },
        "spark": {"trigger_interval_s": 0.5},
        "output": {"state_dir": str(tmp_path / "state")},
        "metrics": {"port": port, "health_port": health_port},
        "reload_interval_s": 3600,  # only SIGHUP may trigger the reload in this test
        "detectors": {"checkpoint_failures": {"min_expired": 3}},
    }
    conf.write_text(yaml.safe_dump(doc))
    log = (tmp_path / "run.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streaming.cli", "run", "--config", str(conf)],
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        wait_until(lambda: "flinkwatch_config_info" in scrape(port), timeout=180, what="/metrics")
        kafka.produce("proc.logs", expired_cycle(JOB, 1, 3, 1), key=JOB.encode())
        wait_until(
            lambda: (
                sample(
                    scrape(port),
                    'flinkwatch_alert_transitions_total{detector="checkpoint_failures",status="firing"}',
                )
                == 1.0
            ),
            timeout=180,
            what="the firing transition in /metrics",
        )
        # The liveness answer comes from the detect query's own progress reports.
        status, body = healthz(health_port)
        assert status == 200 and body.startswith("ok: last progress"), (status, body)
        # A real Prometheus server scrapes the running job: the alert series and the
        # detector's signal for the job come back from its query API.
        with PrometheusServer(
            need_binary(), tmp_path / "prom", [f"127.0.0.1:{port}"], scrape_interval_s=1.0
        ) as prom:
            (series,) = prom.wait_for(
                'flinkwatch_alerts_active{detector="checkpoint_failures"}', timeout=60
            )
            assert series["metric"]["job_id"] == JOB
            assert series["metric"]["cluster"] == "default"
            (signal_,) = prom.wait_for(f'flinkwatch_checkpoints_expired{{job_id="{JOB}"}}')
            assert signal_["value"][1] == "3"
        doc["detectors"]["checkpoint_failures"]["min_expired"] = 4
        conf.write_text(yaml.safe_dump(doc))
        proc.send_signal(signal.SIGHUP)
        wait_until(
            lambda: (
                sample(scrape(port), 'flinkwatch_config_reloads_total{outcome="success"}') == 1.0
            ),
            timeout=120,
            what="the SIGHUP reload",
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    out = (tmp_path / "run.log").read_text()
    assert "SIGHUP: re-reading the config" in out
    assert "checkpoint_failures" in out.split("events by kind:")[-1]  # the summary table
    alerts = [json.loads(x) for x in (tmp_path / "state" / "alerts.jsonl").read_text().splitlines()]
    assert [
        (a["detector"], a["status"]) for a in alerts if a["detector"] == "checkpoint_failures"
    ] == [("checkpoint_failures", "firing")]
    # A person reads this log: no generated Java code, no compiler errors, no stack traces
    # in normal operation (the parse projection used to fail Janino's 64 KB limit on every
    # micro-batch and log the whole generated class).
    for noise in ("Failed to compile", "grows beyond 64 KB", "generated.java", "Traceback"):
        assert noise not in out, noise
