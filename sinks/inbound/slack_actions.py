"""Acting on an incident from Slack: the incident message's buttons, and the endpoint they call.

The bot's incident message carries four buttons (when ``slack.interactivity_port`` is set):

- **Acknowledge**: the message shows who, and when; a second press (anyone's) changes
  nothing and tells the presser who was first.
- **Silence this job 1 h / 4 h**: a silence of ``job_id=<the incident's job>`` in the
  command line's :class:`~sinks.silence_store.SilenceStore`, exactly as
  ``flinkwatch silence add job_id=<id> --duration 1h`` adds it, with a comment naming
  Slack and the presser. It is judged like the command line's: from when it is stored.
- **Resolve as noise**: counted as a false alarm of the incident's root detector
  (``flinkwatch_false_alarms_total{detector}``) and shown on the message. It hides
  nothing: later transitions page as before.

Slack sends a press to the app's interactivity request URL: a form-encoded ``payload=``
JSON, signed with the app's signing secret (``X-Slack-Signature``: v0 HMAC-SHA256 of
``v0:{X-Slack-Request-Timestamp}:{body}``). :class:`SlackActions` refuses, with 401, a
request whose signature does not verify (slack-sdk's
:class:`~slack_sdk.signature.SignatureVerifier`) or whose timestamp is more than five
minutes off (a replay), and with 400 a payload it cannot read; each is counted
(``flinkwatch_slack_actions_total{outcome}``) and nothing is done.

Who may press: a signed press is carried out only from the bot's own workspace and
organisation (``auth.test``, asked once), by a member of it (a Slack Connect user of
another organisation only if ``slack.actions.allowed_teams`` lists their workspace), on
the incident's own message (the channel and ts the ledger recorded when it was posted),
and, when ``slack.actions.allowed_users``/``allowed_usergroups`` are set, by a user they
admit (groups read with ``usergroups.users.list``, kept a while). Anything else is
answered 200 as Slack expects, the presser is told why through the response URL, and it is
counted (``flinkwatch_slack_actions_refused_total{reason}``); nothing is done.

Idempotence: what was done to an incident is one record in the ledger
(``acts:<incident_id>``), read, changed and written in one transaction, so presses are
judged one after the other whatever threads they arrive on. A silence press is recorded
first, with the silence's id, and the silence is added under that id once the record is
committed, outside the ledger's lock; if it cannot be added, the press is taken back.
So no silence stands without its press recorded, and a press the ledger could not record
adds none. A press Slack sends again (same user, button and ``action_ts``) is recognised
and does nothing.

The answer to Slack goes back at once (Slack wants it within 3 s); the message update
(``chat.update``) and any note to the presser (an ephemeral reply through the press's
``response_url``) are jobs of the Slack :class:`~sinks.dispatch.Dispatcher`'s thread, so
they never run in the detect micro-batch and never race a transition's own update.

Example:
    >>> actions = SlackActions(bot, ledger, silences_path, dispatcher, secret)  # doctest: +SKIP
    >>> server = actions.serve("0.0.0.0", 9260)  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import os
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs
from wsgiref.types import StartResponse, WSGIEnvironment

from pydantic import BaseModel, ConfigDict
from slack_sdk.signature import Clock, SignatureVerifier

from conf import ConfigError, SlackConfig
from conf.destinations import SlackActionsConfig
from conf.silences import parse_matchers
from sinks.base import Transition
from sinks.dispatch import Dispatcher
from sinks.inbound.http_server import AppServer, serve_app
from sinks.inbound.slack_access import PressAccess, Refused
from sinks.ledger import LedgerError, SinkMemory
from sinks.silence_store import SilenceStore, new_silence_id

log = logging.getLogger(__name__)

ACK = "flinkwatch_ack"
SILENCE_1H = "flinkwatch_silence_1h"
SILENCE_4H = "flinkwatch_silence_4h"
NOISE = "flinkwatch_noise"
#: The ``block_id`` of the buttons' block.
ACTIONS_BLOCK = "flinkwatch_actions"
#: How long each silence button silences.
SILENCE_FOR = {SILENCE_1H: dt.timedelta(hours=1), SILENCE_4H: dt.timedelta(hours=4)}
_ACTIONS = frozenset({ACK, NOISE, *SILENCE_FOR})
#: The path Slack posts presses to (the app's request URL ends with it).
PATH = "/slack/actions"
#: Slack's own replay window: a request timestamped further from now is refused.
REPLAY_WINDOW_S = 300
#: The largest request read. A press carries the whole message it was pressed on; ours
#: are a few kB (Slack caps a message's blocks at 50 of at most 3000 characters each).
MAX_BODY_BYTES = 256 * 1024
#: Presses remembered per incident to know a retry from a new press.
_CLICKS_KEPT = 32
#: The buttons whose first press wins: the field of :class:`IncidentActions` each sets,
#: and how a later presser is told.
_FIRST_WINS = {ACK: ("acknowledged", "acknowledged"), NOISE: ("noise", "resolved as noise")}
#: A silence already in force that ends no earlier than this before the asked end covers it.
_COVERED_MS = 5 * 60 * 1000
#: Slack user ids (``U…``, ``W…`` on Enterprise Grid): what may go raw into ``<@…>``.
_USER = re.compile(r"^[UW][A-Z0-9]{2,30}$")
_WARN_EVERY_S = 60.0
#: A request timestamp: epoch seconds, ASCII digits (re's \d would take any Unicode digit).
_TIMESTAMP = re.compile(r"[0-9]{1,12}")
#: A request signature: ``v0=`` and a hex digest (a later version would be ASCII too).
_SIGNATURE = re.compile(r"v[0-9]{1,3}=[0-9a-fA-F]{1,128}")
_LENGTH = re.compile(r"[0-9]{1,9}")


def utc_text(ms: int) -> str:
    """Epoch milliseconds as ``2026-11-22 03:58:56 UTC``."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Acted(_Frozen):
    """Someone did something: their Slack user id, and when (epoch ms)."""

    user: str
    at_ms: int


