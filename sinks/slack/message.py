"""What a Slack message of flinkwatch says: the text and blocks of an alert or an incident.

Pure functions of an alert (or an incident and its latest alert): the sinks in
:mod:`sinks.slack` post what these return (:func:`render_transition`). Every text that
comes from logs and metrics goes through :func:`esc`.
"""

from __future__ import annotations

from typing import Any

from conf import SlackConfig
from detectors import Alert, AlertStatus, Severity
from detectors.correlation import IncidentView
from detectors.tm_ids import one_per_tm
from sinks.base import Runbook, Transition, builtin_runbook
from sinks.inbound.slack_actions import utc_text as _when

_ICON = {
    (AlertStatus.FIRING, Severity.CRITICAL): ":red_circle:",
    (AlertStatus.FIRING, Severity.WARNING): ":large_orange_circle:",
    (AlertStatus.FIRING, Severity.INFO): ":large_blue_circle:",
    (AlertStatus.ESCALATED, Severity.CRITICAL): ":red_circle:",
    (AlertStatus.ESCALATED, Severity.WARNING): ":large_orange_circle:",
    (AlertStatus.ESCALATED, Severity.INFO): ":large_blue_circle:",
}


def esc(text: object) -> str:
    """Text from logs and metrics, made inert for Slack's mrkdwn.

    Job names, thread names, hosts and reasons are written by whoever runs a job: a job
    named ``<!channel>`` must not ping the channel and ``<https://x|Runbook>`` must not
    become a link. Slack's own rule: escape ``&``, ``<`` and ``>``; everything else
    renders as text. Only the configured mention and runbook link stay raw.
    """
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def note_block(text: str) -> dict[str, Any]:
    """A context block of small print (mrkdwn, cut at Slack's 3,000 characters)."""
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}


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
    alert: Alert,
    *,
    cluster: str,
    runbook_url: str | None,
    mention: str | None,
    runbook: Runbook = builtin_runbook,
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
    todo = runbook(alert.detector)
    if not resolved and todo:
        link = f" <{runbook_url}#{alert.detector}|Runbook>" if runbook_url else ""
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"*What to do*: {esc(todo)}{link}"},
            }
        )
    blocks.append(
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"flinkwatch · alert `{esc(alert.alert_id)}`"}],
        }
    )
    return text[:3000], blocks


def reply_text(a: Alert, *, joined: bool) -> str:
    """The thread reply of a transition after the first: mrkdwn, so escaped like the rest.

    A reply is posted as ``text`` alone and an escalation's is broadcast to the channel:
    a summary naming a job ``<!channel>`` would ping everyone from here.
    """
    what = f"{a.detector} {a.status.value}" if joined else a.status.value
    return f"{esc(what)}: {esc(a.summary)}"


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
    runbook: Runbook = builtin_runbook,
) -> tuple[str, list[dict[str, Any]]]:
    """The message of an incident of several alerts, as of ``alert``'s transition.

    An incident of one alert renders exactly as that alert (:func:`render`).
    """
    if len(incident.members) < 2:
        return render(
            alert, cluster=cluster, runbook_url=runbook_url, mention=mention, runbook=runbook
        )
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
    tms = one_per_tm(m.tm_id for m in incident.members if m.tm_id)
    fields = [f"*Cluster*\n{esc(cluster)}", f"*Severity*\n{incident.severity.value}"]
    if jobs:
        fields.append("*Jobs*\n" + "\n".join(esc(j) for j in jobs[:5]))
    if tms:
        fields.append("*TaskManagers*\n" + "\n".join(f"`{esc(t)}`" for t in tms[:5]))
    since = min(m.first_ms for m in incident.members)
    fields.append(f"*Since*\n{_when(since)}")
    lines = [
        f"{_STATUS_ICON[m.status]} *{esc(m.detector)}* ({m.status.value}, {m.severity.value}): "
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
    todo = runbook(root.detector)
    if not resolved and todo:
        link = f" <{runbook_url}#{root.detector}|Runbook>" if runbook_url else ""
        blocks.append(
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": f"*What to do*: {esc(todo)}{link}"},
            }
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


def render_transition(
    t: Transition, c: SlackConfig, cluster: str, runbook: Runbook = builtin_runbook
) -> tuple[str, list[dict[str, Any]]]:
    """The fallback text and blocks of a transition: its incident's message, or its alert's."""
    kw: dict[str, Any] = {
        "cluster": cluster,
        "runbook_url": c.runbook_url,
        "mention": c.mention_on_critical,
        "runbook": runbook,
    }
    if t.incident is None:
        return render(t.alert, **kw)
    return render_incident(t.incident, t.alert, **kw)
