"""The two bus layouts a pipeline runs on: what each keeps between starts (no Spark started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conf import AppConfig
from conf.running import RunningConfig
from streaming.bus_paths import FilesPath, KafkaPath, _kafka_ticker
from tests.streaming.test_app import pipeline_of


def test_only_the_live_path_keeps_state_between_starts(tmp_path: Path) -> None:
    files = pipeline_of(tmp_path, "files", RunningConfig(AppConfig()))
    assert isinstance(files.path, FilesPath)
    # The tests' layout holds nothing back, never switches the parse query's mode and has
    # read its bus.
    assert (files.parse_held, files.parse_switch(ask_brokers=True)) == (False, None)
    assert files.bus_drained()
    live = pipeline_of(tmp_path, "kafka", RunningConfig(AppConfig()))
    assert isinstance(live.path, KafkaPath)
    assert (live.path.parse_plan, live.path.placement, live.path.ticker) == (None, None, None)
    # No parse query started: nothing to switch, and the brokers are not asked.
    assert not live.parse_held and live.parse_switch(ask_brokers=True) is None
    assert live.path.realtime_wanted(live)  # spark.parse_mode: realtime, no pinned trigger
    live.trigger = {"availableNow": True}
    assert not live.path.realtime_wanted(live)
    # Each pipeline has its own path: a second run's state is not the first's.
    assert pipeline_of(tmp_path, "kafka", RunningConfig(AppConfig())).path is not live.path


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
    live = pipeline_of(tmp_path, "kafka", RunningConfig(AppConfig()))
    live.close()  # before any tick: no producer was made, none is opened to close it
    assert made == []
    live.path.ticker = _kafka_ticker(live.cfg)
    live.path.ticker.send(1_000, None)
    assert made[0].sent == [(live.cfg.kafka.events_topic, 0), (live.cfg.kafka.events_topic, 1)]
    assert not made[0].closed
    live.close()
    assert made[0].closed and len(made) == 1