class SlackSilence(_Frozen):
    """A silence added from Slack: the store's id, who, when, until when, and of which job."""

    id: str
    user: str
    at_ms: int
    ends_ms: int
    job_id: str


class IncidentActions(_Frozen):
    """What was done to one incident from Slack (kept in the ledger as ``acts:<incident>``).

    Attributes:
        acknowledged: The first Acknowledge.
        noise: The first Resolve as noise.
        silences: Silences added, oldest first.
        clicks: The latest presses seen (``user:action:action_ts``), so that one Slack
            sends again does nothing a second time.
    """

    acknowledged: Acted | None = None
    noise: Acted | None = None
    silences: tuple[SlackSilence, ...] = ()
    clicks: tuple[str, ...] = ()

    def notes(self) -> list[str]:
        """One mrkdwn line per thing done, for the message."""
        out = []
        if self.acknowledged is not None:
            a = self.acknowledged
            out.append(f":white_check_mark: Acknowledged by <@{a.user}> at {utc_text(a.at_ms)}")
        if self.silences:
            s = max(self.silences, key=lambda x: x.ends_ms)
            out.append(
                f":no_bell: Job `{s.job_id}` silenced by <@{s.user}> until "
                f"{utc_text(s.ends_ms)} (`{s.id}`)"
            )
        if self.noise is not None:
            n = self.noise
            out.append(
                f":wastebasket: Resolved as noise by <@{n.user}> at {utc_text(n.at_ms)} "
                "(counted as a false alarm; later transitions still page)"
            )
        return out


def _button(
    action_id: str, text: str, incident_id: str, style: str | None = None
) -> dict[str, Any]:
    button: dict[str, Any] = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        "value": incident_id,
    }
    if style:
        button["style"] = style
    return button


