"""The webhook sink: every transition posted; an unknown outcome sent again (a webhook cannot be asked)."""

from __future__ import annotations

from pathlib import Path

import pytest

from detectors import AlertStatus, Severity
from lab.slack import SlackEmulator
from sinks import AlertLedger, RetryableDeliveryError, dispatch
from sinks.slack import SlackWebhookSink
from tests.sinks.slack.helpers import alert, bot, config, deliver


def test_routes_pick_the_channel_and_webhook_mode_posts_every_transition(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger)
    deliver(ledger, sink, 0, alert(severity=Severity.CRITICAL, alert_id="crit"))
    assert len(slack.messages("#flink-pager")) == 1
    cfg = config(slack, mode="webhook")
    hook = SlackWebhookSink(slack.webhook_url, lambda: cfg, lambda: "prod-eu")
    deliver(ledger, hook, 1, alert(alert_id="w"), alert(AlertStatus.RESOLVED, alert_id="w"))
    texts = [m["text"] for m in slack.webhook_messages()]
    assert len(texts) == 2 and "resolved" in texts[1] and "resolved" not in texts[0]


def test_a_webhook_cannot_be_asked_so_an_unknown_outcome_is_sent_again_and_counted(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    cfg = config(slack, mode="webhook")
    hook = SlackWebhookSink(slack.webhook_url, lambda: cfg, lambda: "prod-eu")
    slack.fail_next(1, 500, path_prefix="/services", after_store=True)
    ledger.record(0, [alert()], [hook])
    with pytest.raises(RetryableDeliveryError, match="HTTP 500"):
        dispatch.deliver(ledger, hook)
    assert dispatch.deliver(ledger, hook) == 0
    assert len(slack.webhook_messages()) == 2  # the documented cost of webhook mode
    assert ledger.outcomes[("slack", "resent_unconfirmed")] == 1
