"""Slack notifications through slack-sdk: a bot (one message per incident) or a webhook.

* :mod:`~sinks.slack.transport`: the slack-sdk clients, retries and secrets; every
  failure typed by whether Slack may have acted.
* :mod:`~sinks.slack.lifecycle`: the bot's message of an incident, posted, updated,
  replied to in its thread (:class:`SlackBotSink`).
* :mod:`~sinks.slack.confirm`: after a crash or a send without an answer, whether the
  message is there already.
* :mod:`~sinks.slack.channels`: the channel of each of an incident's places, channel
  ids, and the route check.
* :mod:`~sinks.slack.webhook`: webhook mode (:class:`SlackWebhookSink`).
* :mod:`~sinks.slack.message`: what a message says; :mod:`~sinks.slack.chart`: the
  evidence chart in an incident's thread.

The sinks keep what they must remember (an incident's message) in the ledger through
:class:`~sinks.ledger.SinkMemory`, never the whole ledger.
"""

from sinks.slack.channels import RouteProblem
from sinks.slack.configured import slack_sink
from sinks.slack.lifecycle import EVENT_TYPE, SlackBotSink, further_channels
from sinks.slack.webhook import SlackWebhookSink

__all__ = [
    "EVENT_TYPE",
    "RouteProblem",
    "SlackBotSink",
    "SlackWebhookSink",
    "further_channels",
    "slack_sink",
]
