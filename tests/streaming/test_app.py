"""The pipeline and its one config holder (no Spark started)."""

from __future__ import annotations

from pathlib import Path

from conf import AppConfig, SparkConfig
from conf.running import RunningConfig
from streaming.app import Pipeline


def pipeline_of(tmp_path: Path, bus: str, running: RunningConfig) -> Pipeline:
    """A pipeline on ``bus`` that starts no Spark: what it decides without queries."""
    return Pipeline(
        spark=None,  # type: ignore[arg-type]
        config=running,
        outputs=None,  # type: ignore[arg-type]
        checkpoint_dir=tmp_path,
        deadletter_dir=tmp_path,
        bus=bus,  # type: ignore[arg-type]
    )


def test_the_pipeline_reads_the_holder_it_was_given_at_each_use(tmp_path: Path) -> None:
    running = RunningConfig(AppConfig(spark=SparkConfig(state_shards=4)))
    p = pipeline_of(tmp_path, "kafka", running)
    assert p.detect_checkpoint.name.startswith("detect-kafka-shards4-")
    running.swap(AppConfig(spark=SparkConfig(state_shards=8)))
    assert p.cfg is running.current
    assert p.detect_checkpoint.name.startswith("detect-kafka-shards8-")
    # The shards' keys follow the partitions they spread over (streaming.shard_keys).
    running.swap(AppConfig(spark=SparkConfig(state_shards=8, shuffle_partitions=4)))
    assert p.detect_checkpoint.name.startswith("detect-kafka-shards8-p4-")
