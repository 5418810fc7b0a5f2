"""A damaged saved state through a real detect query: one entity goes, the fleet does not.

A value that did not decompress raised out of the shard's turn: the task failed, the
query replayed into the same error, and after ``spark.max_restarts`` the job exited.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import streaming.app
from conf import AppConfig
from conf.running import RunningConfig
from detectors import AlertStatus
from sinks import AlertLedger
from streaming.app import Pipeline
from streaming.delivery import Outputs
from streaming.sources import file_records
from tests.streaming.damage import VICTIM, DamagingProcessor

pytestmark = pytest.mark.spark

OTHER = "e" * 32
CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] -"


def expiries(job_id: str, hour: int, first: int) -> str:
    """Four checkpoints of a job, each expired: ``checkpoint_failures`` pages."""
    lines = []
    for i in range(4):
        cp, t = first + i, f"2024-06-03 {hour:02d}:{10 * i:02d}:00"
        lines += [
            f"{t},005 INFO  {CC} Triggering checkpoint {cp} @ 1717408200005 for job {job_id}.",
            f"{t[:-5]}{10 * i + 5:02d}:00,005 INFO  {CC} Checkpoint {cp} of job {job_id} "
            "expired before completing.",
        ]
    return "\n".join(lines) + "\n"


def run(pipeline: Pipeline) -> None:
    for start in pipeline.starters():
        q = start()
        q.awaitTermination()
        assert q.exception() is None


def test_a_damaged_entity_state_is_dropped_and_the_rest_of_its_shard_still_pages(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    logs, metrics = tmp_path / "logs", tmp_path / "metrics"
    logs.mkdir()
    metrics.mkdir()
    (logs / "victim.log").write_text(expiries(VICTIM[4:], 10, 100))
    ledger = AlertLedger(tmp_path / "ledger.sqlite")
    pipeline = Pipeline(
        spark=spark,
        # One shard for both.
        config=RunningConfig(AppConfig.model_validate({"spark": {"state_shards": 1}})),
        logs=lambda: file_records(spark, logs, kind="log"),
        metrics=lambda: file_records(spark, metrics, kind="metric"),
        outputs=Outputs(ledger=ledger),
        checkpoint_dir=tmp_path / "checkpoints",
        deadletter_dir=tmp_path / "dead",
        trigger={"availableNow": True},
    )
    run(pipeline)
    opened = {t.alert.alert_id for t in ledger.active() if t.alert.entity == VICTIM}
    assert opened

    # The victim's bytes come back damaged; the other job of its shard goes on.
    monkeypatch.setattr(streaming.app, "ShardProcessor", DamagingProcessor)
    (logs / "other.log").write_text(expiries(OTHER, 11, 500) + expiries(VICTIM[4:], 11, 200))
    run(pipeline)
    history = [a for a, _ in ledger.history()]
    assert any(a.entity == "job:" + OTHER and a.status is AlertStatus.FIRING for a in history)
    closed = [a for a in history if a.alert_id in opened and a.status is AlertStatus.RESOLVED]
    assert {a.alert_id for a in closed} == opened
    assert all("saved state was damaged" in a.summary for a in closed)
    assert pipeline.stats.state_damaged >= 1
    ledger.close()
