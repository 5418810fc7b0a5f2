"""How the parse query places records on the event bus, and when the count may change.

Through a real broker and real queries:
tests/integration/test_kafka_e2e.py::test_partitions_added_to_the_bus_lose_no_record_of_a_lagging_entity.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from conf import AppConfig, OutputConfig
from conf.running import RunningConfig
from streaming import placement
from streaming.app import Pipeline
from streaming.placement import Placement, decide, record, recorded


def test_the_recorded_count_is_kept_while_the_topic_has_as_many_partitions() -> None:
    # Records still unread change nothing: nothing moves.
    assert decide("bus", 2, 2, unread=500) == Placement("bus", 2, 2)


def test_added_partitions_wait_until_the_detect_query_has_read_the_bus(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="streaming.placement"):
        held = decide("bus", 2, 6, unread=40)
    assert held == Placement("bus", None, 6, held=True)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(
        "bus: topic bus has 6 partitions and its records were placed by 2 of them: the parse "
        "query waits until the detect query has read the 40 records the bus holds, then "
        "places records by 6"
    )
    # Read to its end: no entity has a record left in its old partition.
    assert decide("bus", 2, 6, unread=0) == Placement("bus", 6, 6)


def test_without_a_record_an_empty_bus_is_placed_at_once_and_a_full_one_waits() -> None:
    # A bus flinkwatch has just created.
    assert decide("bus", None, 2, unread=0) == Placement("bus", 2, 2)
    # Upgrading from a release that let Kafka's partitioner place the records: another
    # hash, so another partition for most entities.
    assert decide("bus", None, 2, unread=3).held


def test_the_record_keeps_each_topic_and_an_unreadable_one_counts_as_none(tmp_path: Path) -> None:
    path = tmp_path / "state" / placement.RECORD_NAME
    assert recorded(path, "a") is None
    record(path, "a", 2)
    record(path, "b", 4)
    record(path, "a", 3)
    assert (recorded(path, "a"), recorded(path, "b"), recorded(path, "c")) == (3, 4, None)
    path.write_text("{not json")
    assert recorded(path, "a") is None


def _pipeline(tmp_path: Path) -> Pipeline:
    cfg = AppConfig(output=OutputConfig(state_dir=tmp_path))
    return Pipeline(
        spark=None,  # type: ignore[arg-type]
        config=RunningConfig(cfg),
        outputs=None,  # type: ignore[arg-type]
        checkpoint_dir=cfg.output.checkpoint_dir,
        deadletter_dir=cfg.output.deadletter_path,
        bus="kafka",
    )


def test_a_start_holds_the_parse_query_until_drained_then_records_the_new_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _pipeline(tmp_path)
    topic = p.cfg.kafka.events_topic or ""
    # The record lives beside the checkpoints: a checkpoint reset keeps the placement.
    assert p.path.placement_record(p) == tmp_path / placement.RECORD_NAME
    record(p.path.placement_record(p), topic, 2)
    bus = {"parts": 4, "unread": 7}
    asked: list[Path] = []

    def backlog(cfg: object, checkpoint: Path) -> tuple[int, int]:
        asked.append(checkpoint)
        return bus["parts"], bus["unread"]

    monkeypatch.setattr(placement, "bus_backlog", backlog)
    starters = p.starters()
    assert p.parse_held and p.start_parse not in starters
    assert starters == [p.start_detect, p.start_deadletters]
    assert asked[-1] == p.detect_checkpoint
    assert recorded(p.path.placement_record(p), topic) == 2  # nothing moved yet
    assert not p.bus_drained()
    bus["unread"] = 0
    assert p.bus_drained()
    assert p.starters() == [p.start_parse, p.start_detect, p.start_deadletters]
    assert p.path.placement == Placement(topic, 4, 4)
    assert recorded(p.path.placement_record(p), topic) == 4


def test_a_stale_detect_checkpoint_is_set_aside_before_the_placement_reads_its_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = _pipeline(tmp_path)
    current = p.detect_checkpoint
    assert isinstance(current, Path)
    newer = current.with_name(current.name.replace(f"shards{p.cfg.spark.state_shards}", "shards7"))
    for directory, at in ((current, 1_000.0), (newer, 2_000.0)):
        (directory / "commits").mkdir(parents=True)
        (directory / "commits" / "0").write_text("v1\n{}")
        os.utime(directory / "commits" / "0", (at, at))
    seen: list[bool] = []

    def backlog(cfg: object, checkpoint: Path) -> tuple[int, int]:
        seen.append(checkpoint.exists())
        return 1, 0

    monkeypatch.setattr(placement, "bus_backlog", backlog)
    p.starters()
    assert seen == [False]  # the stale offsets were never read
    assert [d.name.split(".stale-")[0] for d in current.parent.glob("*.stale-*")] == [current.name]
