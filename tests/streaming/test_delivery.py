"""The detect query's batch handler on the driver (``streaming/delivery.py``): record, then deliver.

A batch's rows are given as Spark's ``collect()`` gives them; the ledger and the alert
file are real. The parse query's handler has its own file (``test_parse_batch.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from conf import AppConfig
from detectors import Alert, AlertStatus, Severity
from sinks import AlertLedger, JsonLinesAlertSink
from streaming.delivery import AlertDelivery, Outputs, PipelineStats, in_order
from streaming.rows import Forward, output_rows


def _row(alert_id: str, status: str, t: int, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "alert",
        "alert_id": alert_id,
        "detector": "checkpoint_failures",
        "entity": "job:7f",
        "status": status,
        "severity": "warning",
        "event_ms": t,
        "job_id": "7f",
        "job_name": None,
        "tm_id": None,
        "host": None,
        "summary": "3 checkpoints expired",
        "evidence": "{}",
        "data": None,
        **extra,
    }


def _delivery(tmp_path: Path) -> tuple[AlertDelivery, AlertLedger, Path]:
    cfg = AppConfig.model_validate({"output": {"state_dir": str(tmp_path)}})
    ledger = AlertLedger(cfg.output.ledger_path)
    alerts = tmp_path / "alerts.jsonl"
    outputs = Outputs(ledger=ledger, sinks=[JsonLinesAlertSink(alerts)])
    return AlertDelivery(outputs, PipelineStats(), cfg), ledger, alerts


def test_a_batch_is_recorded_then_written_to_the_alert_file_in_event_time_order(
    tmp_path: Path,
) -> None:
    delivery, ledger, alerts = _delivery(tmp_path)
    now = 1_700_000_000_000
    delivery.record([_row("a", "resolved", now + 60_000), _row("a", "firing", now)], 0)
    written = [json.loads(line) for line in alerts.read_text().splitlines()]
    assert [(a["alert_id"], a["status"]) for a in written] == [("a", "firing"), ("a", "resolved")]
    assert {d.key: d.state for d in ledger.deliveries(None)} == {
        "a:firing": "delivered",
        "a:resolved": "delivered",
    }
    stats = delivery.stats
    assert stats.alerts == {("checkpoint_failures", "job:7f", "firing"): 1,
                            ("checkpoint_failures", "job:7f", "resolved"): 1}  # fmt: skip
    assert (stats.delivered, stats.delivered_batch) == (1, 0)


def test_a_batch_run_again_after_a_restart_writes_nothing_twice(tmp_path: Path) -> None:
    delivery, _, alerts = _delivery(tmp_path)
    rows = [_row("a", "firing", 1_700_000_000_000)]
    delivery.record(rows, 4)
    delivery.record(rows, 4)  # Spark runs the uncommitted batch again
    assert len(alerts.read_text().splitlines()) == 1
    assert delivery.stats.alerts[("checkpoint_failures", "job:7f", "firing")] == 1


def test_refusals_of_the_entity_cap_are_counted_once_per_batch(tmp_path: Path) -> None:
    delivery, _, _ = _delivery(tmp_path)
    refused = {**_row("", "firing", 0), "kind": "entity_refused", "alert_id": None}
    delivery.record([refused, {**refused, "detector": "checkpoint_creep"}], 1)
    delivery.record([refused], 1)
    assert delivery.stats.entities_refused == {"checkpoint_failures": 1, "checkpoint_creep": 1}


def test_in_order_puts_a_firing_before_its_escalation_before_its_resolve() -> None:
    def alert(status: AlertStatus, t: int) -> Alert:
        return Alert(
            alert_id="a",
            detector="checkpoint_failures",
            entity="job:7f",
            status=status,
            severity=Severity.WARNING,
            event_time_ms=t,
            summary="s",
        )

    same = [
        alert(AlertStatus.RESOLVED, 5),
        alert(AlertStatus.ESCALATED, 5),
        alert(AlertStatus.FIRING, 5),
    ]
    assert [a.status for a in in_order(same)] == [
        AlertStatus.FIRING,
        AlertStatus.ESCALATED,
        AlertStatus.RESOLVED,
    ]
    assert [a.event_time_ms for a in in_order([alert(AlertStatus.FIRING, 9), same[0]])] == [5, 9]


def test_the_first_count_of_a_query_batch_is_the_only_one() -> None:
    stats = PipelineStats()
    assert stats.first_count("parse", 3) is True
    assert stats.first_count("parse", 3) is False
    assert stats.first_count("parse", 2) is False  # older: counted before the restart
    assert stats.first_count("detect", 3) is True  # each query its own
    assert stats.wait_delivered(0, timeout_s=0.01) is False
    stats.count_delivered(3)
    assert stats.wait_delivered(0, timeout_s=0.01) is True


def test_forwards_go_onto_the_bus_before_the_batch_is_recorded_and_a_failure_fails_it(
    tmp_path: Path,
) -> None:
    _, ledger, alerts = _delivery(tmp_path)
    cfg = AppConfig.model_validate({"output": {"state_dir": str(tmp_path)}})
    written: list[list[tuple[str, str]]] = []
    fail = [True]

    def forward(forwards: Sequence[Forward]) -> None:
        if fail[0]:
            raise OSError("broker gone")
        written.append([(f.entity, f.value) for f in forwards])

    delivery = AlertDelivery(
        Outputs(ledger=ledger, sinks=[JsonLinesAlertSink(alerts)]),
        PipelineStats(),
        cfg,
        forward=forward,
    )
    value = '{"kind":"fatal_error","event_ms":5,"src":"fwd:logs:0","offset":3,"seq":0}'
    rows = [_row("a", "firing", 1_700_000_000_000), *output_rows([Forward("tm:x", value, 5)])]
    with pytest.raises(OSError, match="broker gone"):
        delivery.record(rows, 7)
    # Nothing of the batch is recorded: Spark runs it again, forwards and all.
    assert not alerts.exists() or alerts.read_text() == ""
    fail[0] = False
    delivery.record(rows, 7)
    assert written == [[("tm:x", value)]]
    assert len(alerts.read_text().splitlines()) == 1
    assert delivery.stats.forwarded == 1
