"""The Slack sink the configuration asks for, and the secret it needs from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf import ConfigError, SlackConfig
from sinks import AlertLedger
from sinks.slack import SlackBotSink, slack_sink


def test_slack_sink_needs_its_secret_in_the_environment(tmp_path: Path) -> None:
    ledger = AlertLedger(tmp_path / "l.sqlite")
    cfg = SlackConfig(mode="bot", token_env="FW_TEST_TOKEN")
    with pytest.raises(ConfigError, match=r"\$FW_TEST_TOKEN \(slack.token_env\) is empty") as err:
        slack_sink(lambda: cfg, lambda: "c", ledger, env={})
    assert err.value.fields == ("slack.token_env",)
    assert slack_sink(lambda: SlackConfig(), lambda: "c", ledger, env={}) is None
    made = slack_sink(lambda: cfg, lambda: "c", ledger, env={"FW_TEST_TOKEN": "xoxb-1"})
    assert isinstance(made, SlackBotSink)
