"""Slack notifications through slack-sdk: bot token (one message per incident) or webhook.

Bot mode posts one message when an incident opens and keeps it current: a related
alert joining it (see :mod:`detectors.correlation`), an escalation or a resolve
updates that message (``chat.update``) and adds a reply in its thread, so a channel
sees one line per incident, headed by its probable root cause. Every message carries
Slack message metadata with the transition's ledger key; after a crash in the
middle of a send, :meth:`SlackBotSink.confirm` looks for that key in the channel
(or the thread) instead of posting again. While Slack will not let it look (a missing
scope) the send waits: bot mode never posts a transition twice.

Webhook mode can only post: each transition is its own message, and an
interrupted send, or one whose outcome is unknown, is repeated (a webhook cannot be
asked what it received).

Retries: slack-sdk retries, ``max_retries`` times inside one send, only what surely
did not happen: a 429 (honouring ``Retry-After``) and a request that never reached
Slack (connecting or writing it failed). Anything else that fails is either refused
(:class:`~sinks.base.PermanentDeliveryError`), surely not done
(:class:`~sinks.base.RetryableDeliveryError`: back to pending) or possibly done (an
HTTP 5xx, ``internal_error``, a read timeout, a connection closed after the request
was written: :class:`~sinks.base.AmbiguousDeliveryError`). The last stays ``sending``
in the ledger, and the next try asks Slack (:meth:`SlackBotSink.confirm`) before
posting again, so a message Slack stored but did not acknowledge is not posted twice.

Secrets: the token and the webhook URL come from the environment and are scrubbed
from every message this module logs or raises.
"""

from __future__ import annotations

import http.client
import logging
import os
import re
import urllib.error
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.webhook import WebhookClient

from conf import ConfigError, SlackConfig
from detectors import Alert, AlertStatus, Severity
from sinks.base import (
    AmbiguousDeliveryError,
    DeliverySink,
    PermanentDeliveryError,
    RetryableDeliveryError,
    Transition,
)
from sinks.ledger import AlertLedger
from sinks.slack_actions import IncidentActions, action_blocks, subject
from sinks.slack_message import esc, note_block, render, render_incident, reply_text

log = logging.getLogger(__name__)

_AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"}
)
#: Slack ``error`` values worth waiting out that say the request was not carried out:
#: a rate limit, a truncated request, or a credential an operator can fix (the backlog
#: is delivered once they do) rather than a message to drop.
_NOT_DONE_ERRORS = frozenset({"ratelimited", "request_timeout", *_AUTH_ERRORS})
#: Slack's side failing: its docs say of internal_error and fatal_error that "some
#: aspect of the operation" may have succeeded; service_unavailable does not say.
_MAYBE_DONE_ERRORS = frozenset({"fatal_error", "internal_error", "service_unavailable"})
#: A routed channel that cannot take the message: it falls back to ``slack.channel``.
_ROUTE_ERRORS = ("channel_not_found", "not_in_channel", "is_archived")
EVENT_TYPE = "flinkwatch_alert"
_CHANNEL_ID = re.compile(r"^[CGD][A-Z0-9]{6,}$")
#: Items asked for per page of a Slack read (Slack recommends at most 200).
_PAGE = 200
#: Pages read per try of a search; the next try goes on from where this one stopped.
_MAX_PAGES = 50


class _CannotTell(Exception):
    """Slack will not say whether a message is there (a missing scope, no access)."""


class _NotThroughYet(Exception):
    """A search read its pages for this try without reaching the end; it goes on later."""


@dataclass(frozen=True, slots=True)
class RouteProblem:
    """A configured channel that cannot take alerts (see :meth:`SlackBotSink.check_routes`).

    Attributes:
        route: Where the channel is configured: ``slack.channel`` or ``slack.routes[i]``.
        channel: The channel as configured.
        problem: What is wrong: not found, archived, the bot is not a member.
    """

    route: str
    channel: str
    problem: str


def _never_sent(error: BaseException | None) -> bool:
    """True when urllib failed to connect or to write the request: nothing reached Slack.

    urllib wraps exactly the OSErrors of connecting and of writing the request in
    ``URLError`` (``AbstractHTTPHandler.do_open``); what fails while waiting for or
    reading the answer (a read timeout, a reset, a close without an answer) comes
    unwrapped, and by then Slack may have acted on the request. slack-sdk catches
    ``HTTPError`` (a ``URLError`` with an answer) itself.
    """
    return isinstance(error, urllib.error.URLError) and not isinstance(
        error, urllib.error.HTTPError
    )


