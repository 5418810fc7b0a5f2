"""The Slack transport: slack-sdk's retries, what is safe to send again, and secrets kept out of logs and errors."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conf import SlackConfig
from lab.procs import free_port
from lab.slack import SlackEmulator
from sinks import AlertLedger, PermanentDeliveryError, RetryableDeliveryError, dispatch
from sinks.slack import SlackBotSink, SlackWebhookSink
from tests.sinks.slack.helpers import TOKEN, alert, bot, config, keys


def test_rate_limits_are_retried_by_slack_sdk_and_a_server_error_is_confirmed_first(
    slack: SlackEmulator, tmp_path: Path
) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger)
    slack.fail_next(1, 429, retry_after=1)
    slack.fail_next(1, 500)
    ledger.record(0, [alert()], [sink])
    # A 429 is Slack saying it did nothing: slack-sdk waits and sends again. After a 500
    # the message may exist: the send stays open until Slack has been asked.
    with pytest.raises(RetryableDeliveryError, match="HTTP 500"):
        dispatch.deliver(ledger, sink)
    assert ledger.counts()[("slack", "sending")] == 1
    assert dispatch.deliver(ledger, sink) == 0
    assert [(p.rsplit("/", 1)[1], s) for p, s in slack.requests] == [
        ("chat.postMessage", 429),
        ("chat.postMessage", 500),
        ("conversations.list", 200),
        ("conversations.history", 200),
        ("chat.postMessage", 200),
    ]
    assert len(slack.messages("#flink-alerts")) == 1


def test_secrets_never_reach_logs_or_errors(
    slack: SlackEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ledger = AlertLedger(tmp_path / "l.sqlite")
    cfg = config(slack, max_retries=0)
    wrong = SlackBotSink("xoxb-wrong-secret", ledger, lambda: cfg, lambda: "c")
    hook_url = slack.webhook_url.replace("XXXX", "SECRETPATH")
    hook = SlackWebhookSink(hook_url, lambda: cfg, lambda: "c")
    gone = SlackWebhookSink("http://127.0.0.1:9/services/T/B/SECRETPATH", lambda: cfg, lambda: "c")
    errors = []
    for sink in (wrong, hook, gone):
        [t] = ledger.record(len(errors), [alert(alert_id=f"x{len(errors)}")], [])
        with pytest.raises((RetryableDeliveryError, PermanentDeliveryError)) as exc:
            sink.send(t)
        errors.append(str(exc.value))
    assert "invalid_auth" in errors[0]
    for text in [caplog.text, *errors]:
        assert "xoxb-wrong-secret" not in text and "SECRETPATH" not in text


def test_an_outage_page_is_one_retryable_failure_with_its_words_and_no_error_line(
    slack: SlackEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A 503 with an HTML or text body: slack-sdk logs it at ERROR, every try of an outage."""
    caplog.set_level(logging.DEBUG)
    ledger = AlertLedger(tmp_path / "l.sqlite")
    sink = bot(slack, ledger)
    ledger.record(0, [alert()], [sink])
    slack.set_down(True)
    with pytest.raises(RetryableDeliveryError, match="non-JSON format: service unavailable"):
        dispatch.deliver(ledger, sink)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    slack.set_down(False)
    # The send stays open, as after any 5xx, and goes through once Slack is back.
    assert dispatch.deliver(ledger, sink) == 0
    assert keys(slack.messages("#flink-alerts")) == ["a1:firing"]


def test_a_send_that_could_not_connect_is_retried_and_sent_again_without_asking(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    ledger = AlertLedger(tmp_path / "l.sqlite")
    cfg = SlackConfig(
        mode="bot", api_url=f"http://127.0.0.1:{port}/api/", channel="#flink-alerts", max_retries=1
    )
    sink = SlackBotSink(TOKEN, ledger, lambda: cfg, lambda: "prod-eu")
    ledger.record(0, [alert()], [sink])
    with pytest.raises(RetryableDeliveryError, match="Connection refused"):
        dispatch.deliver(ledger, sink)
    # slack-sdk tried twice (max_retries=1): a request that never left is safe to repeat.
    refused = [r for r in caplog.records if "Connection refused" in r.getMessage()]
    assert len(refused) == 2
    assert ledger.counts()[("slack", "pending")] == 1  # definitely not sent
    with SlackEmulator(token=TOKEN, port=port, channels=("#flink-alerts",)) as emu:
        assert dispatch.deliver(ledger, sink) == 0
        assert keys(emu.messages("#flink-alerts")) == ["a1:firing"]
        assert [p for p, _ in emu.requests] == ["/api/chat.postMessage"]  # nothing to ask
