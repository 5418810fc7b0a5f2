"""The entity cap through a real detect query: it counts entities, and refuses past it.

A shard keeps its entities packed in one state value, so the state store's row count
(what the cap once compared) says how many shards have state, not how many jobs and
TaskManagers are watched. The shards' own counts do.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from conf import AppConfig
from conf.running import RunningConfig
from sinks import AlertLedger
from streaming.app import Pipeline
from streaming.delivery import Outputs
from streaming.sources import file_records

pytestmark = pytest.mark.spark


def job_log(job_id: str, minute: int) -> str:
    """Two checkpoints of one job, completed (an entity for the job-scope detectors)."""
    lines = []
    for i in range(2):
        t = f"2024-06-03 10:{minute + i:02d}:00"
        cp = 100 + i
        lines += [
            f"{t},007 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator     - "
            f"Triggering checkpoint {cp} @ 1717408800007 for job {job_id}.",
            f"{t},850 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator     - "
            f"Completed checkpoint {cp} for job {job_id} (1348213 bytes in 843 ms).",
        ]
    return "\n".join(lines) + "\n"


def jobs(first: int, n: int) -> list[str]:
    return [f"{i:032x}" for i in range(first, first + n)]


def run(pipeline: Pipeline) -> object:
    """Every query over what is there (``Pipeline.run_once``), returning the detect query."""
    detect = None
    for start in pipeline.starters():
        q = start()
        q.awaitTermination()
        assert q.exception() is None
        if q.name == "flinkwatch-detect":
            detect = q
    return detect


def test_the_detect_query_counts_entities_not_state_rows_and_refuses_past_the_cap(
    spark: SparkSession, tmp_path: Path
) -> None:
    logs, metrics = tmp_path / "logs", tmp_path / "metrics"
    logs.mkdir()
    metrics.mkdir()
    for k, job_id in enumerate(jobs(1, 40)):
        (logs / f"jm-{k}.log").write_text(job_log(job_id, k % 50))
    cfg = AppConfig.model_validate(
        {"spark": {"state_shards": 4, "max_entities": 30, "entity_cap_min_dwell_s": 0}}
    )
    pipeline = Pipeline(
        spark=spark,
        config=RunningConfig(cfg),
        logs=lambda: file_records(spark, logs, kind="log"),
        metrics=lambda: file_records(spark, metrics, kind="metric"),
        outputs=Outputs(ledger=AlertLedger(tmp_path / "ledger.sqlite")),
        checkpoint_dir=tmp_path / "checkpoints",
        deadletter_dir=tmp_path / "dead",
        trigger={"availableNow": True},
    )
    detect = run(pipeline)
    assert pipeline.stats.entities() == 40  # forty jobs, over four shards
    state_rows = sum(op.numRowsTotal for op in detect.lastProgress.stateOperators)  # type: ignore[attr-defined]
    # What the cap compared before: a few rows per shard, whatever the entity count.
    assert state_rows != 40 and state_rows <= 4 * 4
    assert pipeline.admission() and not pipeline.admit_new  # 40 > 30: refuse

    # Run on the same checkpoints, refusing: five new jobs are counted, not watched; the
    # forty known ones are watched as before.
    for k, job_id in enumerate(jobs(100, 5)):
        (logs / f"new-{k}.log").write_text(job_log(job_id, 52))
    run(pipeline)
    assert pipeline.stats.entities() == 40
    assert sum(pipeline.stats.entities_refused.values()) >= 5
    assert "checkpoint_creep" in pipeline.stats.entities_refused