class _NeverSentRetryHandler(RetryHandler):
    """Retries a request that never reached Slack, and nothing else.

    slack-sdk's ``ConnectionErrorRetryHandler`` also retries ``ConnectionResetError``
    and ``RemoteDisconnected``, which come after the request was written: Slack may
    have stored the message, and the retry posts it again.
    """

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is None and _never_sent(error)


def _retry_handlers(n: int) -> list[RetryHandler]:
    # No ServerErrorRetryHandler: after a 5xx the message may exist; the ledger asks.
    return [RateLimitErrorRetryHandler(max_retry_count=n), _NeverSentRetryHandler(n)]


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
    #: One dispatcher thread for every Slack sink: one Slack, one rate limit, and the
    #: buttons' message updates run there too (:mod:`sinks.dispatch`).
    lane = "slack"

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


class SlackBotSink(_SlackSink):
    """One message per incident via ``chat.postMessage``; updates and thread replies after.

    An incident whose routes ``continue`` goes to several channels: the sink of its
    ``place``-th channel (1-based, see :meth:`SlackConfig.routes_for`) keeps that
    channel's message, under its own name (``slack``, then ``slack:2``, ``slack:3``), so
    each channel's copy is delivered exactly once by the ledger like any other sink's.
    The buttons are on the first channel's message.
    """

    def __init__(
        self,
        token: str,
        ledger: AlertLedger,
        cfg: Callable[[], SlackConfig],
        cluster: Callable[[], str],
        place: int = 1,
    ) -> None:
        """Create the sink; ``token`` is the bot token (a secret)."""
        super().__init__(cfg, cluster)
        c = cfg()
        self.name = "slack" if place == 1 else f"slack:{place}"
        self.place = place
        self._max_channels = c.max_channels  # the sinks of further channels are made once
        self._token = token
        self._ledger = ledger
        self._scrub = _Secrets(token)
        self._client = WebClient(
            token=token,
            base_url=c.api_url or WebClient.BASE_URL,
            timeout=int(c.timeout_s),
            retry_handlers=_retry_handlers(c.max_retries),
            logger=_client_logger(token),
        )

    def _render(self, t: Transition) -> tuple[str, list[dict[str, Any]]]:
        """The message, with what was done to the incident from Slack and its buttons.

        The buttons are there while the incident is open and ``slack.interactivity_port``
        is set (without the endpoint, a press would only show the user an error).
        """
        text, blocks = super()._render(t)
        kept = self._ledger.recall(self.name, f"acts:{t.incident_id}")
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

    # --- the channels an incident goes to ----------------------------------------------

    def also(self) -> list[SlackBotSink]:
        """The sinks of the further channels routes with ``continue`` can add (none usual).

        As many as the config at the start allows; a reload that adds ``continue``
        routes beyond them needs a restart (the routes past them are not taken).
        """
        places = range(2, self._max_channels + 1)
        return [
            SlackBotSink(self._token, self._ledger, self._cfg, self._cluster, place=p)
            for p in places
        ]

    def wants(self, t: Transition) -> bool:
        """The first channel takes every incident; a further one those its routes add."""
        return self.place == 1 or self._channel(t.alert) is not None

    def _channel(self, a: Alert) -> str | None:
        """The channel of a new incident whose first alert is ``a``, here (None: none)."""
        taken = self._cfg().routes_for(a, self._cluster())
        return taken[self.place - 1][1] if len(taken) >= self.place else None

    # --- acting from Slack (sinks.slack_actions) ---------------------------------------

    def refresh(self, incident_id: str) -> None:
        """Update the incident's message to show what was done to it (a dispatcher job).

        Renders the newest transition Slack has, so it shows what the last send showed
        plus the actions; a transition still waiting brings its own update after it.

        Raises:
            RetryableDeliveryError: Slack cannot take it now; the job is tried again.
            PermanentDeliveryError: Slack refused it.
        """
        parent = self._ledger.recall(self.name, incident_id)
        t = self._ledger.last_delivered(self.name, incident_id)
        if parent is None or t is None:
            return
        text, blocks = self._render(t)
        self._call(
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
            log.warning("slack actions: reply to the presser failed: %s", self._scrub(exc))
            return
        if resp.status_code != 200:
            log.warning("slack actions: reply to the presser refused: HTTP %d", resp.status_code)

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
            channel = self._channel(a)
            if channel is None:  # a reload since it was recorded took the route away
                msg = f"no route takes it to a channel number {self.place} any more"
                raise PermanentDeliveryError(msg)
            try:
                resp = self._call(
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
                resp = self._call(
                    "chat_postMessage",
                    channel=channel,
                    text=note + text,
                    blocks=[note_block(note), *blocks],
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
        self._call(
            "chat_postMessage",
            channel=parent["channel"],
            thread_ts=parent["ts"],
            text=reply[:3000],
            metadata=meta,
            reply_broadcast=broadcast,
        )

    @property
    def ledger(self) -> AlertLedger:
        """The ledger this sink keeps its incidents' messages in (:meth:`AlertLedger.recall`)."""
        return self._ledger

    def api(self, method: str, **kwargs: Any) -> Any:
        """One Web API call with this sink's client, typed as its own sends are.

        For what follows this sink's messages (the evidence chart in an incident's thread,
        :mod:`sinks.slack_chart`): same token, retries and error classes.

        Raises:
            RetryableDeliveryError: Slack surely did not carry it out.
            AmbiguousDeliveryError: it may have been carried out.
            PermanentDeliveryError: Slack refused it.
        """
        return self._call(method, **kwargs)

    def _call(self, method: str, **kwargs: Any) -> Any:
        """One Web API call; its failure typed by what it says about the request.

        Raises:
            RetryableDeliveryError: Slack surely did not carry it out (429, auth, no
                connection); try again.
            AmbiguousDeliveryError: it may have been carried out (5xx, internal_error,
                no answer after the request was written).
            PermanentDeliveryError: Slack refused it.
        """
        try:
            return getattr(self._client, method)(**kwargs)
        except SlackApiError as exc:
            error = str(exc.response.get("error", "")) if exc.response is not None else ""
            status = exc.response.status_code if exc.response is not None else 0
            needed = exc.response.get("needed") if exc.response is not None else None
            why = f"{error} (needs {needed})" if needed else error
            detail = self._scrub(f"{method}: HTTP {status} {why or exc}")
            if status == 429 or error in _NOT_DONE_ERRORS:
                if error in _AUTH_ERRORS:
                    log.error("slack: %s; fix the token, the backlog waits for it", detail)
                raise RetryableDeliveryError(detail) from None
            if status >= 500 or error in _MAYBE_DONE_ERRORS:
                raise AmbiguousDeliveryError(detail) from None
            raise PermanentDeliveryError(detail) from None
        except urllib.error.URLError as exc:
            raise RetryableDeliveryError(self._scrub(f"{method}: {exc}")) from None
        except (OSError, http.client.HTTPException) as exc:
            detail = self._scrub(f"{method}: no answer: {type(exc).__name__}: {exc}")
            raise AmbiguousDeliveryError(detail) from None
        except SlackClientError as exc:
            raise RetryableDeliveryError(self._scrub(f"{method}: {exc}")) from None

    # --- are the routes usable? ---------------------------------------------------------

    def check_routes(self) -> list[RouteProblem]:
        """Ask Slack whether every configured channel can take alerts; warn about each that cannot.

        Meant for when the sink starts and after a reload that changes ``slack.channel``
        or ``slack.routes``: a typo in a route otherwise shows only when an alert takes
        it. Uses ``auth.test``, ``conversations.list`` (for channels given by name) and
        ``conversations.info``. What the token has no scope for is skipped and noted at
        info; a Slack that cannot be reached is noted and nothing is checked.

        Returns:
            The problems, in configuration order; each is also logged as a warning that
            names the route.
        """
        c = self._cfg()
        if c.max_channels > self._max_channels:
            log.warning(
                "slack: routes with continue now take an incident to up to %d channels, but "
                "flinkwatch started with %d: restart it to add the others",
                c.max_channels,
                self._max_channels,
            )
        where = [("slack.channel", c.channel)]
        where += [(f"slack.routes[{i}]", r.channel) for i, r in enumerate(c.routes)]
        try:
            self._call("auth_test")
            problem_of = self._channel_problems(sorted({ch for _, ch in where}))
        except RetryableDeliveryError as exc:
            log.warning("slack: cannot check the routes now (%s)", exc)
            return []
        except PermanentDeliveryError as exc:
            log.warning("slack: auth.test refused (%s); routes not checked", exc)
            return []
        out = [RouteProblem(r, ch, why) for r, ch in where if (why := problem_of.get(ch))]
        for p in out:
            if p.route == "slack.channel":
                then = "alerts routed nowhere else cannot be delivered"
            elif problem_of.get(c.channel):
                then = f"its alerts cannot be delivered ({c.channel} cannot take them either)"
            else:
                then = f"its alerts go to {c.channel} instead"
            log.warning("slack: route %s (%s): %s; %s", p.route, p.channel, p.problem, then)
        if not out:
            total = len({ch for _, ch in where})
            log.info("slack: routes checked: %d of %d channel(s) fine", len(problem_of), total)
        return out

    def _channel_problems(self, channels: list[str]) -> dict[str, str | None]:
        """What is wrong with each channel Slack let us look at (None: nothing).

        A channel the token has no scope to look at is absent.
        """
        ids: dict[str, str | None] = {ch: ch for ch in channels if _CHANNEL_ID.match(ch)}
        names = [ch for ch in channels if ch not in ids]
        if names:
            try:
                found = self._lookup(names)
            except (PermanentDeliveryError, _CannotTell) as exc:
                log.info("slack: cannot look channel names up (%s); not checked: %s", exc, names)
            else:
                ids.update({n: found.get(n) for n in names})
        out: dict[str, str | None] = {}
        for ch, cid in ids.items():
            if cid is None:
                out[ch] = "channel not found (or private without the bot)"
                continue
            try:
                info = self._call("conversations_info", channel=cid)["channel"]
            except PermanentDeliveryError as exc:
                if "channel_not_found" in str(exc):
                    out[ch] = "channel not found"
                elif "missing_scope" in str(exc):
                    log.info("slack: cannot check %s (%s)", ch, exc)
                else:
                    out[ch] = str(exc)
                continue
            if info.get("is_archived"):
                out[ch] = "channel is archived"
            elif info.get("is_member") is False:
                out[ch] = (
                    "the bot is not a member (posts fail with not_in_channel unless the "
                    "app has chat:write.public)"
                )
            else:
                out[ch] = None
        return out

    # --- after a crash, or a send without an answer ------------------------------------

    def confirm(self, t: Transition) -> bool:
        """Look for the transition's metadata key in Slack (the thread, or the channel).

        Pages through ``conversations.replies`` / ``conversations.history`` by cursor: in
        a busy channel the message can be far from the newest. A try reads at most
        ``_MAX_PAGES`` pages; the cursor is kept in the ledger and the next try goes on
        from it, so a long search ends however busy the channel.

        Returns:
            True if found, False if surely not there. Never "cannot tell": bot mode does
            not post what may be there already.

        Raises:
            RetryableDeliveryError: Slack cannot be asked now (down, rate limited), will
                not let us look (a missing scope, no access: logged as an error), or the
                search is not through yet. The ledger keeps the send ``sending`` and it,
                with everything behind it, waits and asks again.
        """
        try:
            return self._find(t)
        except _NotThroughYet as exc:
            log.info("slack: %s not found yet (%s); the search goes on at the next try", t.key, exc)
            msg = f"confirming {t.key}: {exc}; going on at the next try"
            raise RetryableDeliveryError(msg) from None
        except _CannotTell as exc:
            log.error(
                "slack: cannot check whether %s arrived (%s); it and the transitions after it "
                "wait rather than risk a second post: grant the token channels:history "
                "(groups:history for a private channel) and channels:read, or configure "
                "channels by id",
                t.key,
                exc,
            )
            msg = f"cannot confirm {t.key}: {exc}"
            raise RetryableDeliveryError(msg) from None

    def _find(self, t: Transition) -> bool:
        a = t.alert
        parent = self._ledger.recall(self.name, t.incident_id)
        first = a.status is AlertStatus.FIRING and (t.incident is None or t.incident.opened)
        if parent is not None and not first:
            found = self._search(t, "conversations_replies", parent["channel"], ts=parent["ts"])
            return found is not None
        # A message of its own: in its routed channel, or in the default channel the
        # send fell back to when the route failed.
        c = self._cfg()
        oldest = f"{t.recorded_ms / 1000 - 600:.6f}"  # 10 min of slack for clock skew
        unknown: list[str] = []
        routed = self._channel(a)
        names = [routed] if routed is not None else []
        if self.place == 1:
            names.append(c.channel)
        for name in dict.fromkeys(names):
            try:
                channel = self._channel_id(name)
                ts = (
                    None
                    if channel is None
                    else self._search(t, "conversations_history", channel, oldest=oldest)
                )
            except _CannotTell as exc:
                unknown.append(f"{name}: {exc}")
                continue
            if channel is not None and ts is not None:
                self._ledger.remember(self.name, t.incident_id, {"channel": channel, "ts": ts})
                return True
        if unknown:
            raise _CannotTell("; ".join(unknown))
        return False

    def _search(self, t: Transition, method: str, channel: str, **where: str) -> str | None:
        """The ts of the message carrying ``t``'s key, following the cursor; None if absent.

        Reads at most ``_MAX_PAGES`` pages per call. The message, if it arrived, was
        stored before the first page was read, so a search that goes on later from its
        cursor still passes it (newer messages come before the first page of the history
        and after the thread's end, never between two pages).

        Raises:
            _CannotTell: Slack refused the read.
            _NotThroughYet: ``_MAX_PAGES`` pages read; the cursor is kept for the next call.
        """
        memo = f"search:{t.key}:{method}:{channel}"
        kept = self._ledger.recall(self.name, memo)
        cursor: str | None = kept["cursor"] if kept else None
        for _ in range(_MAX_PAGES):
            try:
                resp = self._call(
                    method,
                    channel=channel,
                    include_all_metadata=True,
                    limit=_PAGE,
                    cursor=cursor,
                    **where,
                )
            except PermanentDeliveryError as exc:
                if cursor is not None and "invalid_cursor" in str(exc):
                    cursor = None  # a kept cursor Slack no longer takes: start over
                    continue
                if method == "conversations_history" and "channel_not_found" in str(exc):
                    self._ledger.forget(self.name, memo)
                    return None  # no such channel: nothing can have arrived there
                raise _CannotTell(str(exc)) from None
            for m in resp.get("messages", []):
                payload = (m.get("metadata") or {}).get("event_payload") or {}
                if payload.get("key") == t.key:
                    self._ledger.forget(self.name, memo)
                    return str(m["ts"])
            cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None:
                self._ledger.forget(self.name, memo)
                return None
        self._ledger.remember(self.name, memo, {"cursor": cursor})
        msg = f"{method}: {_MAX_PAGES} pages of {_PAGE} read, not through yet"
        raise _NotThroughYet(msg)

    def _channel_id(self, name: str) -> str | None:
        """Slack's id of a configured channel (read APIs want it); None if there is none.

        Raises:
            _CannotTell: the token may not list channels.
        """
        known = self._ledger.recall(self.name, f"channel:{name}")
        if known is not None:
            return str(known["id"])
        if _CHANNEL_ID.match(name):
            return name
        try:
            found = self._lookup([name])
        except PermanentDeliveryError as exc:
            raise _CannotTell(str(exc)) from None
        return found.get(name)

    def _lookup(self, names: list[str]) -> dict[str, str]:
        """Channel ids by configured name, from ``conversations.list`` (remembered).

        Names not in the list are absent: no such channel, or a private one the bot is
        not in; either way the bot cannot post there.

        Raises:
            _CannotTell: the list is longer than ``_MAX_PAGES`` pages and a name is not
                on them.
        """
        wanted = {n.removeprefix("#"): n for n in names}
        found: dict[str, str] = {}
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            resp = self._call(
                "conversations_list",
                types="public_channel,private_channel",
                limit=_PAGE,
                cursor=cursor,
            )
            for ch in resp.get("channels", []):
                name = wanted.get(str(ch.get("name")))
                if name is not None:
                    found[name] = str(ch["id"])
                    self._ledger.remember(self.name, f"channel:{name}", {"id": found[name]})
            cursor = (resp.get("response_metadata") or {}).get("next_cursor") or None
            if cursor is None or len(found) == len(wanted):
                return found
        msg = f"conversations_list: {sorted(set(names) - set(found))} not within {_MAX_PAGES} pages"
        raise _CannotTell(msg)


def slack_sink(
    cfg: Callable[[], SlackConfig],
    cluster: Callable[[], str],
    ledger: AlertLedger,
    env: Mapping[str, str] | None = None,
) -> DeliverySink | None:
    """The configured Slack sink, or None when Slack is off.

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
        return SlackBotSink(secret, ledger, cfg, cluster)
    return SlackWebhookSink(secret, cfg, cluster)
