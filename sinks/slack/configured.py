"""The Slack sink the config asks for: a bot, a webhook, or none."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from conf import ConfigError, SlackConfig
from sinks.base import DeliverySink, Runbook, builtin_runbook
from sinks.ledger import SinkMemory
from sinks.slack.lifecycle import SlackBotSink
from sinks.slack.webhook import SlackWebhookSink


def slack_sink(
    cfg: Callable[[], SlackConfig],
    cluster: Callable[[], str],
    memory: SinkMemory,
    env: Mapping[str, str] | None = None,
    runbook: Runbook = builtin_runbook,
) -> DeliverySink | None:
    """The configured Slack sink, or None when Slack is off.

    Args:
        cfg: The Slack section, read at each use.
        cluster: The cluster's name, read at each use.
        memory: Where a bot keeps its incidents' messages (the ledger).
        env: The environment the secret is read from (default: the process's).
        runbook: Each detector's and rule's runbook line (the running config's).

    Raises:
        ConfigError: the mode's secret is not in the environment (names the variable).
    """
    c = cfg()
    environ = os.environ if env is None else env
    if c.mode == "off":
        return None
    var = c.token_env if c.mode == "bot" else c.webhook_url_env
    secret = environ.get(var, "").strip()
    if not secret:
        field = "slack.token_env" if c.mode == "bot" else "slack.webhook_url_env"
        msg = f"slack.mode is {c.mode!r} but ${var} ({field}) is empty or unset"
        raise ConfigError(msg, fields=(field,))
    if c.mode == "bot":
        return SlackBotSink(secret, memory, cfg, cluster, runbook=runbook)
    return SlackWebhookSink(secret, cfg, cluster, runbook)
