"""Slack's bot mode: one message per incident, kept current until it resolves.

The bot posts one message when an incident opens and keeps it current: a related
alert joining it (see :mod:`detectors.correlation`), an escalation or a resolve
updates that message (``chat.update``) and adds a reply in its thread, so a channel
sees one line per incident, headed by its probable root cause. Every message carries
Slack message metadata with the transition's ledger key; after a crash in the middle
of a send, :meth:`SlackBotSink.confirm` looks for that key (:mod:`sinks.slack.confirm`)
instead of posting again. While Slack will not let it look (a missing scope) the send
waits: bot mode never posts a transition twice.

The incident's message (channel and ts), what was done to it from Slack and the
channels' ids are kept in the sink's memory (:class:`~sinks.ledger.SinkMemory`).
"""

from __future__ import annotations

import http.client
import logging
from collections.abc import Callable
from typing import Any

from slack_sdk.errors import SlackClientError
from slack_sdk.webhook import WebhookClient

from conf import SlackConfig
from detectors import AlertStatus, Severity
from sinks.base import (
    AmbiguousDeliveryError,
    DeliverySink,
    PermanentDeliveryError,
    RetryableDeliveryError,
    Runbook,
    Transition,
    builtin_runbook,
)
from sinks.inbound.slack_actions import IncidentActions, action_blocks, subject
from sinks.ledger import SinkMemory
from sinks.slack import confirm
from sinks.slack.channels import Channels, RouteProblem
from sinks.slack.message import esc, note_block, render_transition, reply_text
from sinks.slack.transport import SlackApi

log = logging.getLogger(__name__)

#: The metadata event type of every message the bot posts (its payload: the ledger key).
EVENT_TYPE = "flinkwatch_alert"
#: A routed channel that cannot take the message: it falls back to ``slack.channel``.
_ROUTE_ERRORS = ("channel_not_found", "not_in_channel", "is_archived")


