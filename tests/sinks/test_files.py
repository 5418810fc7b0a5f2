"""File sinks: a replayed micro-batch must not write its alerts or dead letters twice."""

from __future__ import annotations

import json
import os
import time

import pytest

from detectors import Alert, AlertStatus, Severity
from sinks import AlertLedger, DeadLetterFileSink, JsonLinesAlertSink
from sinks.dispatch import deliver
from sinks.files import alert_from_record, alert_record, iso_utc


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


def test_an_alert_record_reads_back_as_the_alert_and_a_broken_one_is_refused() -> None:
    named = alert(AlertStatus.RESOLVED).model_copy(
        update={"job_name": "orders-enrich", "tm_id": "tm-1", "host": "10.0.0.7"}
    )
    for a in (alert(), named):
        assert alert_from_record(json.loads(json.dumps(alert_record(a)))) == a
    rec = alert_record(alert())
    for broken in (
        {k: v for k, v in rec.items() if k != "detector"},
        {**rec, "event_time": "yesterday"},
        {**rec, "event_time": "2024-06-03T10:10:00.002"},  # no zone: not ours
        {**rec, "status": "exploded"},
        {**rec, "evidence": [1, 2]},
    ):
        with pytest.raises(ValueError):
            alert_from_record(broken)


def test_iso_utc_keeps_milliseconds() -> None:
    assert iso_utc(0) == "1970-01-01T00:00:00.000Z"


def test_replayed_batch_is_written_once(tmp_path) -> None:
    path = tmp_path / "alerts.jsonl"
    sink = JsonLinesAlertSink(path)
    ledger = AlertLedger(tmp_path / "ledger.sqlite")
    for batch_id, alerts in [(0, [alert()]), (0, [alert()]), (1, [alert(AlertStatus.RESOLVED)])]:
        ledger.record(batch_id, alerts, [sink])  # batch 0 twice: Spark replays it after a crash
        deliver(ledger, sink)
    # A restarted job: a new ledger object on the same file, and the last batch again.
    again = AlertLedger(tmp_path / "ledger.sqlite")
    again.record(1, [alert(AlertStatus.RESOLVED)], [sink])
    deliver(again, sink)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["status"] for x in lines] == ["firing", "resolved"]


def test_an_append_interrupted_by_a_crash_is_confirmed_from_the_file(tmp_path) -> None:
    path = tmp_path / "alerts.jsonl"
    sink = JsonLinesAlertSink(path)
    ledger = AlertLedger(tmp_path / "ledger.sqlite")
    [t] = ledger.record(0, [alert()], [sink])
    # The crash: marked sending, the line written, the process killed before "delivered".
    ledger.mark("file", t.seq, "sending")
    sink.send(t)
    assert sink.confirm(t) is True
    deliver(ledger, sink)
    assert len(path.read_text().splitlines()) == 1
    assert ledger.outcomes[("file", "confirmed")] == 1
    # Killed before the line was written: confirm says no, and the line is written once.
    [r] = ledger.record(1, [alert(AlertStatus.RESOLVED)], [sink])
    ledger.mark("file", r.seq, "sending")
    path.write_text(path.read_text() + '{"alert_id": "cut sh')  # a half-written line
    assert sink.confirm(r) is False
    deliver(ledger, sink)
    statuses = [
        json.loads(x).get("status") for x in path.read_text().splitlines() if x.endswith("}")
    ]
    assert statuses == ["firing", "resolved"]


def test_dead_letters_of_a_replayed_batch_replace_the_first_write(tmp_path) -> None:
    sink = DeadLetterFileSink(tmp_path)
    rec = {"topic": "flink.logs", "partition": 0, "offset": 7, "error": "invalid_json", "raw": "{"}
    first, _, _ = sink.write(3, [rec])
    again, kept, dropped = sink.write(3, [rec])
    assert first == again and again is not None
    assert (kept, dropped) == ({"invalid_json": 1}, 0)
    assert len(list(tmp_path.glob("*.jsonl"))) == 1
    assert json.loads(again.read_text()) == rec
    assert sink.write(4, [])[0] is None


def test_a_flood_of_dead_letters_is_capped_per_batch_and_on_disk(tmp_path) -> None:
    sink = DeadLetterFileSink(tmp_path, max_per_batch=100, retain_bytes=30_000)
    flood = (
        {"topic": "flink.logs", "offset": i, "error": "too_large", "raw": "x" * 100}
        for i in range(10**6)
    )
    path, kept, dropped = sink.write(1, flood)
    assert path is not None and (kept["too_large"], dropped) == (100, 10**6 - 100)
    assert len(path.read_text().splitlines()) == 100
    for batch in range(2, 6):
        sink.write(batch, [{"error": "invalid_json", "raw": "y" * 100}] * 100)
    files = sorted(p.name for p in tmp_path.glob("*.jsonl"))
    assert sum(p.stat().st_size for p in tmp_path.glob("*.jsonl")) <= 30_000
    assert files[-1] == "batch-00000005.jsonl" and "batch-00000001.jsonl" not in files


def test_dead_letter_pruning_after_a_checkpoint_reset_deletes_the_old_run_not_the_new(
    tmp_path,
) -> None:
    sink = DeadLetterFileSink(tmp_path, retain_bytes=2_500)
    letter = {"error": "invalid_json", "raw": "y" * 100}
    # The run before the reset got as far as batch 907; its files are an hour old.
    hour_ago = time.time_ns() - 3600 * 10**9
    for i, batch in enumerate(range(900, 908)):
        path, _, _ = sink.write(batch, [letter] * 2)
        assert path is not None
        os.utime(path, ns=(hour_ago + i, hour_ago + i))
    # The checkpoints reset, the new run numbers its batches from 0 again.
    for batch in range(6):
        sink.write(batch, [letter] * 2)
    kept = sorted(p.name for p in tmp_path.glob("*.jsonl"))
    assert sum(p.stat().st_size for p in tmp_path.glob("*.jsonl")) <= 2_500
    new = [f"batch-{b:08d}.jsonl" for b in range(6)]
    assert set(new) <= set(kept)
    # What room is left holds the old run's latest files, not its first.
    old = [n for n in kept if n not in new]
    assert old and old == [f"batch-{b:08d}.jsonl" for b in range(908 - len(old), 908)]


def test_the_alert_file_rotates_and_keeps_a_few(tmp_path) -> None:
    path = tmp_path / "alerts.jsonl"
    sink = JsonLinesAlertSink(path, max_bytes=2_000, keep=2)
    ledger = AlertLedger(tmp_path / "ledger.sqlite")
    for i in range(40):
        ledger.record(i, [alert().model_copy(update={"alert_id": f"a{i}"})], [sink])
        deliver(ledger, sink)
    assert sorted(p.name for p in tmp_path.glob("alerts.jsonl*")) == [
        "alerts.jsonl",
        "alerts.jsonl.1",
        "alerts.jsonl.2",
    ]
    assert path.stat().st_size < 2_000 + 1_000
    newest = json.loads(path.read_text().splitlines()[-1])
    assert newest["alert_id"] == "a39"


def test_a_silenced_transition_is_written_with_its_silence(tmp_path) -> None:
    path = tmp_path / "alerts.jsonl"
    sink = JsonLinesAlertSink(path)
    ledger = AlertLedger(tmp_path / "ledger.sqlite")
    ledger.record(0, [alert()], [sink], silencer=lambda a: "night-maintenance")
    deliver(ledger, sink)
    [line] = [json.loads(x) for x in path.read_text().splitlines()]
    assert line["silenced_by"] == "night-maintenance"
    assert ledger.backlog() == {}
