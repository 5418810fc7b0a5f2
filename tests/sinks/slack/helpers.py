"""What the Slack sinks' tests share: the secrets, the alert they page, the sink and its config."""

from __future__ import annotations

from conf import SlackConfig
from detectors import Alert, AlertStatus, Severity
from lab.slack import SlackEmulator
from sinks import AlertLedger, dispatch
from sinks.slack import SlackBotSink

TOKEN = "xoxb-0000-secret-token"


JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"


TM = "container_e05_1699999999999_0042_01_000003"


def alert(
    status: AlertStatus = AlertStatus.FIRING,
    severity: Severity = Severity.WARNING,
    alert_id: str = "a1",
    detector: str = "idle_heap_growth",
) -> Alert:
    return Alert(
        alert_id=alert_id,
        detector=detector,
        entity=f"tm:{TM}",
        status=status,
        severity=severity,
        event_time_ms=1_763_776_800_000,
        summary="post-GC heap floor rising 240 MB/h with zero records in/out for 62 min",
        job_id=JOB,
        job_name="orders-enrich",
        tm_id=TM,
        host="worker-7.example.internal",
        evidence={"growth_mb_per_h": 240.0, "floor_mb": 1890.5, "floors_mb": [1, 2]},
    )


def config(emu: SlackEmulator, **kw) -> SlackConfig:
    base = {
        "mode": "bot",
        "api_url": emu.base_url,
        "channel": "#flink-alerts",
        "max_retries": 2,
        "routes": [{"channel": "#flink-pager", "severities": ["critical"]}],
        "runbook_url": "https://wiki.example/flink",
    }
    return SlackConfig.model_validate({**base, **kw})


def bot(emu: SlackEmulator, ledger: AlertLedger, **kw) -> SlackBotSink:
    cfg = config(emu, **kw)
    return SlackBotSink(TOKEN, ledger, lambda: cfg, lambda: "prod-eu")


def deliver(ledger: AlertLedger, sink, batch_id: int, *alerts: Alert) -> None:
    ledger.record(batch_id, list(alerts), [sink])
    dispatch.deliver(ledger, sink)


def named(alert_id: str, job_name: str) -> Alert:
    return alert(alert_id=alert_id).model_copy(update={"job_name": job_name})


def keys(messages: list[dict]) -> list[str]:
    return [m["metadata"]["event_payload"]["key"] for m in messages if m.get("metadata")]