def action_blocks(
    incident_id: str, acts: IncidentActions | None, *, buttons: bool, job_id: str | None
) -> list[dict[str, Any]]:
    """The blocks an incident message gets from its actions: what was done, and the buttons.

    Args:
        incident_id: Each button's value: which incident a press is about.
        acts: What was done so far (None: nothing).
        buttons: Show the buttons (not on a resolved incident).
        job_id: The job the silence buttons silence; None: no silence buttons.
    """
    out: list[dict[str, Any]] = []
    notes = acts.notes() if acts is not None else []
    if notes:
        text = "\n".join(notes)[:3000]
        out.append({"type": "context", "elements": [{"type": "mrkdwn", "text": text}]})
    if buttons:
        elements = [_button(ACK, "Acknowledge", incident_id, "primary")]
        if job_id:
            elements.append(_button(SILENCE_1H, "Silence this job 1 h", incident_id))
            elements.append(_button(SILENCE_4H, "Silence this job 4 h", incident_id))
        elements.append(_button(NOISE, "Resolve as noise", incident_id, "danger"))
        out.append({"type": "actions", "block_id": ACTIONS_BLOCK, "elements": elements})
    return out


def subject(t: Transition) -> tuple[str, str | None]:
    """The detector a false alarm counts against and the job a silence covers.

    Both are the incident's root's: the root is what the message pages about.
    """
    if t.incident is not None:
        root = t.incident.root
        return root.detector, root.job_id
    return t.alert.detector, t.alert.job_id


class MalformedPressError(ValueError):
    """A request that verified but is not a press on one of our buttons."""


@dataclass(frozen=True)
class Press:
    """One button press, as read from Slack's ``block_actions`` payload."""

    user: str
    action_id: str
    incident_id: str
    action_ts: str
    response_url: str | None
    #: Where it was pressed: the workspace (``team.id``), the presser's own workspace
    #: (``user.team_id``: another for a Slack Connect user of another organisation), the
    #: Enterprise Grid organisation and whether the app is installed org-wide, the
    #: channel and the message. None where the payload does not say.
    team_id: str | None = None
    user_team_id: str | None = None
    enterprise_id: str | None = None
    enterprise_install: bool = False
    channel_id: str | None = None
    message_ts: str | None = None

    @property
    def click(self) -> str:
        """What Slack sends again unchanged when it retries this press."""
        return f"{self.user}:{self.action_id}:{self.action_ts}"


def parse_press(body: bytes) -> Press:
    """Read a press from the form-encoded body Slack posts.

    Raises:
        MalformedPressError: not a ``block_actions`` payload with one of our buttons.
    """
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True, max_num_fields=8)
        (raw,) = form["payload"]
        payload = json.loads(raw)
        if payload["type"] != "block_actions":
            msg = f"payload type {payload['type']!r}, not block_actions"
            raise MalformedPressError(msg)
        presser = payload["user"]
        user = presser["id"]
        action = payload["actions"][0]
        action_id, value, action_ts = action["action_id"], action["value"], action["action_ts"]
        response_url = payload.get("response_url")
    except MalformedPressError:
        raise
    except (UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError, RecursionError) as exc:
        # RecursionError: JSON nested deeper than the parser goes (the body may be 256 KiB).
        msg = f"not a block_actions payload: {type(exc).__name__}: {exc}"
        raise MalformedPressError(msg) from None
    if not isinstance(user, str) or not _USER.match(user):
        msg = f"user id {user!r} is not a Slack user id"
        raise MalformedPressError(msg)
    if action_id not in _ACTIONS or not isinstance(value, str) or not value:
        msg = f"action {action_id!r} is not one of flinkwatch's buttons"
        raise MalformedPressError(msg)
    if not isinstance(response_url, str | None):
        msg = "response_url is not a string"
        raise MalformedPressError(msg)
    container = _field(payload, "container")
    return Press(
        user,
        action_id,
        value[:200],
        str(action_ts)[:40],
        response_url,
        team_id=_text(_field(payload, "team").get("id")),
        user_team_id=_text(presser.get("team_id")),
        enterprise_id=_text(_field(payload, "enterprise").get("id")),
        enterprise_install=payload.get("is_enterprise_install") is True,
        channel_id=_text(_field(payload, "channel").get("id"))
        or _text(container.get("channel_id")),
        message_ts=_text(container.get("message_ts"))
        or _text(_field(payload, "message").get("ts")),
    )


