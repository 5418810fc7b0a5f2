"""Slack notifications through slack-sdk: bot token (one message per incident) or webhook.

Bot mode posts one message when an incident opens and keeps it current: a related
alert joining it (see :mod:`detectors.correlation`), an escalation or a resolve
updates that message (``chat.update``) and adds a reply in its thread, so a channel
sees one line per incident, headed by its probable root cause. Every message carries
Slack message metadata with the transition's ledger key; after a crash in the
middle of a send, :meth:`SlackBotSink.confirm` looks for that key in the channel
(or the thread) instead of posting again.

Webhook mode can only post: each transition is its own message, and an
interrupted send is repeated (a webhook cannot be asked what it received).

Retries: slack-sdk's handlers retry 429 (honouring ``Retry-After``), 5xx and
connection errors ``max_retries`` times inside one send; after that the send is a
:class:`~sinks.base.RetryableDeliveryError` and the ledger keeps the transition
(and everything after it) for the dispatcher's next try.

Secrets: the token and the webhook URL come from the environment and are scrubbed
from every message this module logs or raises.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import urllib.error
from collections.abc import Callable
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.webhook import WebhookClient

from conf import SlackConfig
from detectors import REGISTRY, Alert, AlertStatus, Severity
from detectors.correlation import IncidentView
from sinks.base import (
    DeliverySink,
    PermanentDeliveryError,
    RetryableDeliveryError,
    Transition,
)
from sinks.ledger import AlertLedger

log = logging.getLogger(__name__)

#: Slack ``error`` values worth waiting out: Slack's side, or a credential an operator
#: can fix (the backlog is delivered once they do) rather than a message to drop.
_RETRYABLE_ERRORS = frozenset(
    {
        "ratelimited",
        "fatal_error",
        "internal_error",
        "service_unavailable",
        "request_timeout",
        "invalid_auth",
        "not_authed",
        "token_revoked",
        "token_expired",
        "account_inactive",
    }
)
#: A routed channel that cannot take the message: it falls back to ``slack.channel``.
_ROUTE_ERRORS = ("channel_not_found", "not_in_channel", "is_archived")
EVENT_TYPE = "flinkwatch_alert"
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{6,}$")

_ICON = {
    (AlertStatus.FIRING, Severity.CRITICAL): ":red_circle:",
    (AlertStatus.FIRING, Severity.WARNING): ":large_orange_circle:",
    (AlertStatus.FIRING, Severity.INFO): ":large_blue_circle:",
    (AlertStatus.ESCALATED, Severity.CRITICAL): ":red_circle:",
    (AlertStatus.ESCALATED, Severity.WARNING): ":large_orange_circle:",
    (AlertStatus.ESCALATED, Severity.INFO): ":large_blue_circle:",
}


def _retry_handlers(n: int) -> list[RetryHandler]:
    return [
        RateLimitErrorRetryHandler(max_retry_count=n),
        ServerErrorRetryHandler(max_retry_count=n),
        ConnectionErrorRetryHandler(max_retry_count=n),
    ]


def esc(text: object) -> str:
    """Text from logs and metrics, made inert for Slack's mrkdwn.

    Job names, thread names, hosts and reasons are written by whoever runs a job: a job
    named ``<!channel>`` must not ping the channel and ``<https://x|Runbook>`` must not
    become a link. Slack's own rule: escape ``&``, ``<`` and ``>``; everything else
    renders as text. Only the configured mention and runbook link stay raw.
    """
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _note_block(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _scalar_evidence(evidence: dict[str, Any], limit: int = 8) -> list[tuple[str, str]]:
    """The evidence numbers worth a glance: scalars only, a bounded few."""
    out = []
    for k, v in evidence.items():
        if k in ("hint", "why") or isinstance(v, dict | list) or v is None:
            continue
        out.append((esc(k), f"{v:g}" if isinstance(v, float) else esc(v)))
        if len(out) == limit:
            break
    return out


def render(
    alert: Alert, *, cluster: str, runbook_url: str | None, mention: str | None
) -> tuple[str, list[dict[str, Any]]]:
    """The fallback text and Block Kit blocks of one alert transition."""
    resolved = alert.status is AlertStatus.RESOLVED
    icon = ":large_green_circle:" if resolved else _ICON[(alert.status, alert.severity)]
    verb = {"firing": "", "escalated": " (escalated)", "resolved": " resolved"}[alert.status.value]
    where = alert.job_name or alert.job_id or alert.tm_id or alert.entity
    title = f"{alert.detector}{verb}: {where}"
    summary = esc(alert.summary)
    text = f"{icon} [{alert.severity.value.upper()}] {esc(title)} - {summary}"
    if mention and alert.severity is Severity.CRITICAL and not resolved:
        text = f"{mention} {text}"
    fields = [f"*Cluster*\n{esc(cluster)}", f"*Severity*\n{alert.severity.value}"]
    if alert.job_name or alert.job_id:
        fields.append(f"*Job*\n{esc(alert.job_name or '-')}\n`{esc(alert.job_id or '-')}`")
    if alert.tm_id or alert.host:
        tm = f"*TaskManager*\n`{esc(alert.tm_id or '-')}`\n{esc(alert.host or '')}"
        fields.append(tm.rstrip())
    fields.append(f"*{'Resolved at' if resolved else 'Since'}*\n{_when(alert.event_time_ms)}")
    blocks: list[dict[str, Any]] = [
        # plain_text is never parsed: no mention or link can hide in the header.
        {"type": "header", "text": {"type": "plain_text", "text": f"{title}"[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"{icon} {summary}"[:3000]}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f[:2000]} for f in fields]},
    ]
    numbers = _scalar_evidence(alert.evidence)
    if numbers:
        blocks.append(
            {
                "type": "section",
                "text": {
                    "type": "mrkdwn",
                    "text": "\n".join(f"• {k}: *{v}*" for k, v in numbers)[:3000],
                },
            }
        )
    detector = REGISTRY.get(alert.detector)
    todo = detector.runbook if detector is not None else ""
    if not resolved and todo:
        link = f" <{runbook_url}#{alert.detector}|Runbook>" if runbook_url else ""
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*What to do*: {todo}{link}"}}
        )
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"flinkwatch · alert `{esc(alert.alert_id)}`"}],
        }
    )
    return text[:3000], blocks


_STATUS_ICON = {
    AlertStatus.FIRING: ":red_circle:",
    AlertStatus.ESCALATED: ":red_circle:",
    AlertStatus.RESOLVED: ":large_green_circle:",
}


def render_incident(
    incident: IncidentView,
    alert: Alert,
    *,
    cluster: str,
    runbook_url: str | None,
    mention: str | None,
) -> tuple[str, list[dict[str, Any]]]:
    """The message of an incident of several alerts, as of ``alert``'s transition.

    An incident of one alert renders exactly as that alert (:func:`render`).
    """
    if len(incident.members) < 2:
        return render(alert, cluster=cluster, runbook_url=runbook_url, mention=mention)
    resolved = incident.status is AlertStatus.RESOLVED
    root = incident.root
    icon = ":large_green_circle:" if resolved else _ICON[(AlertStatus.FIRING, incident.severity)]
    where = root.job_name or root.job_id or root.tm_id or "cluster"
    more = len(incident.members) - 1
    title = f"{root.detector}{' resolved' if resolved else ''}: {where} (+{more} related)"
    headline = esc(incident.headline)
    text = f"{icon} [{incident.severity.value.upper()}] {esc(title)} - {headline}"
    if mention and incident.severity is Severity.CRITICAL and not resolved:
        text = f"{mention} {text}"
    jobs = sorted({m.job_name or m.job_id for m in incident.members if m.job_id})
    tms = sorted({m.tm_id for m in incident.members if m.tm_id})
    fields = [f"*Cluster*\n{esc(cluster)}", f"*Severity*\n{incident.severity.value}"]
    if jobs:
        fields.append("*Jobs*\n" + "\n".join(esc(j) for j in jobs[:5]))
    if tms:
        fields.append("*TaskManagers*\n" + "\n".join(f"`{esc(t)}`" for t in tms[:5]))
    since = min(m.first_ms for m in incident.members)
    fields.append(f"*Since*\n{_when(since)}")
    lines = [
        f"{_STATUS_ICON[m.status]} *{m.detector}* ({m.status.value}, {m.severity.value}): "
        f"{esc(m.summary)}"
        for m in incident.members
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"{icon} *Probable cause*: {headline}"[:3000],
            },
        },
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f[:2000]} for f in fields]},
        {"type": "section", "text": {"type": "mrkdwn", "text": "\n".join(lines)[:3000]}},
    ]
    detector = REGISTRY.get(root.detector)
    todo = detector.runbook if detector is not None else ""
    if not resolved and todo:
        link = f" <{runbook_url}#{root.detector}|Runbook>" if runbook_url else ""
        blocks.append(
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*What to do*: {todo}{link}"}}
        )
    ids = ", ".join(f"`{esc(m.alert_id)}`" for m in incident.members)
    blocks.append(
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": f"flinkwatch · incident `{esc(incident.incident_id)}` · {ids}",
                }
            ],
        }
    )
    return text[:3000], blocks


class _Secrets:
    """Scrubs secrets from text that may reach a log line or an exception."""

    def __init__(self, *secrets: str | None) -> None:
        self.secrets = [s for s in secrets if s]

    def __call__(self, text: object) -> str:
        out = str(text)
        for s in self.secrets:
            out = out.replace(s, "***")
        return out


class _ScrubFilter(logging.Filter):
    """Rewrites every record of the slack-sdk clients' logger without the known secrets."""

    def __init__(self) -> None:
        super().__init__()
        self.scrub = _Secrets()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self.scrub(record.getMessage()), ()
        return True


