"""Slack's webhook mode: every transition is its own message, posted to an incoming webhook.

A webhook can only post: an interrupted send, or one whose outcome is unknown, is
repeated (a webhook cannot be asked what it received; the ledger counts it as
``resent_unconfirmed``).
"""

from __future__ import annotations

import http.client
import urllib.error
from collections.abc import Callable

from slack_sdk.errors import SlackClientError

from conf import SlackConfig
from sinks.base import (
    AmbiguousDeliveryError,
    DeliverySink,
    PermanentDeliveryError,
    RetryableDeliveryError,
    Runbook,
    Transition,
    builtin_runbook,
)
from sinks.slack.message import render_transition
from sinks.slack.transport import Secrets, webhook_client


class SlackWebhookSink(DeliverySink):
    """Posts every transition to an incoming webhook."""

    name = "slack"
    notifies = True
    #: One dispatcher thread for every Slack sink (:mod:`sinks.dispatch`).
    lane = "slack"

    def __init__(
        self,
        url: str,
        cfg: Callable[[], SlackConfig],
        cluster: Callable[[], str],
        runbook: Runbook = builtin_runbook,
    ) -> None:
        """Create the sink; ``url`` is the webhook URL (a secret)."""
        self._cfg = cfg
        self._cluster = cluster
        self._runbook = runbook
        self._scrub = Secrets(url)
        self._client = webhook_client(url, cfg())

    def send(self, t: Transition) -> None:  # noqa: D102
        text, blocks = render_transition(t, self._cfg(), self._cluster(), self._runbook)
        try:
            resp = self._client.send(text=text, blocks=blocks)
        except urllib.error.URLError as exc:
            raise RetryableDeliveryError(self._scrub(f"webhook unreachable: {exc}")) from None
        except (OSError, http.client.HTTPException) as exc:
            detail = self._scrub(f"webhook gave no answer: {type(exc).__name__}: {exc}")
            raise AmbiguousDeliveryError(detail) from None
        except SlackClientError as exc:
            raise RetryableDeliveryError(self._scrub(f"webhook: {exc}")) from None
        if resp.status_code == 200:
            return
        detail = self._scrub(f"webhook answered HTTP {resp.status_code}: {resp.body[:200]}")
        if resp.status_code == 429:
            raise RetryableDeliveryError(detail)
        if resp.status_code >= 500:
            # Possibly posted; a webhook cannot be asked, so the ledger sends it again
            # (counted as resent_unconfirmed).
            raise AmbiguousDeliveryError(detail)
        raise PermanentDeliveryError(detail)