def _field(payload: Any, key: str) -> dict[str, Any]:
    """A payload's object field; {} when absent, null or not an object."""
    value = payload.get(key)
    return value if isinstance(value, dict) else {}


def _text(value: Any) -> str | None:
    """A short string field as it came (None: absent or not a string)."""
    return value[:100] if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Verdict:
    """What a press comes to.

    Attributes:
        acts: What was done to the incident, after the press.
        outcome: ``acted`` (it changed something) or ``repeated`` (it did not).
        reply: A note for the presser alone (None: the message says it all).
        silence_until: Add a silence ending then (epoch ms).
    """

    acts: IncidentActions
    outcome: str
    reply: str | None = None
    silence_until: int | None = None


def decide(
    acts: IncidentActions,
    press: Press,
    now_ms: int,
    *,
    job_id: str | None,
    live: Callable[[str], bool],
) -> Verdict:
    """What a press does to an incident's actions (pure; the caller adds the silence).

    Args:
        acts: What was done so far.
        press: The press.
        now_ms: Now.
        job_id: The job a silence would cover (None: the incident names no job).
        live: Whether the silence of that id is still in force (not expired by hand).
    """
    if press.click in acts.clicks:
        return Verdict(acts, "repeated")  # Slack sending the same press again
    seen = acts.model_copy(update={"clicks": (*acts.clicks, press.click)[-_CLICKS_KEPT:]})
    if press.action_id in _FIRST_WINS:
        field, done = _FIRST_WINS[press.action_id]
        first: Acted | None = getattr(acts, field)
        if first is not None:
            told = f"Already {done} by <@{first.user}> at {utc_text(first.at_ms)}."
            return Verdict(seen, "repeated", told)
        return Verdict(
            seen.model_copy(update={field: Acted(user=press.user, at_ms=now_ms)}), "acted"
        )
    if job_id is None:
        text = (
            "This incident names no job to silence; use `flinkwatch silence add` with its "
            "tm_id or host instead."
        )
        return Verdict(seen, "repeated", text)
    until = now_ms + int(SILENCE_FOR[press.action_id].total_seconds() * 1000)
    for s in acts.silences:
        if s.job_id == job_id and s.ends_ms >= until - _COVERED_MS and live(s.id):
            text = (
                f"Job `{job_id}` is silenced already, by <@{s.user}> until "
                f"{utc_text(s.ends_ms)} (`{s.id}`)."
            )
            return Verdict(seen, "repeated", text)
    return Verdict(seen, "acted", silence_until=until)


class IncidentMessages(Protocol):
    """What the endpoint needs of the Slack bot sink (:class:`~sinks.slack.SlackBotSink`)."""

    name: str

    def refresh(self, incident_id: str) -> None:
        """Render the incident's message again, with what was done to it."""

    def respond(self, response_url: str, text: str) -> None:
        """Tell the presser alone (an ephemeral message through the press's response URL)."""

    def api(self, method: str, **kwargs: Any) -> Any:
        """One Web API call with the bot's token (``auth_test``, ``usergroups_users_list``).

        Raises:
            DeliveryError: Slack refused it, or could not be asked.
        """


class _Clock(Clock):
    def __init__(self, now_s: Callable[[], float]) -> None:
        self._now_s = now_s

    def now(self) -> float:
        return self._now_s()


