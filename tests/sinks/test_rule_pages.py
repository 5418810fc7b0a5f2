"""A rule's page is a detector's page: every sink tells them apart by the name alone.

The sinks take a detector's words (its runbook) from the running config's catalog, so a
rule a reload adds pages with its own runbook, and Prometheus has its series.
"""

from __future__ import annotations

import json
from typing import Any

from prometheus_client import CollectorRegistry

from conf import AppConfig, WebhookConfig
from conf.running import RunningConfig
from detectors import REGISTRY, Alert, AlertStatus
from sinks import Transition, transition_key
from sinks.alertmanager import transition_alerts
from sinks.prometheus import PipelineCollector, SlackActionsCollector
from sinks.slack.message import render
from sinks.webhook import payload
from tests.sinks.test_alertmanager import NOW, T0
from tests.sinks.test_alertmanager import alert as am_alert
from tests.sinks.test_prometheus import Stats

RULE = {
    "name": "expiry_burst",
    "kind": "frequency",
    "kinds": ["checkpoint_expired"],
    "count": 2,
    "window_s": 600,
    "runbook": "Look at the checkpoint storage: expiries come in a row.",
}
BUILTIN = "checkpoint_failures"


def running(*rules: dict[str, Any]) -> RunningConfig:
    return RunningConfig(AppConfig.model_validate({"rules": list(rules)}))


def transition(a: Alert) -> Transition:
    return Transition(1, transition_key(a), a, recorded_ms=T0 + 1_000)


def same_but_names(of_rule: object, of_builtin: object) -> None:
    """Equal once each names itself and its runbook the same way."""
    words = REGISTRY[BUILTIN].profile.runbook
    rule = json.dumps(of_rule).replace("expiry_burst", "NAME").replace(RULE["runbook"], "TODO")
    builtin = json.dumps(of_builtin).replace(BUILTIN, "NAME").replace(words, "TODO")
    assert "TODO" in rule
    assert rule == builtin


def pair(status: AlertStatus = AlertStatus.FIRING) -> tuple[Alert, Alert]:
    builtin = am_alert(status)
    return builtin.model_copy(update={"detector": "expiry_burst"}), builtin


def test_a_rules_slack_message_is_a_detectors_with_its_own_runbook() -> None:
    words = running(RULE).runbook
    rule, builtin = pair()
    kw: dict[str, Any] = {"cluster": "prod", "runbook_url": "https://rb.example", "mention": None}
    same_but_names(render(rule, runbook=words, **kw), render(builtin, runbook=words, **kw))
    blocks = json.dumps(render(rule, runbook=words, **kw)[1])
    assert "https://rb.example#expiry_burst|Runbook" in blocks
    # Without the config's catalog the rule has no words: what the sinks had before.
    assert RULE["runbook"] not in json.dumps(render(rule, **kw))


def test_a_rules_alertmanager_alerts_have_the_detectors_labels_and_annotations() -> None:
    words = running(RULE).runbook
    cfg = AppConfig.model_validate({"alertmanager": {"runbook_url": "https://rb.example"}})
    for status in AlertStatus:
        rule, builtin = pair(status)
        docs = [
            [
                p.to_json()
                for p in transition_alerts(
                    transition(a),
                    previous=None,
                    cfg=cfg.alertmanager,
                    cluster="prod",
                    now_ms=NOW,
                    runbook=words,
                )
            ]
            for a in (rule, builtin)
        ]
        same_but_names(*docs)
        assert docs[0][0]["labels"]["detector"] == docs[0][0]["labels"]["alertname"]
        assert docs[0][0]["annotations"]["runbook"] == RULE["runbook"]


def test_a_rules_webhook_body_is_a_detectors() -> None:
    words = running(RULE).runbook
    hook = WebhookConfig(
        name="oncall", url="http://x/", secret="${S}", runbook_url="https://rb.example"
    )
    rule, builtin = pair()
    same_but_names(
        payload(transition(rule), hook, "prod", words),
        payload(transition(builtin), hook, "prod", words),
    )
    assert payload(transition(rule), hook, "prod", words)["runbook"] == RULE["runbook"]


def test_prometheus_has_a_rules_series_from_the_reload_that_adds_it_on() -> None:
    holder = running()
    stats = Stats()
    reg = CollectorRegistry()
    reg.register(PipelineCollector(stats, lambda: holder.catalog))
    reg.register(SlackActionsCollector(None, lambda: holder.catalog))

    def errors(name: str) -> float | None:
        labels = {"detector": name, "outcome": "skipped"}
        return reg.get_sample_value("flinkwatch_detector_errors_total", labels)

    assert errors("expiry_burst") is None
    assert errors(BUILTIN) == 0
    holder.swap(AppConfig.model_validate({"rules": [RULE]}))
    assert errors("expiry_burst") == 0  # from its first scrape: rate() sees its first error
    assert reg.get_sample_value("flinkwatch_false_alarms_total", {"detector": "expiry_burst"}) == 0
    stats.detector_errors[("expiry_burst", "skipped")] = 2
    holder.swap(AppConfig())  # removed again: what it counted stays
    assert errors("expiry_burst") == 2