class SlackBotSink(DeliverySink):
    """One message per incident via ``chat.postMessage``; updates and thread replies after.

    An incident whose routes ``continue`` goes to several channels: the sink of its
    ``place``-th channel (1-based, see :meth:`SlackConfig.routes_for`) keeps that
    channel's message, under its own name (``slack``, then ``slack:2``, ``slack:3``), so
    each channel's copy is delivered exactly once by the ledger like any other sink's
    (:func:`further_channels` makes the sinks of the further places). The buttons are
    on the first channel's message.
    """

    notifies = True
    #: One dispatcher thread for every Slack sink: one Slack, one rate limit, and the
    #: buttons' message updates run there too (:mod:`sinks.dispatch`).
    lane = "slack"

    def __init__(
        self,
        token: str,
        memory: SinkMemory,
        cfg: Callable[[], SlackConfig],
        cluster: Callable[[], str],
        place: int = 1,
        runbook: Runbook = builtin_runbook,
    ) -> None:
        """Create the sink; ``token`` is the bot token (a secret)."""
        c = cfg()
        self.name = "slack" if place == 1 else f"slack:{place}"
        self.place = place
        self._cfg = cfg
        self._cluster = cluster
        self._runbook = runbook
        self._max_channels = c.max_channels  # the sinks of further channels are made once
        self._token = token
        self._memory = memory
        self._api = SlackApi(token, c)
        self._channels = Channels(cfg, cluster, self._api, memory, self.name, place)

    @property
    def memory(self) -> SinkMemory:
        """Where this sink keeps its incidents' messages (:meth:`SinkMemory.recall`)."""
        return self._memory

    def _render(self, t: Transition) -> tuple[str, list[dict[str, Any]]]:
        """The message, with what was done to the incident from Slack and its buttons.

        The buttons are there while the incident is open and ``slack.interactivity_port``
        is set (without the endpoint, a press would only show the user an error).
        """
        text, blocks = render_transition(t, self._cfg(), self._cluster(), self._runbook)
        kept = self._memory.recall(self.name, f"acts:{t.incident_id}")
        acts = IncidentActions.model_validate(kept) if kept else None
        status = t.incident.status if t.incident is not None else t.alert.status
        buttons = (
            self.place == 1
            and self._cfg().interactivity_port is not None
            and status is not AlertStatus.RESOLVED
        )
        _, job_id = subject(t)
        extra = action_blocks(t.incident_id, acts, buttons=buttons, job_id=job_id)
        return text, [*blocks, *extra]

    def wants(self, t: Transition) -> bool:
        """The first channel takes every incident; a further one those its routes add."""
        return self.place == 1 or self._channels.of(t.alert) is not None

    # --- sending ---------------------------------------------------------------------

    def send(self, t: Transition) -> None:  # noqa: D102
        parent = self._memory.recall(self.name, t.incident_id)
        if parent is None:
            self._post(t)
        else:
            self._follow(t, parent)

    def _meta(self, t: Transition) -> dict[str, Any]:
        payload = {"key": t.key, "alert_id": t.alert.alert_id}
        return {"event_type": EVENT_TYPE, "event_payload": payload}

    def _post(self, t: Transition) -> None:
        """The incident's own message.

        For its first transition; or a resolve or escalation whose firing never reached
        Slack (silenced before the silence ended, refused, pruned).
        """
        text, blocks = self._render(t)
        meta = self._meta(t)
        channel = self._channels.of(t.alert)
        if channel is None:  # a reload since it was recorded took the route away
            msg = f"no route takes it to a channel number {self.place} any more"
            raise PermanentDeliveryError(msg)
        try:
            resp = self._api.call(
                "chat_postMessage", channel=channel, text=text, blocks=blocks, metadata=meta
            )
        except PermanentDeliveryError as exc:
            fallback = self._cfg().channel
            further = self.place > 1  # the incident reached its first channel already
            if further or channel == fallback or not any(e in str(exc) for e in _ROUTE_ERRORS):
                raise
            # A route to a channel that is gone, archived or without the bot must not
            # lose the alert: the default channel gets it, saying why.
            log.error("slack: route to %s failed (%s); posting to %s", channel, exc, fallback)
            note = f"(route {esc(channel)} failed: {esc(exc)}) "
            channel = fallback
            resp = self._api.call(
                "chat_postMessage",
                channel=channel,
                text=note + text,
                blocks=[note_block(note), *blocks],
                metadata=meta,
            )
        self._memory.remember(
            self.name, t.incident_id, {"channel": resp["channel"], "ts": resp["ts"]}
        )
        # Slack's read APIs want the channel id, not the name we posted to.
        self._channels.remember_id(channel, resp["channel"])

    def _follow(self, t: Transition, parent: dict[str, Any]) -> None:
        """A later transition: the incident's message updated, and a reply in its thread."""
        a = t.alert
        text, blocks = self._render(t)
        # Update the incident's message first: chat.update is idempotent, so a crash
        # after it and before the reply only repeats the update.
        try:
            self._api.call(
                "chat_update", channel=parent["channel"], ts=parent["ts"], text=text, blocks=blocks
            )
        except PermanentDeliveryError as exc:
            log.warning("slack: could not update the incident message (%s); replying only", exc)
        except AmbiguousDeliveryError as exc:
            # Nothing to confirm: the reply is not posted yet, and repeating the update
            # is harmless.
            raise RetryableDeliveryError(str(exc)) from None
        reply = reply_text(a, joined=t.incident is not None and t.incident.joined)
        # An escalation is news for the whole channel (so is a related alert that makes
        # the incident more severe); a resolve or a related alert of the same weight is not.
        broadcast = a.status is AlertStatus.ESCALATED or (
            t.incident is not None and t.incident.severity_rose
        )
        mention = self._cfg().mention_on_critical
        if broadcast and mention and a.severity is Severity.CRITICAL:
            reply = f"{mention} {reply}"
        self._api.call(
            "chat_postMessage",
            channel=parent["channel"],
            thread_ts=parent["ts"],
            text=reply[:3000],
            metadata=self._meta(t),
            reply_broadcast=broadcast,
        )

    def confirm(self, t: Transition) -> bool:
        """Look for the transition's metadata key in Slack (:func:`sinks.slack.confirm.arrived`).

        Raises:
            RetryableDeliveryError: Slack cannot be asked now, will not let us look, or
                the search is not through yet; the send waits and is asked about again.
        """
        return confirm.arrived(t, self._channels)

    def api(self, method: str, **kwargs: Any) -> Any:
        """One Web API call with this sink's client, typed as its own sends are.

        For what follows this sink's messages (the evidence chart in an incident's thread,
        :mod:`sinks.slack.chart`) and the buttons' endpoint: same token, retries and
        error classes.

        Raises:
            RetryableDeliveryError: Slack surely did not carry it out.
            AmbiguousDeliveryError: it may have been carried out.
            PermanentDeliveryError: Slack refused it.
        """
        return self._api.call(method, **kwargs)

    # --- acting from Slack (sinks.inbound.slack_actions) ---------------------------------------

    def refresh(self, incident_id: str) -> None:
        """Update the incident's message to show what was done to it (a dispatcher job).

        Renders the newest transition Slack has, so it shows what the last send showed
        plus the actions; a transition still waiting brings its own update after it.

        Raises:
            RetryableDeliveryError: Slack cannot take it now; the job is tried again.
            PermanentDeliveryError: Slack refused it.
        """
        parent = self._memory.recall(self.name, incident_id)
        t = self._memory.last_delivered(self.name, incident_id)
        if parent is None or t is None:
            return
        text, blocks = self._render(t)
        self._api.call(
            "chat_update", channel=parent["channel"], ts=parent["ts"], text=text, blocks=blocks
        )

    def respond(self, response_url: str, text: str) -> None:
        """Tell the presser alone: an ephemeral message through the press's response URL.

        Only to Slack's own hooks (or the configured ``api_url``'s host, the emulator):
        the URL comes in the request, and a verified request is still no reason to post
        elsewhere. Best effort: a failure is logged, not retried.
        """
        api = self._cfg().api_url
        trusted = ["https://hooks.slack.com/"]
        if api:
            trusted.append(api.split("/api/", 1)[0] + "/")
        if not any(response_url.startswith(t) for t in trusted):
            log.warning("slack actions: not answering through %s: not Slack's", response_url[:80])
            return
        client = WebhookClient(response_url, timeout=int(self._cfg().timeout_s))
        try:
            resp = client.send(text=text, response_type="ephemeral", replace_original=False)
        except (OSError, http.client.HTTPException, SlackClientError) as exc:
            log.warning("slack actions: reply to the presser failed: %s", self._api.scrub(exc))
            return
        if resp.status_code != 200:
            log.warning("slack actions: reply to the presser refused: HTTP %d", resp.status_code)

    # --- are the routes usable? ---------------------------------------------------------

    def check_routes(self) -> list[RouteProblem]:
        """Ask Slack whether every configured channel can take alerts; warn about each that cannot.

        Meant for when the sink starts and after a reload that changes ``slack.channel``
        or ``slack.routes``: a typo in a route otherwise shows only when an alert takes
        it (:meth:`sinks.slack.channels.Channels.check`).
        """
        return self._channels.check(self._max_channels)


def further_channels(first: DeliverySink | None) -> list[SlackBotSink]:
    """The sinks of the further channels routes with ``continue`` can add (none usual).

    As many as the config at the start allows; a reload that adds ``continue`` routes
    beyond them needs a restart (the routes past them are not taken). A webhook, or no
    Slack, has none.
    """
    if not isinstance(first, SlackBotSink):
        return []
    places = range(2, first._max_channels + 1)
    return [
        SlackBotSink(
            first._token, first.memory, first._cfg, first._cluster, place=p, runbook=first._runbook
        )
        for p in places
    ]
