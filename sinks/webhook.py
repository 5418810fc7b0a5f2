"""Webhooks: each alert transition POSTed as JSON to any pager or chat tool, signed.

Each configured webhook (``webhooks:``) is its own delivery sink, ``webhook:<name>``: the
ledger hands it every transition once, in order, and the dispatcher backs it off on its
own, so one receiver's outage delays no other.

Two body formats:

* ``flinkwatch`` (:func:`payload`): the versioned schema of docs/webhooks.md
  (:data:`SCHEMA_VERSION`), signed: ``X-Flinkwatch-Signature: v1=<hex HMAC-SHA256 of
  "<timestamp>.<body>">`` with ``X-Flinkwatch-Timestamp: <unix seconds>``, the key a
  secret from the environment. A receiver checks the signature over the raw bytes and
  refuses a timestamp more than five minutes off (a replay).
* ``pagerduty`` (:func:`pagerduty_event`): a PagerDuty Events API v2 event,
  ``dedup_key`` = the incident's id, so PagerDuty holds one alert per incident.

Every post carries ``Idempotency-Key: <transition key>``: the same on every try of one
transition, so a receiver can drop a repeat (see :meth:`WebhookSink.confirm`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from conf import WebhookConfig
from conf.kafka_options import env_ref
from detectors import AlertStatus
from sinks.base import DeliverySink, Runbook, Transition, builtin_runbook
from sinks.http_post import env_secret, post, rfc3339

log = logging.getLogger(__name__)

#: Version of the ``flinkwatch`` body. Adding a field keeps it; renaming, removing or
#: changing the meaning of one raises it.
SCHEMA_VERSION = 1
#: PagerDuty's limit on ``payload.summary``.
PAGERDUTY_SUMMARY_MAX = 1024


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value: ``v1=`` + hex HMAC-SHA256 of ``"<timestamp>.<body>"``.

    Example:
        >>> sign("s3cret", "1763776800", b'{"version":1}')[:10]
        'v1=353dc48'
    """
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def payload(
    t: Transition, cfg: WebhookConfig, cluster: str, runbook: Runbook = builtin_runbook
) -> dict[str, Any]:
    """The ``flinkwatch`` body of one transition (docs/webhooks.md, version 1).

    Job, TaskManager and host come from the incident's record of the alert where there
    is one: a resolve that no longer names the job still carries the firing's. The
    TaskManager is spelled once per incident (:attr:`~sinks.base.Transition.tm_id`).
    """
    a = t.alert
    m = t.member
    incident = t.incident
    return {
        "version": SCHEMA_VERSION,
        "key": t.key,
        "status": a.status.value,
        "severity": a.severity.value,
        "detector": a.detector,
        "alert_id": a.alert_id,
        "labels": {
            "cluster": cluster,
            "job_id": (m.job_id if m else None) or a.job_id,
            "job_name": (m.job_name if m else None) or a.job_name,
            "tm_id": t.tm_id,
            "host": a.host or (m.host if m else None),
        },
        "incident": {
            "id": t.incident_id,
            "headline": incident.headline if incident else a.summary,
            "status": (incident.status if incident else a.status).value,
            "severity": (incident.severity if incident else a.severity).value,
            "alerts": len(incident.members) if incident else 1,
        },
        "summary": a.summary,
        "evidence": a.evidence,
        "event_time": rfc3339(a.event_time_ms),
        "recorded_time": rfc3339(t.recorded_ms),
        "runbook": runbook(a.detector) or None,
        "runbook_url": f"{cfg.runbook_url}#{a.detector}" if cfg.runbook_url else None,
    }


def pagerduty_event(
    t: Transition, cfg: WebhookConfig, cluster: str, routing_key: str
) -> dict[str, Any] | None:
    """One PagerDuty Events API v2 event for ``t``; None: nothing to tell PagerDuty.

    ``dedup_key`` is the incident's id, the same for its firing, escalations and
    resolve: PagerDuty holds one alert per incident. A firing or escalation is a
    ``trigger`` (PagerDuty folds a trigger of an open ``dedup_key`` into the alert it
    holds); the incident's resolve is a ``resolve``. A member alert that resolves while
    its incident goes on is None: resolving the ``dedup_key`` would close the incident.
    """
    a = t.alert
    if a.status is AlertStatus.RESOLVED:
        if t.incident is not None and t.incident.status is not AlertStatus.RESOLVED:
            return None
        return {"routing_key": routing_key, "event_action": "resolve", "dedup_key": t.incident_id}
    body = payload(t, cfg, cluster)
    labels = body["labels"]
    summary = f"[{cluster}] {body['incident']['headline']}"
    event: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": "trigger",
        "dedup_key": t.incident_id,
        "payload": {
            "summary": summary[:PAGERDUTY_SUMMARY_MAX],
            "source": labels["host"] or labels["tm_id"] or labels["job_name"] or cluster,
            "severity": a.severity.value,  # info, warning, critical: PagerDuty's own words
            "timestamp": body["event_time"],
            "component": labels["job_name"] or labels["job_id"] or labels["tm_id"] or cluster,
            "group": cluster,
            "class": a.detector,
            "custom_details": body,
        },
        "client": "flinkwatch",
    }
    if body["runbook_url"]:
        event["links"] = [{"href": body["runbook_url"], "text": "runbook"}]
    return event


