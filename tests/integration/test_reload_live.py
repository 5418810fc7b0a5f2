"""A threshold changed while the job runs takes effect without losing detector state."""

from __future__ import annotations

import threading

import pytest
import yaml

from conf import load_config
from conf.reload import ConfigWatcher
from streaming.supervise import run_forever
from tests.conftest import wait_until
from tests.integration.kafka_path import config, expired_cycle, pipeline, read_alerts

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

JOB = "5b2d8c1e9f0a4b6c8d7e6f5a4b3c2d1e"


def test_threshold_change_applies_live_and_keeps_state(spark, kafka, tmp_path) -> None:
    base = config(kafka, "reload1", tmp_path / "state")
    kafka.create_topics(base.kafka.logs_topic, base.kafka.metrics_topic)
    path = tmp_path / "flinkwatch.yaml"

    def write(min_expired: object) -> None:
        doc = {
            "kafka": {
                "bootstrap_servers": kafka.bootstrap,
                "logs_topic": base.kafka.logs_topic,
                "metrics_topic": base.kafka.metrics_topic,
                "events_topic": base.kafka.events_topic,
                "deadletters_topic": base.kafka.deadletters_topic,
            },
            "spark": {"trigger_interval_s": 0.5, "watermark_delay_s": 60},
            "output": {"state_dir": str(tmp_path / "state")},
            "reload_interval_s": 0.5,
            "detectors": {"checkpoint_failures": {"min_expired": min_expired}},
        }
        path.write_text(yaml.safe_dump(doc))

    write(5)
    cfg = load_config(path)
    p = pipeline(spark, cfg, {"processingTime": "500 milliseconds"})
    watcher = ConfigWatcher(path, cfg)
    stop = threading.Event()
    result: dict[str, int] = {}
    runner = threading.Thread(
        target=lambda: result.update(rc=run_forever(p, should_stop=stop.is_set, watcher=watcher))
    )
    runner.start()
    try:
        # Three expiries: below the threshold of 5, so no alert, but they are in state.
        kafka.produce(base.kafka.logs_topic, expired_cycle(JOB, 1, 3, 1), key=JOB.encode())
        wait_until(
            lambda: p.stats.kinds["checkpoint_expired"] >= 3, what="three expiries processed"
        )
        assert read_alerts(cfg.output.alerts_path, "checkpoint_failures") == []

        # An invalid edit is rejected and the running config stays.
        write("four")
        wait_until(lambda: watcher.stats.failed == 1, what="the invalid edit to be rejected")
        assert "detectors.checkpoint_failures.min_expired" in (watcher.stats.last_error or "")

        # A valid edit lowers the threshold to 4; the fourth expiry must fire, which it
        # can only do if the three earlier ones survived the restart in detector state.
        write(4)
        wait_until(lambda: watcher.stats.succeeded == 1, what="the valid edit to be applied")
        kafka.produce(base.kafka.logs_topic, expired_cycle(JOB, 4, 1, 4), key=JOB.encode())
        wait_until(
            lambda: len(read_alerts(cfg.output.alerts_path, "checkpoint_failures")) >= 1,
            what="the alert",
        )
    finally:
        stop.set()
        runner.join(timeout=120)
    assert result.get("rc") == 0
    alerts = read_alerts(cfg.output.alerts_path, "checkpoint_failures")
    assert [(a["status"], a["evidence"]["expired_checkpoints"]) for a in alerts] == [
        ("firing", [1, 2, 3, 4])
    ]


RULE = {
    "name": "expiry_burst",
    "kind": "frequency",
    "kinds": ["checkpoint_expired"],
    "count": 2,
    "window_s": 600,
    "runbook": "Look at the checkpoint storage.",
}


def test_a_reload_adds_a_rule_that_fires_then_removes_it_and_its_incident_resolves(
    spark, kafka, tmp_path
) -> None:
    base = config(kafka, "reload2", tmp_path / "state")
    kafka.create_topics(base.kafka.logs_topic, base.kafka.metrics_topic)
    path = tmp_path / "flinkwatch.yaml"

    def write(*rules: dict[str, object]) -> None:
        doc = {
            "kafka": {
                "bootstrap_servers": kafka.bootstrap,
                "logs_topic": base.kafka.logs_topic,
                "metrics_topic": base.kafka.metrics_topic,
                "events_topic": base.kafka.events_topic,
                "deadletters_topic": base.kafka.deadletters_topic,
            },
            "spark": {"trigger_interval_s": 0.5, "watermark_delay_s": 60},
            "output": {"state_dir": str(tmp_path / "state")},
            "reload_interval_s": 0.5,
            "rules": list(rules),
        }
        path.write_text(yaml.safe_dump(doc))

    def rule_alerts() -> list[dict]:
        return read_alerts(cfg.output.alerts_path, "expiry_burst")

    write()
    cfg = load_config(path)
    p = pipeline(spark, cfg, {"processingTime": "500 milliseconds"})
    watcher = ConfigWatcher(path, cfg)
    stop = threading.Event()
    result: dict[str, int] = {}
    runner = threading.Thread(
        target=lambda: result.update(rc=run_forever(p, should_stop=stop.is_set, watcher=watcher))
    )
    runner.start()
    try:
        # Two expiries before the rule exists: nothing of it runs.
        kafka.produce(base.kafka.logs_topic, expired_cycle(JOB, 1, 2, 1), key=JOB.encode())
        wait_until(lambda: p.stats.kinds["checkpoint_expired"] >= 2, what="two expiries")
        assert rule_alerts() == []

        # The reload adds the rule: two expiries written after it fire it.
        write(RULE)
        wait_until(lambda: watcher.stats.succeeded == 1, what="the rule to be added")
        kafka.produce(base.kafka.logs_topic, expired_cycle(JOB, 3, 2, 3), key=JOB.encode())
        wait_until(lambda: len(rule_alerts()) >= 1, what="the rule's page")
        (fired,) = rule_alerts()
        assert fired["status"] == "firing" and fired["job_id"] == JOB
        assert fired["evidence"]

        # The reload removes it: at the job's next record its open incident resolves,
        # saying why.
        write()
        wait_until(lambda: watcher.stats.succeeded == 2, what="the rule to be removed")
        kafka.produce(base.kafka.logs_topic, expired_cycle(JOB, 5, 1, 5), key=JOB.encode())
        wait_until(lambda: len(rule_alerts()) >= 2, what="the rule's incident to resolve")
    finally:
        stop.set()
        runner.join(timeout=120)
    assert result.get("rc") == 0
    fired, resolved = rule_alerts()
    assert resolved["status"] == "resolved" and resolved["alert_id"] == fired["alert_id"]
    assert resolved["summary"] == (
        "expiry_burst stopped watching this entity (removed from the config); closing its "
        "open incident"
    )
