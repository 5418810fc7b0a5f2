"""A query's next micro-batch reuses the code Spark generated for the last one (issue #34).

Spark caches the classes it generates (and Janino compiles) by their source text. A value
that changes from batch to batch and is written into a plan as a literal (a time, a batch
id, a config read per batch) changes the source, so every batch compiles and loads new
classes, and the JVM's JIT compiles their hot methods again: a cost that never warms up.
Counted with Spark's own codegen metric (``CodegenMetrics``: one sample per class
compiled), not with time.

One such literal is Spark's and stays: the detect query's transformWithState drops rows
older than the watermark with a predicate whose source carries the watermark itself
(``WatermarkSupport.watermarkExpression``: ``event_time <= <watermark in µs>``), so a
batch that moves the watermark compiles one ``SpecificPredicate`` (measured live: ~13 ms of
Janino, one small class). Nothing else may.
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

JOB = "00000000000000000000000000000a11"


def checkpoints(minute: int) -> str:
    """Two completed checkpoints of one job at ``minute`` (the same shape every round)."""
    lines = []
    for i in range(2):
        t = f"2024-06-03 10:{minute:02d}:{i * 10:02d}"
        cp = 100 + minute * 2 + i
        lines += [
            f"{t},007 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator     - "
            f"Triggering checkpoint {cp} @ 1717408800007 for job {JOB}.",
            f"{t},850 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator     - "
            f"Completed checkpoint {cp} for job {JOB} (1348213 bytes in 843 ms).",
        ]
    return "\n".join(lines) + "\n"


def compiled(spark: SparkSession) -> int:
    """Classes Spark's code generator has compiled in this JVM so far."""
    jvm = spark.sparkContext._jvm  # noqa: SLF001 - Spark's codegen metrics live in the JVM
    assert jvm is not None
    return int(
        jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()
    )


def test_a_running_querys_later_batches_compile_only_the_watermark_predicate(
    spark: SparkSession, tmp_path: Path
) -> None:
    logs, metrics = tmp_path / "logs", tmp_path / "metrics"
    logs.mkdir()
    metrics.mkdir()
    pipeline = Pipeline(
        spark=spark,
        config=RunningConfig(AppConfig()),
        logs=lambda: file_records(spark, logs, kind="log"),
        metrics=lambda: file_records(spark, metrics, kind="metric"),
        outputs=Outputs(ledger=AlertLedger(tmp_path / "ledger.sqlite")),
        checkpoint_dir=tmp_path / "checkpoints",
        deadletter_dir=tmp_path / "dead",
        # Running queries, as `flinkwatch run` has them: a start plans and compiles
        # afresh; what must not is each batch after it.
        trigger={"processingTime": "200 milliseconds"},
    )
    queries = {q.name: q for q in pipeline.start()}
    detect = queries["flinkwatch-detect"]

    def fed() -> int:
        """Detect batches that read rows so far."""
        return sum(1 for p in detect.recentProgress if p.numInputRows > 0)

    def batch(minute: int) -> None:
        """New lines, later in event time; wait until the detect query has read them."""
        want = fed() + 1
        (logs / f"jm-{minute}.log").write_text(checkpoints(minute))
        while fed() < want:
            for q in queries.values():
                assert q.exception() is None
                assert q.isActive
            detect.awaitTermination(0.2)

    try:
        for minute in range(3):  # the plans' first compiles
            batch(minute)
        before, batches = compiled(spark), detect.lastProgress.batchId
        for minute in range(3, 6):
            batch(minute)
        new, batches = compiled(spark) - before, detect.lastProgress.batchId - batches
    finally:
        for q in queries.values():
            q.stop()
    # Each batch with rows moved the watermark (each round is a minute later): at most
    # one predicate per batch run since, with or without rows.
    assert new <= batches, f"{new} classes compiled over {batches} detect batches"
