"""Ten days of incidents in a real alert ledger and alert file, for ``flinkwatch report``.

Recorded as the running job records them: each transition through
``AlertLedger.record`` with the correlator, delivered to a Slack stand-in (which keeps
its message as the bot sink does) and to the real JSON-lines alert file; "Resolve as
noise" pressed through :class:`~sinks.inbound.slack_actions.SlackActions` with a signed request.
The ledger's clock follows the event times.

Day 0 is 2026-11-10 (UTC); now is day 10, 00:00, so ``--since 7d`` starts on day 3.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from detectors import Alert, AlertStatus, Severity
from detectors.correlation import Correlator
from sinks import AlertLedger, DeliverySink, JsonLinesAlertSink, Transition
from sinks.dispatch import Dispatcher, deliver
from sinks.inbound.slack_actions import NOISE, SlackActions
from sinks.reports.weekly import Report, build_report
from sinks.reports.weekly_input import LedgerNoise, ledger_records

DAY = 86_400_000
HOUR = 3_600_000
MINUTE = 60_000
T0 = 1_794_268_800_000  # 2026-11-10T00:00:00Z
NOW = T0 + 10 * DAY
SECRET = "report-scenario-signing-secret"
TEAM = "T0REPORT"

JOB_A = ("a1a1a1a1", "orders-enrich")
JOB_B = ("b2b2b2b2", "payments")
JOB_C = ("c3c3c3c3", '<script>alert("pwn")</script> $\\frac{1}{0}$ \x1b[31mred')
JOB_D = ("d4d4d4d4", "ledger-compactor")
JOB_E = ("e5e5e5e5", "fraud-score")
HOSTILE_SUMMARY = '3 checkpoints expired <img src=x onerror=alert(1)> & "quoted"'

#: Times to resolve of the resolved incidents in the 7-day window, by root detector.
TTR_S = {
    "checkpoint_failures": [10 * 60, 30 * 60, 10 * 3600],
    "idle_heap_growth": [2 * 3600],
    "restart_storm": [50 * 60],
    "checkpoint_creep": [2 * 3600],
}


def alert(
    alert_id: str,
    detector: str,
    at: int,
    job: tuple[str, str] | None = None,
    status: AlertStatus = AlertStatus.FIRING,
    severity: Severity = Severity.WARNING,
    tm_id: str | None = None,
    evidence: dict[str, Any] | None = None,
    summary: str | None = None,
) -> Alert:
    return Alert(
        alert_id=alert_id,
        detector=detector,
        entity=f"job:{job[0]}" if job else f"tm:{tm_id}",
        status=status,
        severity=severity,
        event_time_ms=at,
        job_id=job[0] if job else None,
        job_name=job[1] if job else None,
        tm_id=tm_id,
        summary=summary or f"{detector} on {job[1] if job else tm_id}",
        evidence=evidence or {},
    )


def done(a: Alert, at: int) -> Alert:
    """The resolve of ``a`` at ``at``; like a real one, it does not repeat the job's name."""
    return a.model_copy(
        update={"status": AlertStatus.RESOLVED, "event_time_ms": at, "job_name": None}
    )


def transitions() -> list[Alert]:
    """Every transition of the ten days, in event time."""
    old = alert("old-cf", "checkpoint_failures", T0 + DAY + 10 * HOUR, JOB_A)
    creep_d = alert("creep-d", "checkpoint_creep", T0 + 2 * DAY, JOB_D)
    heap = alert("heap-1", "idle_heap_growth", T0 + 4 * DAY + 3 * HOUR, tm_id="tm-1")
    lost = alert(
        "lost-1",
        "tm_lost",
        T0 + 4 * DAY + 3 * HOUR + 20 * MINUTE,
        tm_id="tm-1",
        severity=Severity.CRITICAL,
        evidence={"cause": "memory_kill"},
    )
    storm_b = alert(
        "storm-b",
        "restart_storm",
        T0 + 4 * DAY + 3 * HOUR + 25 * MINUTE,
        JOB_B,
        evidence={"restarts": 3, "tm_ids": ["tm-1"]},
    )
    storm_d = alert("storm-d", "restart_storm", T0 + 4 * DAY + 8 * HOUR, JOB_D)
    cf5 = alert("cf-5", "checkpoint_failures", T0 + 5 * DAY + 9 * HOUR, JOB_A)
    cf6 = alert("cf-6", "checkpoint_failures", T0 + 6 * DAY + 9 * HOUR, JOB_A)
    cf7 = alert(
        "cf-7", "checkpoint_failures", T0 + 7 * DAY + 14 * HOUR, JOB_C, summary=HOSTILE_SUMMARY
    )
    storm_a = alert("storm-a", "restart_storm", T0 + 8 * DAY + 1 * HOUR, JOB_A)
    acks_c = alert("acks-c", "late_barrier_acks", T0 + 9 * DAY + 2 * HOUR, JOB_C)
    creep_e = alert("creep-e", "checkpoint_creep", T0 + 9 * DAY + 12 * HOUR, JOB_E)
    out = [
        old,
        done(old, old.event_time_ms + 30 * MINUTE),
        creep_d,  # day 2, still open when storm-d joins it on day 4: not the window's
        heap,
        lost,
        storm_b,
        done(lost, heap.event_time_ms + HOUR),
        done(storm_b, heap.event_time_ms + 90 * MINUTE),
        done(heap, heap.event_time_ms + 2 * HOUR),  # the incident resolves 2 h after it opened
        storm_d,
        cf5,
        done(cf5, cf5.event_time_ms + 10 * MINUTE),
        cf6,
        done(cf6, cf6.event_time_ms + 30 * MINUTE),
        cf7,
        cf7.model_copy(
            update={
                "status": AlertStatus.ESCALATED,
                "severity": Severity.CRITICAL,
                "event_time_ms": cf7.event_time_ms + HOUR,
            }
        ),
        done(cf7, cf7.event_time_ms + 10 * HOUR),  # long before acks-c: no longer related
        storm_a,
        done(storm_a, storm_a.event_time_ms + 50 * MINUTE),
        acks_c,
        creep_e,
        done(creep_e, creep_e.event_time_ms + 2 * HOUR),
    ]
    return sorted(out, key=lambda a: a.event_time_ms)