class SlackActions:
    """Verifies and carries out presses of the incident message's buttons.

    Args:
        messages: The Slack bot sink: refreshes messages, answers presses.
        ledger: Where the incidents' messages and what was done to them are kept.
        silences_path: The command line's silence store (``output.silences_path``).
        dispatcher: Runs the message updates and replies, in its thread.
        signing_secret: The Slack app's signing secret.
        clock_s: Wall-clock seconds (injected in tests).
        access: Who may press (``slack.actions``), read at each press.
    """

    def __init__(
        self,
        messages: IncidentMessages,
        ledger: SinkMemory,
        silences_path: Path,
        dispatcher: Dispatcher,
        signing_secret: str,
        clock_s: Callable[[], float] = time.time,
        *,
        access: Callable[[], SlackActionsConfig] = SlackActionsConfig,
    ) -> None:
        self.messages = messages
        self.ledger = ledger
        self.silences_path = Path(silences_path)
        self.dispatcher = dispatcher
        self.clock_s = clock_s
        self._verifier = SignatureVerifier(signing_secret, _Clock(clock_s))
        self._lock = threading.Lock()
        #: Requests by outcome (:data:`~sinks.prometheus.SLACK_ACTION_OUTCOMES`).
        self.outcomes: Counter[str] = Counter()
        #: Presses of Resolve as noise, by the incident's root detector.
        self.false_alarms: Counter[str] = Counter()
        #: Signed presses refused, by reason (:data:`~sinks.prometheus.SLACK_ACTION_REFUSALS`).
        self.refusals: Counter[str] = Counter()
        self._warned_at = -math.inf
        self._gate = PressAccess(messages.api, access)

    # --- one request ----------------------------------------------------------------

    def handle(self, headers: Mapping[str, str], body: bytes) -> tuple[int, str]:
        """Answer one request: (HTTP status, text). Never raises.

        ``headers`` are keyed in lower case. Every request an attacker can shape is
        answered on purpose (401, 400); a fault of our own left among them is answered 500
        and counted as ``error``, its traceback logged at most once a minute.
        """
        try:
            return self._handle(headers, body)
        except Exception as exc:  # noqa: BLE001 - the promise: a request never raises
            self._count("error")
            self._warn(f"a request failed: {type(exc).__name__}: {exc}", exc_info=True)
            return 500, "internal error\n"

    def _handle(self, headers: Mapping[str, str], body: bytes) -> tuple[int, str]:
        refused = self._refusal(headers, body)
        if refused is not None:
            outcome, why = refused
            self._count(outcome)
            self._warn(f"refused a request ({outcome}): {why}")
            return 401, f"{why}\n"
        try:
            press = parse_press(body)
        except MalformedPressError as exc:
            self._count("malformed")
            self._warn(f"refused a signed request: {exc}")
            return 400, f"{exc}\n"
        try:
            outcome = self._act(press)
        except Refused as no:
            # Slack's own request, answered 200 as every press is; the presser is told why
            # through the response URL (Slack shows nothing of a block_actions answer).
            with self._lock:
                self.refusals[no.reason] += 1
            self._count("refused")
            self._warn(f"refused a press ({no.reason}) by {press.user}: {no.why}")
            self._respond(press, f"{no.why}: nothing done.")
            return 200, f"refused ({no.reason}): {no.why}\n"
        except (LedgerError, sqlite3.Error, OSError) as exc:
            self._count("error")
            log.error("slack actions: %s on %s failed: %s", press.action_id, press.incident_id, exc)
            return 500, "could not record the action; press again\n"
        self._count(outcome)
        return 200, ""

    def _refusal(self, headers: Mapping[str, str], body: bytes) -> tuple[str, str] | None:
        """(outcome, why) when the request is not Slack's, or not now; None when it is."""
        ts = headers.get("x-slack-request-timestamp")
        signature = headers.get("x-slack-signature")
        if not ts or not signature:
            return "forged", "unsigned (no X-Slack-Signature or X-Slack-Request-Timestamp)"
        # Not str.isdigit(): '²' is a digit to it and int('²') raises; nor thousands of
        # digits, which int() refuses. Both would answer 500 with a traceback.
        if not _TIMESTAMP.fullmatch(ts):
            return "forged", f"X-Slack-Request-Timestamp {ts[:20]!r} is not a number"
        if not _SIGNATURE.fullmatch(signature):
            # hmac.compare_digest raises on a non-ASCII str; no real signature is one.
            return "forged", f"X-Slack-Signature {signature[:20]!r} is not a v0 signature"
        # Checked apart from the signature so the metric tells a replay from a forgery.
        if abs(self.clock_s() - int(ts)) > REPLAY_WINDOW_S:
            return "stale", f"timestamp {ts} is more than {REPLAY_WINDOW_S} s from now"
        if not self._verifier.is_valid(body=body, timestamp=ts, signature=signature):
            return "forged", "the signature does not verify (wrong signing secret?)"
        return None

    # --- carrying a press out ---------------------------------------------------------

    def _act(self, press: Press) -> str:
        self._gate.check_origin(press)
        name = self.messages.name
        t = self.ledger.last_delivered(name, press.incident_id)
        parent = self.ledger.recall(name, press.incident_id)
        if t is None or parent is None:
            if press.response_url:
                text = (
                    f"flinkwatch no longer knows incident `{press.incident_id}` (forgotten after "
                    "output.ledger_retention_days, or posted by another flinkwatch): nothing done."
                )
                self._respond(press, text)
            return "unknown_incident"
        self._gate.check_message(press, parent)
        self._gate.check_user(press)
        detector, job_id = subject(t)
        now_ms = int(self.clock_s() * 1000)
        verdicts: list[Verdict] = []
        planned = new_silence_id()
        # The store is read and written outside the ledger's transaction: a store busy
        # for seconds (`flinkwatch silence add` holds its lock) must not hold the ledger,
        # which every micro-batch and the dispatcher write to.
        store = SilenceStore(self.silences_path)
        try:
            live = {s.id for s in store.listing(now_ms)}

            def change(before: dict[str, Any] | None) -> dict[str, Any]:
                acts = IncidentActions.model_validate(before or {})
                v = decide(acts, press, now_ms, job_id=job_id, live=live.__contains__)
                acts = v.acts
                if v.silence_until is not None and job_id is not None:
                    # Recorded first, under the id it is added with once this commits:
                    # no silence stands without its press recorded (see _add_silence).
                    added = SlackSilence(
                        id=planned,
                        user=press.user,
                        at_ms=now_ms,
                        ends_ms=v.silence_until,
                        job_id=job_id,
                    )
                    acts = acts.model_copy(update={"silences": (*acts.silences, added)})
                verdicts.append(Verdict(acts, v.outcome, v.reply, v.silence_until))
                return acts.model_dump()

            self.ledger.amend(name, f"acts:{press.incident_id}", change)
            verdict = verdicts[-1]
            if verdict.silence_until is not None and job_id is not None:
                self._add_silence(store, press, job_id, planned, now_ms, verdict.silence_until)
        finally:
            store.close()
        if verdict.outcome == "acted":
            log.info(
                "slack actions: %s on incident %s by %s",
                press.action_id,
                press.incident_id,
                press.user,
            )
            if press.action_id == NOISE:
                with self._lock:
                    self.false_alarms[detector] += 1
            refresh = self.messages.refresh
            self.dispatcher.submit(
                f"refresh:{press.incident_id}", lambda: refresh(press.incident_id)
            )
        if verdict.reply is not None:
            self._respond(press, verdict.reply)
        return verdict.outcome

    def _add_silence(
        self,
        store: SilenceStore,
        press: Press,
        job_id: str,
        silence_id: str,
        now_ms: int,
        until: int,
    ) -> None:
        """Add the silence a recorded press asked for; take the press back if it cannot be.

        Raises:
            sqlite3.Error: the store could not add it (busy past its timeout, a full
                disk); the press is no longer recorded, so pressing again adds it.
            OSError: the same, from the file system.
        """
        try:
            store.add(
                parse_matchers([f"job_id={job_id}"]),
                (f"job_id={job_id}",),
                now_ms,
                until,
                f"from Slack: {_label(press.action_id)} pressed by <@{press.user}> "
                f"on incident {press.incident_id}",
                f"slack:{press.user}",
                now_ms,
                silence_id=silence_id,
            )
        except (sqlite3.Error, OSError):
            self._take_back(press, silence_id)
            raise

    def _take_back(self, press: Press, silence_id: str) -> None:
        """Forget a press whose silence was not added: its record would say "silenced"."""

        def undo(before: dict[str, Any] | None) -> dict[str, Any]:
            acts = IncidentActions.model_validate(before or {})
            kept = tuple(s for s in acts.silences if s.id != silence_id)
            clicks = tuple(c for c in acts.clicks if c != press.click)
            return acts.model_copy(update={"silences": kept, "clicks": clicks}).model_dump()

        try:
            self.ledger.amend(self.messages.name, f"acts:{press.incident_id}", undo)
        except LedgerError as exc:
            # What stays recorded is a silence the store never had: not in force, so it
            # covers nothing, and the next press adds one.
            log.error(
                "slack actions: silence %s of incident %s was not added, and the press "
                "cannot be taken back: %s",
                silence_id,
                press.incident_id,
                exc,
            )

    def _respond(self, press: Press, text: str) -> None:
        url = press.response_url
        if url is None:
            return
        respond = self.messages.respond
        self.dispatcher.submit(f"reply:{press.click}", lambda: respond(url, text))

    def _count(self, outcome: str) -> None:
        with self._lock:
            self.outcomes[outcome] += 1

    def _warn(self, text: str, *, exc_info: bool = False) -> None:
        # A flood of forged requests must not flood the log: one line a minute, with counts.
        now = time.monotonic()
        with self._lock:
            if now - self._warned_at < _WARN_EVERY_S:
                return
            self._warned_at = now
            counts = dict(self.outcomes)
        log.warning("slack actions: %s (so far: %s)", text, counts, exc_info=exc_info)

    # --- HTTP -----------------------------------------------------------------------

    def app(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """The WSGI app: ``POST /slack/actions``; 404 elsewhere, 405 for other methods."""
        if environ.get("PATH_INFO") != PATH:
            status, text = 404, f"not found; Slack's request URL ends with {PATH}\n"
        elif environ.get("REQUEST_METHOD") != "POST":
            status, text = 405, "POST only\n"
        else:
            raw = str(environ.get("CONTENT_LENGTH") or "0")
            # The server answers a length that is no number (411) or past the cap (413)
            # before this runs; checked again so the app never raises on its own.
            if not _LENGTH.fullmatch(raw) or int(raw) > MAX_BODY_BYTES:
                status, text = 400, "Content-Length is not a number up to the cap\n"
            else:
                body = environ["wsgi.input"].read(int(raw)) if int(raw) else b""
                headers = {
                    k[5:].replace("_", "-").lower(): str(v)
                    for k, v in environ.items()
                    if k.startswith("HTTP_")
                }
                status, text = self.handle(headers, body)
        data = text.encode()
        reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}
        start_response(
            f"{status} {reason.get(status, 'Error')}",
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))],
        )
        return [data]

    def serve(
        self, host: str, port: int, *, max_connections: int = 64, deadline_s: float = 10.0
    ) -> AppServer:
        """Serve :meth:`app` on ``host:port`` in a daemon thread (bounded as ``/metrics``).

        Raises:
            OSError: the address cannot be bound.
        """
        return serve_app(
            self.app,
            host,
            port,
            name="slack-actions",
            max_connections=max_connections,
            deadline_s=deadline_s,
            max_body=MAX_BODY_BYTES,
        )


def _label(action_id: str) -> str:
    return {SILENCE_1H: "Silence this job 1 h", SILENCE_4H: "Silence this job 4 h"}.get(
        action_id, action_id
    )


def signing_secret(cfg: SlackConfig, env: Mapping[str, str] | None = None) -> str:
    """The signing secret from ``slack.signing_secret_env``.

    Raises:
        ConfigError: it is empty or unset (names the variable).
    """
    environ = os.environ if env is None else env
    secret = environ.get(cfg.signing_secret_env, "").strip()
    if not secret:
        msg = (
            f"slack.interactivity_port is set but ${cfg.signing_secret_env} "
            "(slack.signing_secret_env) is empty or unset"
        )
        raise ConfigError(msg, fields=("slack.signing_secret_env",))
    return secret