_SDK_FILTER = _ScrubFilter()


def _client_logger(*secrets: str) -> logging.Logger:
    """The logger handed to the slack-sdk clients.

    Their DEBUG lines carry the webhook URL and whole payloads, so it stops at INFO
    and scrubs what passes.
    """
    _SDK_FILTER.scrub.secrets.extend(s for s in secrets if s)
    logger = logging.getLogger(f"{__name__}.sdk")
    logger.setLevel(logging.INFO)
    if _SDK_FILTER not in logger.filters:
        logger.addFilter(_SDK_FILTER)
    return logger


class _SlackSink(DeliverySink):
    notifies = True

    def __init__(self, cfg: Callable[[], SlackConfig], cluster: Callable[[], str]) -> None:
        self._cfg = cfg
        self._cluster = cluster

    def _render(self, t: Transition) -> tuple[str, list[dict[str, Any]]]:
        c = self._cfg()
        kw: dict[str, Any] = {
            "cluster": self._cluster(),
            "runbook_url": c.runbook_url,
            "mention": c.mention_on_critical,
        }
        if t.incident is None:
            return render(t.alert, **kw)
        return render_incident(t.incident, t.alert, **kw)


class SlackWebhookSink(_SlackSink):
    """Posts every transition to an incoming webhook."""

    name = "slack"

    def __init__(
        self,
        url: str,
        cfg: Callable[[], SlackConfig],
        cluster: Callable[[], str],
    ) -> None:
        """Create the sink; ``url`` is the webhook URL (a secret)."""
        super().__init__(cfg, cluster)
        c = cfg()
        self._scrub = _Secrets(url)
        self._client = WebhookClient(
            url,
            timeout=int(c.timeout_s),
            retry_handlers=_retry_handlers(c.max_retries),
            logger=_client_logger(url),
        )

    def send(self, t: Transition) -> None:  # noqa: D102
        text, blocks = self._render(t)
        try:
            resp = self._client.send(text=text, blocks=blocks)
        except (urllib.error.URLError, OSError, SlackClientError) as exc:
            raise RetryableDeliveryError(self._scrub(f"webhook unreachable: {exc}")) from None
        if resp.status_code == 200:
            return
        detail = self._scrub(f"webhook answered HTTP {resp.status_code}: {resp.body[:200]}")
        if resp.status_code == 429 or resp.status_code >= 500:
            raise RetryableDeliveryError(detail)
        raise PermanentDeliveryError(detail)