#: Incidents resolved as noise: (incident id, pressed at).
NOISE_PRESSES = (
    ("cf-5", T0 + 5 * DAY + 9 * HOUR + 5 * MINUTE),
    ("storm-a", T0 + 8 * DAY + 2 * HOUR),
    ("creep-e", T0 + 9 * DAY + 15 * HOUR),
)


class SlackStandIn(DeliverySink):
    """Takes every transition and keeps its incident's message, as the bot sink does."""

    name = "slack"
    notifies = True

    def __init__(self, ledger: AlertLedger) -> None:
        self.ledger = ledger

    def send(self, t: Transition) -> None:
        if self.ledger.recall(self.name, t.incident_id) is None:
            self.ledger.remember(self.name, t.incident_id, {"channel": "C1", "ts": f"{t.seq}.0"})

    def refresh(self, incident_id: str) -> None:
        """The message is not re-rendered here."""

    def respond(self, response_url: str, text: str) -> None:
        """Nobody to tell."""

    def api(self, method: str, **kwargs: Any) -> Any:
        """The only call a press makes of Slack here: which workspace the bot is in."""
        assert method == "auth_test", method
        return {"ok": True, "team_id": TEAM}


def press_noise(
    ledger: AlertLedger, slack: SlackStandIn, silences: Path, incident_id: str, at: int
) -> None:
    """Press "Resolve as noise" on the incident's message, as Slack posts it."""
    actions = SlackActions(
        slack, ledger, silences, Dispatcher(ledger, []), SECRET, clock_s=lambda: at / 1000
    )
    message = ledger.recall(slack.name, incident_id) or {}
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM},
        "channel": {"id": message.get("channel")},
        "container": {"type": "message", "message_ts": message.get("ts")},
        "user": {"id": "U0NOISE1", "team_id": TEAM},
        "actions": [{"action_id": NOISE, "value": incident_id, "action_ts": f"{at / 1000:.6f}"}],
        "response_url": None,
    }
    body = urlencode({"payload": json.dumps(payload)})
    ts = str(at // 1000)
    signature = SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body)
    headers = {"x-slack-request-timestamp": ts, "x-slack-signature": signature or ""}
    assert actions.handle(headers, body.encode()) == (200, "")
    assert actions.false_alarms.total() == 1


def record_scenario(state_dir: Path) -> tuple[Path, Path]:
    """The ten days recorded into ``state_dir``: the ledger's path and the alert file's."""
    ledger_path, alerts_path = state_dir / "ledger.sqlite", state_dir / "alerts.jsonl"
    clock = [T0]
    ledger = AlertLedger(ledger_path, clock=lambda: clock[0])
    slack, file = SlackStandIn(ledger), JsonLinesAlertSink(alerts_path)
    correlator = Correlator()
    presses = sorted(NOISE_PRESSES, key=lambda p: p[1])
    try:
        for batch, a in enumerate(transitions()):
            while presses and presses[0][1] <= a.event_time_ms:
                iid, at = presses.pop(0)
                press_noise(ledger, slack, state_dir / "silences.sqlite", iid, at)
            clock[0] = a.event_time_ms
            ledger.record(batch, [a], [slack, file], correlate=correlator.observe)
            assert deliver(ledger, slack) == 0 and deliver(ledger, file) == 0
        for iid, at in presses:
            press_noise(ledger, slack, state_dir / "silences.sqlite", iid, at)
    finally:
        ledger.close()
    return ledger_path, alerts_path


#: Where ``--since 7d`` starts.
WEEK = NOW - 7 * DAY


def from_ledger(ledger_path: Path, since_ms: int = WEEK) -> Report:
    """The report of a recorded ledger alone, as ``flinkwatch report`` builds it at ``NOW``."""
    ledger = AlertLedger(ledger_path)
    try:
        return build_report(
            ledger_records(ledger), since_ms=since_ms, now_ms=NOW, noise=LedgerNoise(ledger)
        )
    finally:
        ledger.close()