def _wall_s() -> float:
    return time.time()


class WebhookSink(DeliverySink):
    """POSTs each transition to one webhook, in ledger order.

    Example:
        >>> sink = WebhookSink(cfg.webhooks[0], lambda: "prod", secret="s3cret")
        >>> deliver(ledger, sink)  # doctest: +SKIP
    """

    notifies = True

    def __init__(
        self,
        cfg: WebhookConfig,
        cluster: Callable[[], str],
        *,
        secret: str | None = None,
        routing_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        clock: Callable[[], float] = _wall_s,
        runbook: Runbook = builtin_runbook,
    ) -> None:
        """Create the sink.

        Args:
            cfg: This webhook's entry of ``webhooks`` (the section is restart-only).
            cluster: The current cluster name.
            secret: The signing key (format ``flinkwatch``); None: posts are not signed.
            routing_key: The PagerDuty routing key (format ``pagerduty``).
            headers: The static headers, their ``${ENV_VAR}`` values read.
            clock: Wall-clock seconds, for the signature's timestamp (injected in tests).
            runbook: Each detector's and rule's runbook line (the running config's).
        """
        self.cfg = cfg
        self._runbook = runbook
        self.name = cfg.sink
        self._cluster = cluster
        self._secret = secret
        self._routing_key = routing_key
        self._headers = dict(headers or {})
        self._clock = clock

    def wants(self, t: Transition) -> bool:
        """Whether the webhook's ``route`` takes the transition (none: every one)."""
        return self.cfg.route is None or self.cfg.route.matches(t.alert, self._cluster())

    def body(self, t: Transition) -> bytes | None:
        """The bytes posted for ``t`` (None: nothing to post, see :func:`pagerduty_event`)."""
        if self.cfg.format == "pagerduty":
            doc = pagerduty_event(t, self.cfg, self._cluster(), self._routing_key or "")
        else:
            doc = payload(t, self.cfg, self._cluster(), self._runbook)
        return None if doc is None else json.dumps(doc, separators=(",", ":")).encode()

    def send(self, t: Transition) -> None:
        """POST the transition, signed, with its ``Idempotency-Key``.

        Each try is signed anew (a fresh timestamp), so a retry after a long outage is
        not refused as a replay; the body and the key stay the same.

        Raises:
            AmbiguousDeliveryError: a 5xx, or no answer after the request was written.
            RetryableDeliveryError: not reached, 408, 429 (401, 403, 404: logged too).
            PermanentDeliveryError: any other answer (400): skipped.
        """
        body = self.body(t)
        if body is None:
            log.debug("sink=%s %s: nothing to post", self.name, t.key)
            return
        headers = {
            **self._headers,
            "Content-Type": "application/json",
            "User-Agent": "flinkwatch",
            "Idempotency-Key": t.key,
        }
        if self._secret is not None:
            stamp = str(int(self._clock()))
            headers["X-Flinkwatch-Timestamp"] = stamp
            headers["X-Flinkwatch-Signature"] = sign(self._secret, stamp, body)
        problem = post(
            self.cfg.url,
            body,
            headers,
            self.cfg.timeout_s,
            sink=self.name,
            hint=f"webhooks {self.cfg.name}: url, secret and headers",
        )
        if problem is not None:
            raise problem

    def confirm(self, t: Transition) -> bool | None:
        """Whether a send cut by a crash (or left without an answer) arrived: not known.

        A webhook cannot be asked. ``flinkwatch``: None, so the ledger sends it again,
        with the same ``Idempotency-Key``, and counts it ``resent_unconfirmed``: a
        receiver that keeps the keys it has seen drops the repeat; one that does not
        may show the transition twice. ``pagerduty``: False, "send it again", not
        counted: PagerDuty folds a repeated trigger of an open ``dedup_key`` into the
        alert it holds and ignores a resolve of a resolved one, so the repeat cannot
        page twice.
        """
        return False if self.cfg.format == "pagerduty" else None


def webhook_sinks(
    cfgs: Sequence[WebhookConfig],
    cluster: Callable[[], str],
    env: Mapping[str, str] | None = None,
    runbook: Runbook = builtin_runbook,
) -> list[WebhookSink]:
    """One sink per configured webhook, its secrets read from the environment.

    Raises:
        ConfigError: a secret's variable is empty or unset (names the field and variable).
    """
    environ = os.environ if env is None else env
    out = []
    for i, c in enumerate(cfgs):
        where = f"webhooks.{i}"
        headers = {
            k: env_secret(v, f"{where}.headers.{k}", environ) if env_ref(v) else v
            for k, v in c.headers.items()
        }
        out.append(
            WebhookSink(
                c,
                cluster,
                secret=env_secret(c.secret, f"{where}.secret", environ) if c.secret else None,
                routing_key=(
                    env_secret(c.routing_key, f"{where}.routing_key", environ)
                    if c.routing_key
                    else None
                ),
                headers=headers,
                runbook=runbook,
            )
        )
    return out
