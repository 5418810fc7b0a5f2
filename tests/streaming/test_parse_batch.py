"""The parse query's micro-batch handler: a replayed batch rewrites, never duplicates."""

from __future__ import annotations

import json

import pytest

from conf import AppConfig
from sinks import DeadLetterFileSink
from streaming.bus import bus_events
from streaming.delivery import ParseBatch, PipelineStats
from streaming.events import parsed_events
from tests.conftest import records_df

pytestmark = pytest.mark.spark

LINES = [
    "2024-06-03 10:10:00,002 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - "
    "Checkpoint 1843 of job 3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3 expired before completing.",
    "2024-06-03 10:10:01,000 INFO  org.apache.flink.runtime.taskmanager.Task                    [] - "
    "Some chatter that no detector wants.",
    '{"level": "INFO", broken',
]


def test_a_replayed_batch_replaces_its_hop_file_and_dead_letters(spark, tmp_path) -> None:
    cfg = AppConfig()
    logs = records_df(spark, LINES)
    metrics = records_df(spark, [], topic="flink.metrics")
    batch = parsed_events(logs, metrics, cfg)
    hop = tmp_path / "events"
    stats = PipelineStats()
    handler = ParseBatch(cfg, hop, DeadLetterFileSink(tmp_path / "dead"), stats)
    handler(batch, 7)
    handler(batch, 7)  # Spark replays batch 7 after a crash
    files = sorted(p.name for p in hop.iterdir())
    assert files == ["batch-0000000007-0.parquet"]
    rows = bus_events(spark.read.parquet(str(hop))).collect()
    # One bus record per entity scope that reads it: the job's detectors, keyed by the job.
    assert [(r["entity"], r["kind"], r["checkpoint_id"], r["src"], r["offset"]) for r in rows] == [
        ("job:3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3", "checkpoint_expired", 1843, "flink.logs:0", 0)
    ]
    dead = list((tmp_path / "dead").glob("*.jsonl"))
    assert len(dead) == 1
    assert [json.loads(x)["error"] for x in dead[0].read_text().splitlines()] == ["invalid_json"]
    assert not list(tmp_path.glob(".hop-tmp-*"))
    assert stats.kinds == {"checkpoint_expired": 1, "unparsed": 1}
    assert stats.dead_letters == {"invalid_json": 1}
    # A replay's progress: every record of the batch once, and how far in event time.
    assert stats.records_read == 3
    assert stats.newest_event_ms in (1_717_409_400_002, 1_717_409_401_000)  # 10:10:00.002 / :01
