"""A volume that is full: the alert file is a copy, the ledger is the record.

On volumes that really are full (a tmpfs filled until the kernel says ENOSPC, or
``/dev/full``; see :mod:`tests.volumes`):

* the alert file cannot be written: the micro-batch goes on, Slack and the Prometheus view
  get every transition, the failure is counted and logged once a minute, and the file gets
  what it missed, in order and once, when it can be written again;
* the ledger cannot record: the micro-batch fails whole (nothing of it recorded), is
  counted, and the same batch run again once there is space records each transition once;
* the supervisor waits a full volume out instead of giving up after spark.max_restarts.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conf import AppConfig, SparkConfig
from conf.running import RunningConfig
from detectors import Alert, AlertStatus, Severity
from detectors.correlation import Correlator
from sinks import AlertLedger, DeliverySink, JsonLinesAlertSink, LedgerError, Transition
from sinks.besteffort import BestEffort
from sinks.dispatch import Dispatcher
from sinks.prometheus import ActiveAlerts
from streaming.delivery import AlertDelivery, Outputs, PipelineStats
from streaming.rows import alert_rows
from streaming.supervise import run_forever, storage_full
from tests.streaming.supervised import QuietPipeline
from tests.volumes import DEV_FULL, fill, tiny_volume


class Slack(DeliverySink):
    name = "slack"
    notifies = True

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, t: Transition) -> None:
        self.sent.append(t.key)


class Batch:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def collect(self) -> list[dict[str, Any]]:
        return self.rows


def row(alert_id: str, status: str = "firing", t: int = 1, summary: str = "s") -> dict[str, Any]:
    alert = Alert(
        alert_id=alert_id,
        detector="checkpoint_failures",
        entity=f"job:{alert_id}",
        status=AlertStatus(status),
        severity=Severity.WARNING,
        event_time_ms=t,
        job_id=alert_id,
        summary=summary,
    )
    (r,) = alert_rows([alert])
    return r


def cfg() -> AppConfig:
    return AppConfig.model_validate({"output": {"page_max_age_s": None}})


def file_keys(path: Path) -> list[str]:
    return [
        f"{r['alert_id']}:{r['status']}"
        for r in (json.loads(x) for x in path.read_text().splitlines())
    ]


@pytest.mark.parametrize("volume", ["dev_full", "tmpfs"])
def test_an_alert_file_on_a_full_volume_never_fails_the_batch_and_catches_up_in_order(
    tmp_path: Path, volume: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sinks.besteffort")
    with tiny_volume(tmp_path / "vol") if volume == "tmpfs" else _nothing(tmp_path) as where:
        path = where / "alerts.jsonl"
        if volume == "dev_full":
            path.symlink_to(DEV_FULL)
        else:
            filler = fill(where)
        now = [1000.0]
        ledger = AlertLedger(tmp_path / "ledger.sqlite")  # the record, on a healthy volume
        slack, active = Slack(), ActiveAlerts()
        dispatcher = Dispatcher(ledger, [slack])
        health = BestEffort(clock=lambda: now[0])
        outputs = Outputs(
            ledger=ledger,
            sinks=[JsonLinesAlertSink(path)],
            observers=[active],
            dispatcher=dispatcher,
            in_batch=health,
        )
        stats = PipelineStats()
        deliver = AlertDelivery(outputs, stats, cfg())

        deliver(Batch([row("a1")]), 0)  # type: ignore[arg-type]  # does not raise
        dispatcher.drain_once()
        assert slack.sent == ["a1:firing"]
        assert [t.alert.alert_id for t in active.snapshot()] == ["a1"]
        assert health.errors == {"file": 1} and health.failing("file")
        assert ledger.backlog() == {"file": 1}

        deliver(Batch([row("a2")]), 1)  # type: ignore[arg-type]  # backing off: not tried
        assert health.errors == {"file": 1}
        now[0] += 2
        deliver(Batch([row("a1", "resolved", 2)]), 2)  # type: ignore[arg-type]
        now[0] += 30
        deliver(Batch([]), 3)  # type: ignore[arg-type]
        assert health.errors == {"file": 3}
        dispatcher.drain_once()
        assert slack.sent == ["a1:firing", "a2:firing", "a1:resolved"]
        lines = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
        assert len(lines) == 1  # once a minute, not once a batch
        assert "No space left on device" in lines[0]
        now[0] += 60
        deliver(Batch([]), 4)  # type: ignore[arg-type]
        lines = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
        assert len(lines) == 2 and "3 more failure(s) since the last line" in lines[1]

        if volume == "dev_full":
            path.unlink()  # the file on a volume with space again
        else:
            filler.free()
        deliver(Batch([]), 5)  # type: ignore[arg-type]  # still backing off
        assert ledger.backlog() == {"file": 3}
        now[0] += 120
        deliver(Batch([row("a2", "resolved", 3)]), 6)  # type: ignore[arg-type]
        assert file_keys(path) == ["a1:firing", "a2:firing", "a1:resolved", "a2:resolved"]
        assert "file" not in ledger.backlog()
        assert not health.failing("file") and health.errors == {"file": 4}
        assert any("written again" in r.getMessage() for r in caplog.records)
        deliver(Batch([row("a2", "resolved", 3)]), 6)  # type: ignore[arg-type]  # replayed
        assert file_keys(path) == ["a1:firing", "a2:firing", "a1:resolved", "a2:resolved"]


class _nothing:  # noqa: N801 - stands in for tiny_volume
    def __init__(self, where: Path) -> None:
        self.where = where

    def __enter__(self) -> Path:
        return self.where

    def __exit__(self, *exc: object) -> None:
        pass


def test_a_ledger_on_a_full_volume_fails_the_batch_whole_and_the_run_again_records_it_once(
    tmp_path: Path,
) -> None:
    alerts = tmp_path / "alerts.jsonl"
    with tiny_volume(tmp_path / "vol", size_kb=8192) as vol:
        ledger = AlertLedger(vol / "ledger.sqlite")
        outputs = Outputs(
            ledger=ledger,
            sinks=[JsonLinesAlertSink(alerts)],
            dispatcher=Dispatcher(ledger, [Slack()]),  # not started: Slack's queue stays
            correlator=Correlator(),
        )
        stats = PipelineStats()
        AlertDelivery(outputs, stats, cfg())(Batch([row("a0")]), 0)  # type: ignore[arg-type]
        filler = fill(vol)
        # More than the ledger's write-ahead log holds already: it must grow, and cannot.
        big = [row(f"b{i:03d}", summary="x" * 2000) for i in range(300)]
        with pytest.raises(LedgerError, match="disk is full") as caught:
            AlertDelivery(outputs, stats, cfg())(Batch(big), 1)  # type: ignore[arg-type]
        assert caught.value.full and caught.value.path == vol / "ledger.sqlite"
        assert stats.ledger_errors == 1
        assert [t.key for t in ledger.active()] == ["a0:firing"]  # nothing of batch 1
        assert storage_full(caught.value) is not None

        filler.free()
        # Spark runs the batch again, after a restart: a new handler, the same outputs.
        AlertDelivery(outputs, stats, cfg())(Batch(big), 1)  # type: ignore[arg-type]
        AlertDelivery(outputs, stats, cfg())(Batch(big), 1)  # type: ignore[arg-type]
        assert len(ledger.active()) == 301
        assert file_keys(alerts) == ["a0:firing"] + [f"b{i:03d}:firing" for i in range(300)]
        # The incidents were rebuilt from the ledger: the run that was rolled back left
        # nothing in them, and each firing opens its incident (a new Slack message).
        queued = [t for t, _state in ledger.pending("slack", limit=400)]
        assert len(queued) == 301
        assert all(t.incident is not None and t.incident.opened for t in queued)
        ledger.close()


@dataclass
class Query:
    name: str
    error: str | None
    stopped: bool = False

    @property
    def isActive(self) -> bool:  # noqa: N802 - Spark's name
        return not self.stopped and self.error is None

    def exception(self) -> Exception | None:
        return None if self.stopped or self.error is None else RuntimeError(self.error)

    @property
    def status(self) -> dict[str, Any]:
        return {"isTriggerActive": False}

    def stop(self) -> None:
        self.stopped = True


# How Spark reports a foreachBatch that raised (abridged from a real run's exception).
LEDGER_FULL = (
    "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in "
    "foreach batch sink. Reason: An exception was raised by the Python Proxy. Return Message: "
    "Traceback (most recent call last):\n"
    '  File "/app/sinks/ledger.py", line 224, in _tx\n'
    "sqlite3.OperationalError: database or disk is full\n\n"
    "The above exception was the direct cause of the following exception:\n\n"
    "Traceback (most recent call last):\n"
    '  File "/app/streaming/delivery.py", line 212, in __call__\n'
    "sinks.ledger.LedgerError: alert ledger /var/lib/flinkwatch/ledger.sqlite: database or "
    "disk is full; free space on the volume of /var/lib/flinkwatch\n"
)
CHECKPOINT_FULL = (
    "Job aborted.\njava.io.IOException: No space left on device\n"
    "\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)"
)


@dataclass
class Pipeline(QuietPipeline):
    config: RunningConfig
    errors: list[str | None]
    stats: PipelineStats = field(default_factory=PipelineStats)
    starts: int = 0
    spark: Any = None

    def start(self) -> list[Query]:
        error = self.errors[min(self.starts, len(self.errors) - 1)]
        self.starts += 1
        return [Query("flinkwatch-parse", None), Query("flinkwatch-detect", error)]


def test_a_full_volume_is_waited_out_not_counted_against_max_restarts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    conf = AppConfig(spark=SparkConfig(restart_backoff_s=0.001, max_restarts=2))
    full = [LEDGER_FULL, CHECKPOINT_FULL] * 4
    p = Pipeline(RunningConfig(conf), [*full, None])
    rc = run_forever(p, should_stop=lambda: p.starts > len(full))  # type: ignore[arg-type]
    assert (rc, p.starts) == (0, len(full) + 1)  # ran again once there was space
    assert p.stats.query_failures == {"storage_full": 8}
    said = [r.getMessage() for r in caplog.records if "a volume is full" in r.getMessage()]
    assert len(said) == 8
    assert "sinks.ledger.LedgerError: alert ledger /var/lib" in said[0]
    assert "java.io.IOException: No space left on device" in said[1]
    assert "not counted against spark.max_restarts" in said[0]
    # Any other failure still gives up after max_restarts in a row.
    other = Pipeline(RunningConfig(conf), ["Kafka broker unreachable"])
    assert run_forever(other) == 1  # type: ignore[arg-type]
    assert other.starts == 3 and other.stats.query_failures == {"other": 3}


SCENARIOS = Path(__file__).resolve().parent.parent / "data" / "checkpoint_failures"


@pytest.mark.spark
def test_a_spark_batch_the_full_ledger_cannot_record_is_run_again_from_its_checkpoint(
    spark: Any, tmp_path: Path
) -> None:
    import sqlite3

    from streaming.app import Pipeline
    from streaming.sources import file_records, stage_files

    expected = json.loads((SCENARIOS / "expected.json").read_text())
    logs = stage_files([SCENARIOS / name for name in expected], tmp_path / "logs")
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    alerts = tmp_path / "alerts.jsonl"
    with tiny_volume(tmp_path / "vol", size_kb=4096) as vol:
        ledger = AlertLedger(vol / "ledger.sqlite")
        # The write-ahead log emptied: the first transition recorded needs new space.
        sqlite3.connect(vol / "ledger.sqlite").execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pipeline = Pipeline(
            spark=spark,
            config=RunningConfig(cfg()),
            logs=lambda: file_records(spark, logs, kind="log"),
            metrics=lambda: file_records(spark, metrics, kind="metric"),
            outputs=Outputs(
                ledger=ledger, sinks=[JsonLinesAlertSink(alerts)], correlator=Correlator()
            ),
            checkpoint_dir=tmp_path / "checkpoints",  # Spark's, on a healthy volume
            deadletter_dir=tmp_path / "dead",
            trigger={"availableNow": True},
        )
        filler = fill(vol)
        with pytest.raises(Exception) as caught:  # noqa: B017 - Spark's own wrapper
            pipeline.run_once()
        said = storage_full(caught.value)
        assert said is not None and "alert ledger" in said and "disk is full" in said
        assert pipeline.stats.ledger_errors >= 1
        assert ledger.history() == [] and not alerts.exists()

        filler.free()
        pipeline.run_once()  # the queries started again on their checkpoints
        got = [json.loads(x) for x in alerts.read_text().splitlines()]
        keys = [(a["alert_id"], a["status"]) for a in got]
        assert len(keys) == len(set(keys)) == len(ledger.history())
        mine = sorted(
            (a["event_time"], a["status"], a["job_id"])
            for a in got
            if a["detector"] == "checkpoint_failures"
        )
        want = sorted(
            (a["event_time"], a["status"], a["job_id"]) for v in expected.values() for a in v
        )
        assert mine == want  # the failed batch was run again: nothing skipped
        ledger.close()
