"""Alertmanager: every alert transition posted to its v2 API; open alerts kept alive.

Each flinkwatch alert is one Alertmanager alert, identified (as every Alertmanager
alert is) by its label set: ``alertname`` (``alertmanager.alertname`` or the detector),
``detector``, ``severity``, ``cluster``, ``job_id``, ``job_name``, ``tm_id`` and
``incident``, each only when it has a value, plus ``alertmanager.labels``. A firing is
posted with ``endsAt`` :data:`RESEND_INTERVALS` re-send intervals ahead and posted again
every interval while it is open (:class:`Resender`), as Prometheus does: Alertmanager
resolves an alert nobody posts any more, so a flinkwatch that died does not leave alerts
firing forever. A resolve is posted with ``endsAt`` = the resolve time.

Severity is a label, because routing by severity (critical to the pager) is what
Alertmanager users do with it. An escalation therefore changes the alert's identity: it
is posted as two alerts in one request, the old severity's resolved (``endsAt`` = the
escalation time) and the new one firing, so no alert of the old severity stays behind.

Delivery goes through the ledger like Slack's: once per transition, in order, retried
while no Alertmanager answers. Posting an alert is idempotent (the same label set and
times merge into the alert Alertmanager holds; it notifies once per group, not per
post), which :meth:`AlertmanagerSink.confirm` relies on.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from conf import AlertmanagerConfig
from detectors import Alert, AlertStatus, Severity
from sinks.base import (
    DeliveryError,
    DeliverySink,
    PermanentDeliveryError,
    RetryableDeliveryError,
    Runbook,
    Transition,
    builtin_runbook,
)
from sinks.http_post import classify as classify
from sinks.http_post import env_secret, post, redact_url, rfc3339
from sinks.ledger import LedgerError, ReceiverHistory

log = logging.getLogger(__name__)

#: A firing's ``endsAt`` is this many re-send intervals ahead (Prometheus: 4 × its
#: resend delay): up to three re-posts may be lost before Alertmanager resolves it.
RESEND_INTERVALS = 4
#: The v2 API's alerts endpoint, under each configured base URL.
API_PATH = "/api/v2/alerts"
#: Alerts per request of a re-send (Alertmanager takes a list of any length; a bound
#: keeps one request's body and time small with thousands open).
CHUNK = 500


@dataclass(frozen=True, slots=True)
class PostableAlert:
    """One alert as Alertmanager's ``POST /api/v2/alerts`` takes it.

    Attributes:
        labels: The alert's identity (only labels with a value).
        annotations: What a notification shows; not part of the identity.
        starts_ms: When it started (epoch ms, event time).
        ends_ms: When it ends: the resolve time, or a time ahead for a firing one.
        generator_url: A link back to the source, if configured.
    """

    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    starts_ms: int
    ends_ms: int
    generator_url: str | None = None

    def resolved_at(self, now_ms: int) -> bool:
        """Whether Alertmanager takes it as resolved at ``now_ms``."""
        return self.ends_ms <= now_ms

    def to_json(self) -> dict[str, Any]:
        """The JSON object of the API."""
        out: dict[str, Any] = {
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "startsAt": rfc3339(self.starts_ms),
            "endsAt": rfc3339(self.ends_ms),
        }
        if self.generator_url:
            out["generatorURL"] = self.generator_url
        return out


def labels_of(
    t: Transition, severity: Severity, cfg: AlertmanagerConfig, cluster: str
) -> dict[str, str]:
    """The label set of ``t``'s alert at ``severity``: its identity in Alertmanager.

    Job and TaskManager come from the incident's member when there is one: it keeps
    what an earlier transition named and a later one may not (a resolve without the job
    name), and a label set that changed between firing and resolve would leave the
    firing alert behind. The TaskManager is spelled once per incident
    (:attr:`~sinks.base.Transition.tm_id`).
    """
    a = t.alert
    member = t.member
    values = {
        "alertname": cfg.alertname or a.detector,
        "detector": a.detector,
        "severity": severity.value,
        "cluster": cluster,
        "job_id": (member.job_id if member else None) or a.job_id,
        "job_name": (member.job_name if member else None) or a.job_name,
        "tm_id": t.tm_id,
        "incident": t.incident_id,
    }
    # Alertmanager treats an empty label as absent: leave them out, and the static ones
    # first so that flinkwatch's win (the config refuses a clash anyway).
    return {**cfg.labels, **{k: v for k, v in values.items() if v}}


def annotations_of(
    t: Transition, cfg: AlertmanagerConfig, runbook: Runbook = builtin_runbook
) -> dict[str, str]:
    """What a notification shows: summary, root cause, runbook, ids."""
    a = t.alert
    member = t.member
    out = {"summary": a.summary, "alert_id": a.alert_id}
    if t.incident is not None and len(t.incident.members) > 1:
        out["root_cause"] = t.incident.headline
    todo = runbook(a.detector)
    if todo:
        out["runbook"] = todo
    if cfg.runbook_url:
        out["runbook_url"] = f"{cfg.runbook_url}#{a.detector}"
    host = a.host or (member.host if member else None)
    if host:
        out["host"] = host
    return out


def _starts_ms(t: Transition) -> int:
    member = t.member
    return member.first_ms if member is not None else t.alert.event_time_ms


def transition_alerts(
    t: Transition,
    *,
    previous: Alert | None,
    cfg: AlertmanagerConfig,
    cluster: str,
    now_ms: int,
    runbook: Runbook = builtin_runbook,
) -> list[PostableAlert]:
    """The alerts one transition posts.

    * firing: the alert, ``endsAt`` = now + :data:`RESEND_INTERVALS` × the re-send interval;
    * escalated: the previous severity's alert resolved at the escalation, and the new
      severity's firing (severity is a label, so these are two alerts);
    * resolved: the alert resolved at the resolve time (and, if the resolve carries
      another severity than the transition before it, that one's too).

    A resolve time after ``now_ms`` (a clock ahead) is taken as ``now_ms``: Alertmanager
    keeps an alert whose ``endsAt`` is in the future firing.

    Args:
        t: The transition.
        previous: The transition of the same alert before it (``AlertLedger.previous``).
        cfg: The ``alertmanager`` section.
        cluster: The ``cluster`` label.
        now_ms: Wall-clock now (epoch ms).
        runbook: Each detector's and rule's runbook line (the running config's).
    """
    a = t.alert
    starts = _starts_ms(t)
    notes = annotations_of(t, cfg, runbook)
    url = cfg.generator_url

    def ended(severity: Severity) -> PostableAlert:
        ends = min(a.event_time_ms, now_ms)
        # Alertmanager refuses an alert that ends before it starts.
        begun = min(starts, ends)
        return PostableAlert(labels_of(t, severity, cfg, cluster), notes, begun, ends, url)

    if a.status is AlertStatus.RESOLVED:
        severities = dict.fromkeys([*([previous.severity] if previous else []), a.severity])
        return [ended(s) for s in severities]
    out = []
    if a.status is AlertStatus.ESCALATED and previous is not None:
        if previous.severity is not a.severity:
            out.append(ended(previous.severity))
    out.append(firing(t, cfg=cfg, cluster=cluster, now_ms=now_ms, runbook=runbook))
    return out


def firing(
    t: Transition,
    *,
    cfg: AlertmanagerConfig,
    cluster: str,
    now_ms: int,
    runbook: Runbook = builtin_runbook,
) -> PostableAlert:
    """``t``'s alert as firing, ``endsAt`` :data:`RESEND_INTERVALS` re-send intervals ahead."""
    starts = _starts_ms(t)
    ahead = int(RESEND_INTERVALS * cfg.resend_interval_s * 1000)
    # An event time ahead of this clock must still end after it starts (or Alertmanager
    # refuses the alert).
    ends = max(now_ms, starts) + ahead
    labels = labels_of(t, t.alert.severity, cfg, cluster)
    return PostableAlert(labels, annotations_of(t, cfg, runbook), starts, ends, cfg.generator_url)


def auth_header(cfg: AlertmanagerConfig, env: Mapping[str, str]) -> str | None:
    """The ``Authorization`` header the config asks for, secrets read from ``env``.

    Raises:
        ConfigError: a secret's variable is empty or unset (names the field and variable).
    """

    def secret(field: str) -> str:
        return env_secret(getattr(cfg, field), f"alertmanager.{field}", env)

    if cfg.basic_auth_username is not None:
        pair = f"{cfg.basic_auth_username}:{secret('basic_auth_password')}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")
    if cfg.bearer_token is not None:
        return f"Bearer {secret('bearer_token')}"
    return None


def _wall_ms() -> int:
    return int(time.time() * 1000)


class AlertmanagerSink(DeliverySink):
    """Posts each transition to every configured Alertmanager (``POST /api/v2/alerts``).

    A post counts as delivered when one Alertmanager took it. Each member of an HA
    cluster must get every alert (they share silences and what they notified, not
    alerts), and one of them down must not stop the pages: the one that missed a firing
    gets it at the next re-send; one that missed a resolve resolves the alert when its
    ``endsAt`` passes.

    Example:
        >>> sink = AlertmanagerSink(ledger, lambda: cfg.alertmanager, lambda: "prod")
        >>> Resender(sink, lambda: 60.0).start()  # doctest: +SKIP
    """

    name = "alertmanager"
    notifies = True

    def __init__(
        self,
        ledger: ReceiverHistory,
        cfg: Callable[[], AlertmanagerConfig],
        cluster: Callable[[], str],
        *,
        authorization: str | None = None,
        clock: Callable[[], int] = _wall_ms,
        runbook: Runbook = builtin_runbook,
    ) -> None:
        """Create the sink.

        Args:
            ledger: Where the previous transition of an alert and the open alerts are read.
            cfg: The current ``alertmanager`` section (follows reloads).
            cluster: The current cluster name.
            authorization: The ``Authorization`` header value (a secret), if any.
            clock: Wall-clock epoch ms (injected in tests).
            runbook: Each detector's and rule's runbook line (the running config's).
        """
        self._ledger = ledger
        self._runbook = runbook
        self._cfg = cfg
        self._cluster = cluster
        self._authorization = authorization
        self._clock = clock
        # A send and a re-send must not interleave: a re-send read before an escalation
        # and posted after it would bring the old severity's alert back.
        self._lock = threading.Lock()
        #: Members (base URLs) whose last post failed: their back-off, and until when
        #: (monotonic seconds) they are left alone while another member takes the posts.
        self._member_wait: dict[str, float] = {}
        self._member_due: dict[str, float] = {}

    def send(self, t: Transition) -> None:
        """Post the transition's alerts (see :func:`transition_alerts`).

        Raises:
            RetryableDeliveryError: no Alertmanager took it and one may later.
            PermanentDeliveryError: every Alertmanager refused it (400: a bad payload).
        """
        with self._lock:
            previous = None if t.alert.status is AlertStatus.FIRING else self._ledger.previous(t)
            alerts = transition_alerts(
                t,
                previous=previous,
                cfg=self._cfg(),
                cluster=self._cluster(),
                now_ms=self._clock(),
                runbook=self._runbook,
            )
            self._post(alerts, what=t.key)

    def confirm(self, t: Transition) -> bool:
        """Always False, without asking: "send it again", which is right for Alertmanager.

        The question matters for a receiver that would show a second copy. Alertmanager
        would not: a post of the same label set merges into the alert it holds (the
        earliest start, the firing's ``endsAt`` moved on, a resolve's kept), and it
        notifies per group of alerts, deduplicated, never per post. So a send cut short
        by a crash is simply made again, after any earlier transition of the alert
        (ledger order) and before any later one, and the receiver ends up as if it had
        arrived once. Asking first would cost a request and could not answer anyway for
        a resolve (``GET /api/v2/alerts`` lists no resolved alerts) or for every member
        of an HA cluster. False rather than None: None counts the resend as
        ``resent_unconfirmed``, which means a page may show twice; here it cannot.
        """
        return False

    def repost(self) -> int:
        """Post every open alert again, as the ledger says this sink last got it.

        Open alerts with a transition still on its way (``pending``, ``sending``) are left
        to the dispatcher, which is about to change them; see
        :meth:`~sinks.ledger.AlertLedger.standing`.

        Returns:
            How many alerts were posted.

        Raises:
            RetryableDeliveryError: no Alertmanager took them.
            PermanentDeliveryError: every Alertmanager refused a chunk.
        """
        with self._lock:
            standing = self._ledger.standing(self.name)
            if not standing:
                return 0
            cfg, cluster, now = self._cfg(), self._cluster(), self._clock()
            alerts = [
                firing(t, cfg=cfg, cluster=cluster, now_ms=now, runbook=self._runbook)
                for t in standing
            ]
            for i in range(0, len(alerts), CHUNK):
                self._post(alerts[i : i + CHUNK], what=f"{len(alerts)} open alerts")
        return len(alerts)

    def _post(self, alerts: Sequence[PostableAlert], *, what: str) -> None:
        """One request per Alertmanager not backing off; fine when one took it.

        A member whose post failed retryably (down, no answer within ``timeout_s``, a
        5xx) is left alone for ``retry_backoff_s``, doubling up to ``max_backoff_s``,
        while another member takes the posts: one member that hangs costs one time-out
        per back-off, not one per transition. It gets the alerts it missed at the first
        re-send after its back-off. When every member is backing off, each is tried.

        Raises:
            RetryableDeliveryError: none took it, and one may later.
            PermanentDeliveryError: each refused it for good.
        """
        cfg = self._cfg()
        body = json.dumps([a.to_json() for a in alerts]).encode()
        now = time.monotonic()
        members = [u for u in cfg.urls if self._member_due.get(u, now) <= now] or list(cfg.urls)
        failures: list[DeliveryError] = []
        for url in members:
            problem = self._post_one(url, body, cfg.timeout_s)
            if problem is None:
                if self._member_due.pop(url, None) is not None:
                    log.info("sink=alertmanager %s takes posts again", redact_url(url))
                self._member_wait.pop(url, None)
                continue
            failures.append(problem)
            if isinstance(problem, RetryableDeliveryError):
                first, ceiling = cfg.retry_backoff_s, cfg.max_backoff_s
                wait = min(self._member_wait.get(url, first / 2) * 2, ceiling)
                self._member_wait[url] = wait
                self._member_due[url] = time.monotonic() + wait
                log.info("sink=alertmanager %s: next post in %.0f s", redact_url(url), wait)
        # Whether a failed post may have arrived does not matter here (confirm() says
        # why): retryable unless every Alertmanager refused it for good.
        if len(failures) < len(members):
            for f in failures:
                log.warning("sink=alertmanager %s: %s; the other Alertmanagers took it", what, f)
            return
        detail = "; ".join(str(f) for f in failures)
        if all(isinstance(f, PermanentDeliveryError) for f in failures):
            raise PermanentDeliveryError(detail)
        raise RetryableDeliveryError(detail)

    def _post_one(self, base: str, body: bytes, timeout_s: float) -> DeliveryError | None:
        headers = {"Content-Type": "application/json"}
        if self._authorization:
            headers["Authorization"] = self._authorization
        return post(
            base + API_PATH,
            body,
            headers,
            timeout_s,
            sink=self.name,
            hint="alertmanager.urls and the credentials",
        )


class Resender:
    """Posts every open alert again each ``resend_interval_s``, in a daemon thread.

    The first pass is at :meth:`start`: after a restart Alertmanager gets the open alerts
    at once, not an interval later (their ``endsAt`` may be close). A pass that fails is
    logged and the next comes an interval later; the alerts it missed end at their
    ``endsAt`` unless a later pass gets through first.
    """

    def __init__(
        self,
        sink: AlertmanagerSink,
        interval_s: Callable[[], float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create the re-sender (call :meth:`start`, or :meth:`tick` from a test).

        Args:
            sink: Whose open alerts are posted again.
            interval_s: The current re-send interval (follows reloads).
            clock: Monotonic seconds (injected in tests).
        """
        self.sink = sink
        self._interval_s = interval_s
        self._clock = clock
        self._next = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Passes made, and alerts posted by the last one that got through.
        self.passes = 0
        self.posted = 0

    def tick(self) -> float:
        """Re-post if a pass is due; the seconds until the next one is."""
        now = self._clock()
        if now >= self._next:
            self._next = now + self._interval_s()
            self.passes += 1
            try:
                self.posted = self.sink.repost()
            except (DeliveryError, LedgerError) as exc:
                log.warning("sink=alertmanager re-send of the open alerts failed: %s", exc)
        return max(self._next - self._clock(), 0.0)

    def start(self) -> Resender:
        """Start the thread; returns self."""
        self._thread = threading.Thread(
            target=self._run, name="flinkwatch-alertmanager-resend", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop after the pass in progress (bounded by ``timeout_s``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                wait = self.tick()
            except Exception:
                # A bug here must not end the re-sends every open alert depends on.
                log.exception("sink=alertmanager re-send crashed; trying again later")
                wait = self._interval_s()
            self._stop.wait(wait)


def alertmanager_sink(
    cfg: Callable[[], AlertmanagerConfig],
    cluster: Callable[[], str],
    ledger: ReceiverHistory,
    env: Mapping[str, str] | None = None,
    runbook: Runbook = builtin_runbook,
) -> AlertmanagerSink | None:
    """The configured Alertmanager sink, or None when ``alertmanager.urls`` is empty.

    Raises:
        ConfigError: a secret's variable is empty or unset (names the field).
    """
    c = cfg()
    if not c.enabled:
        return None
    header = auth_header(c, os.environ if env is None else env)
    return AlertmanagerSink(ledger, cfg, cluster, authorization=header, runbook=runbook)
