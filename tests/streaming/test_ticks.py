"""Ticks: the driver's evidence that time passed when nothing arrives."""

from __future__ import annotations

import json
from types import SimpleNamespace

from streaming.ticks import Ticker, frontier, read_past, tick_value


def _progress(**ends: dict[str, int]) -> SimpleNamespace:
    return SimpleNamespace(
        sources=[SimpleNamespace(endOffset=json.dumps({t: parts})) for t, parts in ends.items()]
    )


def test_a_query_read_past_offsets_only_when_every_partition_is_there() -> None:
    target = {"logs": {"0": 10, "1": 5}, "metrics": {"0": 7}}
    assert read_past(_progress(logs={"0": 10, "1": 6}, metrics={"0": 7}), target)
    assert not read_past(_progress(logs={"0": 10, "1": 4}, metrics={"0": 7}), target)
    assert not read_past(_progress(logs={"0": 10, "1": 5}), target)  # a topic not read yet
    assert not read_past(None, target)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_tick_is_sent_only_once_the_parse_query_read_what_the_raw_topics_held() -> None:
    clock, sent = Clock(), []
    ends = {"logs": {"0": 10}}
    ticker = Ticker(lambda: dict(ends), sent.append, interval_s=5, clock=clock)
    ticker.poll(_progress(logs={"0": 3}))  # takes a tick at t=1000 s: offsets up to 10
    assert sent == []
    clock.t += 5
    ticker.poll(_progress(logs={"0": 9}))  # not yet read past 10
    assert sent == []
    clock.t += 2
    ticker.poll(_progress(logs={"0": 10}))  # within the interval: not looked at
    assert sent == []
    clock.t += 3
    ticker.poll(_progress(logs={"0": 10}))
    assert sent == [1_000_000]
    # The next tick is taken at once, with the offsets of its own time.
    ends["logs"]["0"] = 12
    clock.t += 5
    ticker.poll(_progress(logs={"0": 12}))
    assert sent[-1] == 1_010_000


def test_a_tick_that_cannot_reach_kafka_is_tried_again(caplog) -> None:
    clock, calls = Clock(), {"n": 0}

    def ends() -> dict:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("broker down")
        return {"logs": {"0": 0}}

    sent: list[int] = []
    ticker = Ticker(ends, sent.append, interval_s=5, clock=clock)
    ticker.poll(None)
    assert "cannot read the raw topics" in caplog.text
    clock.t += 5
    ticker.poll(_progress(logs={"0": 0}))
    clock.t += 5
    ticker.poll(_progress(logs={"0": 0}))
    assert len(sent) == 1


def test_the_frontier_is_the_time_every_bus_partition_has_reached() -> None:
    # A micro-batch may read the bus's partitions unevenly: a tick read on one partition
    # says nothing of records still unread on another.
    seen: dict[str, int] = {}
    assert frontier(seen, [tick_value(5000, 0, 2)]) is None
    assert frontier(seen, [tick_value(7000, 0, 2)]) is None
    assert frontier(seen, [tick_value(6000, 1, 2)]) == 6000
    assert frontier(seen, [tick_value(9000, 1, 2), "not a tick"]) == 7000
    # A partition added to the bus counts once its ticks say so.
    assert frontier(seen, [tick_value(9500, 0, 3)]) is None
