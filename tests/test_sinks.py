"""File sinks: a replayed micro-batch must not write its alerts or dead letters twice."""

from __future__ import annotations

import json

from detectors import Alert, AlertStatus, Severity
from sinks import DeadLetterFileSink, JsonLinesAlertSink
from sinks.files import alert_record, iso_utc


def alert(status: AlertStatus = AlertStatus.FIRING) -> Alert:
    return Alert(
        alert_id="ab12",
        detector="checkpoint_failures",
        entity="job:7f",
        status=status,
        severity=Severity.WARNING,
        event_time_ms=1_717_409_400_002,
        summary="3 checkpoints expired",
        job_id="7f",
        evidence={"expired_checkpoints": [1, 2, 3]},
    )


def test_alert_record_has_the_documented_fields() -> None:
    rec = alert_record(alert())
    assert rec["event_time"] == "2024-06-03T10:10:00.002Z"
    assert set(rec) == {
        "alert_id",
        "detector",
        "status",
        "severity",
        "entity",
        "event_time",
        "summary",
        "job_id",
        "evidence",
    }


def test_iso_utc_keeps_milliseconds() -> None:
    assert iso_utc(0) == "1970-01-01T00:00:00.000Z"


def test_replayed_batch_is_written_once(tmp_path) -> None:
    path = tmp_path / "alerts.jsonl"
    sink = JsonLinesAlertSink(path)
    sink.deliver(0, [alert()])
    sink.deliver(0, [alert()])  # Spark replays batch 0 after a crash
    sink.deliver(1, [alert(AlertStatus.RESOLVED)])
    # A new sink (a restarted job) reads the ledger back.
    JsonLinesAlertSink(path).deliver(1, [alert(AlertStatus.RESOLVED)])
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["status"] for x in lines] == ["firing", "resolved"]


def test_dead_letters_of_a_replayed_batch_replace_the_first_write(tmp_path) -> None:
    sink = DeadLetterFileSink(tmp_path)
    rec = {"topic": "flink.logs", "partition": 0, "offset": 7, "error": "invalid_json", "raw": "{"}
    first = sink.write(3, [rec])
    again = sink.write(3, [rec])
    assert first == again
    assert len(list(tmp_path.glob("*.jsonl"))) == 1
    assert json.loads(again.read_text()) == rec
    assert sink.write(4, []) is None