class SlackBotSink(_SlackSink):
    """One message per incident via ``chat.postMessage``; updates and thread replies after."""

    name = "slack"

    def __init__(
        self,
        token: str,
        ledger: AlertLedger,
        cfg: Callable[[], SlackConfig],
        cluster: Callable[[], str],
    ) -> None:
        """Create the sink; ``token`` is the bot token (a secret)."""
        super().__init__(cfg, cluster)
        c = cfg()
        self._ledger = ledger
        self._scrub = _Secrets(token)
        self._client = WebClient(
            token=token,
            base_url=c.api_url or WebClient.BASE_URL,
            timeout=int(c.timeout_s),
            retry_handlers=_retry_handlers(c.max_retries),
            logger=_client_logger(token),
        )

    # --- sending ---------------------------------------------------------------------

    def send(self, t: Transition) -> None:  # noqa: D102
        a = t.alert
        text, blocks = self._render(t)
        meta = {"event_type": EVENT_TYPE, "event_payload": {"key": t.key, "alert_id": a.alert_id}}
        parent = self._ledger.recall(self.name, t.incident_id)
        if parent is None:
            # The incident's first transition; or a resolve or escalation whose firing
            # never reached Slack (silenced before the silence ended, refused, pruned),
            # which gets a message of its own.
            channel = self._cfg().channel_for(a.detector, a.severity)
            try:
                resp = self._call(
                    "chat_postMessage", channel=channel, text=text, blocks=blocks, metadata=meta
                )
            except PermanentDeliveryError as exc:
                fallback = self._cfg().channel
                if channel == fallback or not any(e in str(exc) for e in _ROUTE_ERRORS):
                    raise
                # A route to a channel that is gone, archived or without the bot must not
                # lose the alert: the default channel gets it, saying why.
                log.error("slack: route to %s failed (%s); posting to %s", channel, exc, fallback)
                note = f"(route {esc(channel)} failed: {exc}) "
                channel = fallback
                resp = self._call(
                    "chat_postMessage",
                    channel=channel,
                    text=note + text,
                    blocks=[_note_block(note), *blocks],
                    metadata=meta,
                )
            self._ledger.remember(
                self.name, t.incident_id, {"channel": resp["channel"], "ts": resp["ts"]}
            )
            # Slack's read APIs want the channel id, not the name we posted to.
            self._ledger.remember(self.name, f"channel:{channel}", {"id": resp["channel"]})
            return
        # Update the incident's message first: chat.update is idempotent, so a crash
        # after it and before the reply only repeats the update.
        try:
            self._call(
                "chat_update", channel=parent["channel"], ts=parent["ts"], text=text, blocks=blocks
            )
        except PermanentDeliveryError as exc:
            log.warning("slack: could not update the incident message (%s); replying only", exc)
        joined = t.incident is not None and t.incident.joined
        reply = (
            f"{a.detector} {a.status.value}: {a.summary}"
            if joined
            else (f"{a.status.value}: {a.summary}")
        )
        # An escalation is news for the whole channel (so is a related alert that makes
        # the incident more severe); a resolve or a related alert of the same weight is not.
        broadcast = a.status is AlertStatus.ESCALATED or (
            t.incident is not None and t.incident.severity_rose
        )
        mention = self._cfg().mention_on_critical
        if broadcast and mention and a.severity is Severity.CRITICAL:
            reply = f"{mention} {reply}"
        self._call(
            "chat_postMessage",
            channel=parent["channel"],
            thread_ts=parent["ts"],
            text=reply[:3000],
            metadata=meta,
            reply_broadcast=broadcast,
        )

    def _call(self, method: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._client, method)(**kwargs)
        except SlackApiError as exc:
            error = str(exc.response.get("error", "")) if exc.response is not None else ""
            status = exc.response.status_code if exc.response is not None else 0
            detail = self._scrub(f"{method}: HTTP {status} {error or exc}")
            if status == 429 or status >= 500 or error in _RETRYABLE_ERRORS:
                if error in ("invalid_auth", "not_authed", "token_revoked", "token_expired"):
                    log.error("slack: %s; fix the token, the backlog waits for it", detail)
                raise RetryableDeliveryError(detail) from None
            raise PermanentDeliveryError(detail) from None
        except (urllib.error.URLError, OSError, SlackClientError) as exc:
            raise RetryableDeliveryError(self._scrub(f"{method}: {exc}")) from None

    # --- after a crash ---------------------------------------------------------------

    def confirm(self, t: Transition) -> bool | None:
        """Look for the transition's metadata key in Slack (the thread, or the channel)."""
        a = t.alert
        parent = self._ledger.recall(self.name, t.incident_id)
        first = a.status is AlertStatus.FIRING and (t.incident is None or t.incident.opened)
        if parent is not None and not first:
            channel, method = parent["channel"], "conversations_replies"
            where: dict[str, Any] = {"ts": parent["ts"]}
        else:
            name = self._cfg().channel_for(a.detector, a.severity)
            known = self._ledger.recall(self.name, f"channel:{name}")
            if known is None and not _CHANNEL_ID.match(name):
                return None  # never posted there: no id to read the history with
            channel, method = (known or {}).get("id", name), "conversations_history"
            where = {"oldest": f"{t.recorded_ms / 1000 - 600:.6f}"}
        try:
            resp = self._call(
                method, channel=channel, include_all_metadata=True, limit=200, **where
            )
        except (RetryableDeliveryError, PermanentDeliveryError) as exc:
            log.warning("slack: cannot check whether %s arrived: %s", t.key, exc)
            return None
        for m in resp.get("messages", []):
            payload = (m.get("metadata") or {}).get("event_payload") or {}
            if payload.get("key") != t.key:
                continue
            if method == "conversations_history":
                self._ledger.remember(self.name, t.incident_id, {"channel": channel, "ts": m["ts"]})
            return True
        return False


def slack_sink(
    cfg: Callable[[], SlackConfig],
    cluster: Callable[[], str],
    ledger: AlertLedger,
    env: dict[str, str] | None = None,
) -> DeliverySink | None:
    """The configured Slack sink, or None when Slack is off.

    Raises:
        ValueError: the mode's secret is not in the environment (names the variable).
    """
    c = cfg()
    environ = os.environ if env is None else env
    if c.mode == "off":
        return None
    var = c.token_env if c.mode == "bot" else c.webhook_url_env
    secret = environ.get(var, "").strip()
    if not secret:
        msg = f"slack.mode is {c.mode!r} but ${var} is empty or unset"
        raise ValueError(msg)
    if c.mode == "bot":
        return SlackBotSink(secret, ledger, cfg, cluster)
    return SlackWebhookSink(secret, cfg, cluster)
