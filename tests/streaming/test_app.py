"""The pipeline's two paths and its one config holder (no Spark started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf import AppConfig, SparkConfig
from conf.running import RunningConfig
from streaming.app import Pipeline
from streaming.bus_paths import FilesPath, KafkaPath, _kafka_ticker


def _pipeline(tmp_path: Path, bus: str, running: RunningConfig) -> Pipeline:
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
    p = _pipeline(tmp_path, "kafka", running)
    assert p.detect_checkpoint.name.startswith("detect-kafka-shards4-")
    running.swap(AppConfig(spark=SparkConfig(state_shards=8)))
    assert p.cfg is running.current
    assert p.detect_checkpoint.name.startswith("detect-kafka-shards8-")
    # The shards' keys follow the partitions they spread over (streaming.shard_keys).
    running.swap(AppConfig(spark=SparkConfig(state_shards=8, shuffle_partitions=4)))
    assert p.detect_checkpoint.name.startswith("detect-kafka-shards8-p4-")


def test_only_the_live_path_keeps_state_between_starts(tmp_path: Path) -> None:
    files = _pipeline(tmp_path, "files", RunningConfig(AppConfig()))
    assert isinstance(files.path, FilesPath)
    # The tests' layout holds nothing back, never switches the parse query's mode and has
    # read its bus.
    assert (files.parse_held, files.parse_switch(ask_brokers=True)) == (False, None)
    assert files.bus_drained()
    live = _pipeline(tmp_path, "kafka", RunningConfig(AppConfig()))
    assert isinstance(live.path, KafkaPath)
    assert (live.path.parse_plan, live.path.placement, live.path.ticker) == (None, None, None)
    # No parse query started: nothing to switch, and the brokers are not asked.
    assert not live.parse_held and live.parse_switch(ask_brokers=True) is None
    assert live.path.realtime_wanted(live)  # spark.parse_mode: realtime, no pinned trigger
    live.trigger = {"availableNow": True}
    assert not live.path.realtime_wanted(live)
    # Each pipeline has its own path: a second run's state is not the first's.
    assert _pipeline(tmp_path, "kafka", RunningConfig(AppConfig())).path is not live.path


class _Producer:
    """What the ticker asks of kafka-python's producer, and whether it was closed."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []
        self.closed = False

    def partitions_for(self, topic: str) -> set[int]:
        return {0, 1}

    def send(self, topic: str, key: bytes, value: bytes, partition: int) -> None:
        self.sent.append((topic, partition))

    def flush(self, timeout: float) -> None:
        pass

    def close(self, timeout: float) -> None:
        self.closed = True


def test_closing_the_pipeline_closes_the_tickers_producer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Left open, kafka-python's network thread outlives the run: after the bench deleted
    # the bus topic it polled for it at a core (issue #34).
    made: list[_Producer] = []

    def connect(*_args: object, **_kw: object) -> _Producer:
        made.append(_Producer())
        return made[-1]

    monkeypatch.setattr("streaming.topics.connect", connect)
    live = _pipeline(tmp_path, "kafka", RunningConfig(AppConfig()))
    live.close()  # before any tick: no producer was made, none is opened to close it
    assert made == []
    live.path.ticker = _kafka_ticker(live.cfg)
    live.path.ticker.send(1_000, None)
    assert made[0].sent == [(live.cfg.kafka.events_topic, 0), (live.cfg.kafka.events_topic, 1)]
    assert not made[0].closed
    live.close()
    assert made[0].closed and len(made) == 1
