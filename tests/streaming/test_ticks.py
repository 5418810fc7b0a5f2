"""Ticks: the driver's evidence that time passed when nothing arrives."""

from __future__ import annotations

import json
from types import SimpleNamespace

from streaming.ticks import Ticker, frontier, hold_value, holding, read_past, tick_value, woken


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
    ticker = Ticker(lambda: dict(ends), lambda t, s: sent.append(t), interval_s=5, clock=clock)
    ticker.poll(_progress(logs={"0": 3}))  # takes a tick at t=1000 s: offsets up to 10
    assert sent == []
    clock.t += 1
    ticker.poll(_progress(logs={"0": 9}))  # not yet read past 10
    assert sent == []
    clock.t += 0.25
    ticker.poll(_progress(logs={"0": 10}))  # read past: sent at once, not at the interval
    assert sent == [1_000_000]
    # The next tick is taken only once the interval has passed, with its own offsets.
    ends["logs"]["0"] = 12
    ticker.poll(_progress(logs={"0": 12}))
    assert len(sent) == 1
    clock.t += 4
    ticker.poll(_progress(logs={"0": 12}))  # taken at 1005.25 s; nothing new since: sent
    ticker.poll(_progress(logs={"0": 12}))
    assert sent[-1] == 1_005_250


def test_ticks_follow_the_deadlines_and_name_the_shards_they_wake() -> None:
    clock, sent, looked = Clock(), [], {"n": 0}
    due: dict[str, int | None] = {}

    def ends() -> dict:
        looked["n"] += 1
        return {"logs": {"0": 10}}

    read = _progress(logs={"0": 10})
    ticker = Ticker(
        ends,
        lambda t, s: sent.append((t, s)),
        interval_s=1,
        wakes=lambda t: woken(due, 3, t),
        clock=clock,
    )
    # Not every shard has reported since the start: the first tick goes to all of them.
    ticker.poll(read)
    ticker.poll(read)
    assert sent == [(1_000_000, None)]
    # Every shard reported: nothing due for a minute. No tick is taken, Kafka is not
    # even asked for its offsets, however long the wait.
    due.update({"0": None, "1": 1_060_000, "2": None})
    asked = looked["n"]
    for _ in range(200):
        clock.t += 0.25
        ticker.poll(read)
    assert len(sent) == 1
    assert looked["n"] == asked
    # Shard 1 comes due: a tick for it alone, at once.
    clock.t = 1060.5
    ticker.poll(read)
    ticker.poll(read)
    assert sent[-1] == (1_060_500, [1])
    # A shard that records woke meanwhile (its due time moved on) gets no tick.
    clock.t += 2
    due["2"] = 1_062_000
    ticker.poll(_progress(logs={"0": 3}))  # taken; not read yet
    due["2"] = 1_090_000
    due["1"] = 1_090_000
    ticker.poll(read)
    assert len(sent) == 2


def test_a_tick_wakes_the_shards_due_by_its_time() -> None:
    due: dict[str, int | None] = {"0": 5, "1": None, "2": 9}
    assert woken(due, 4, 100) is None  # shard 3 never reported
    due["3"] = 100
    assert woken(due, 4, 99) == [0, 2]
    assert woken(due, 4, 100) == [0, 2, 3]
    assert woken({"0": None, "1": None}, 2, 10**15) == []


def test_a_tick_that_cannot_reach_kafka_is_tried_again(caplog) -> None:
    clock, calls = Clock(), {"n": 0}

    def ends() -> dict:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("broker down")
        return {"logs": {"0": 0}}

    sent: list[int] = []
    ticker = Ticker(ends, lambda t, s: sent.append(t), interval_s=5, clock=clock)
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
    assert frontier(seen, [(tick_value(5000, 0, 2), None)]) is None
    assert frontier(seen, [(tick_value(7000, 0, 2), None)]) is None
    assert frontier(seen, [(tick_value(6000, 1, 2), None)]) == 6000
    assert frontier(seen, [(tick_value(9000, 1, 2), None), ("not a tick", None)]) == 7000
    # A partition added to the bus counts once its ticks say so.
    assert frontier(seen, [(tick_value(9500, 0, 3), None)]) is None


def test_a_driver_clock_ahead_of_the_broker_moves_no_deadline_early() -> None:
    # In cluster mode the driver's clock may run ahead of the brokers' and the executors'
    # (the bus's clock): a tick of the driver's time judged every deadline that much early.
    # A tick's time is the broker's, taken before the raw topics' end offsets are read.
    driver, broker = Clock(), {"ms": 400_000_000}
    driver.t = broker["ms"] / 1000 + 600  # ten minutes ahead
    due: dict[str, int | None] = {"0": broker["ms"] + 5_000}
    sent: list[tuple[int, list[int] | None]] = []
    ticker = Ticker(
        lambda: {"logs": {"0": 10}},
        lambda t, s: sent.append((t, s)),
        interval_s=1,
        wakes=lambda t: woken(due, 1, t),
        clock=driver,
        mark=lambda: broker["ms"],
    )
    read = _progress(logs={"0": 10})
    for _ in range(4):  # the broker's clock is 5 s short of the shard's due time
        ticker.poll(read)
        driver.t += 1
        broker["ms"] += 1000
    assert sent == []
    broker["ms"] += 1000
    driver.t += 1
    ticker.poll(read)
    ticker.poll(read)
    assert sent == [(400_005_000, [0])]


def test_catch_up_marks_hold_a_shard_until_every_partition_is_released() -> None:
    held: dict[str, int] = {}
    assert holding(held, [(hold_value(True, 5, p), None) for p in (0, 1)])
    assert holding(held, [(tick_value(9_000, 0, 2), None), (hold_value(False, 6, 0), None)])
    assert not holding(held, [(hold_value(False, 6, 1), None), ("not a mark", None)])
    # A mark claims no time: the ticks' frontier is the ticks' alone.
    seen: dict[str, int] = {}
    assert frontier(seen, [(hold_value(True, 99_000, p), None) for p in (0, 1)]) is None
    assert frontier(seen, [(tick_value(7_000, p, 2), None) for p in (0, 1)]) == 7_000


class _Marks:
    def __init__(self) -> None:
        self.sent: list[bool] = []

    def __call__(self, hold: bool) -> None:
        self.sent.append(hold)


def test_a_parse_query_that_starts_behind_holds_until_it_reads_past_a_tick_promptly() -> None:
    clock, marks, ticks = Clock(), _Marks(), []
    ends = {"logs": {"0": 1_000}}
    ticker = Ticker(
        lambda: {"logs": dict(ends["logs"])},
        lambda t, s: ticks.append(t),
        interval_s=1,
        wakes=lambda _t: [],  # no shard due: ticks are taken only to measure the catch-up
        clock=clock,
        send_hold=marks,
        caught_up_s=12,
    )
    ticker.start(backlog=0)
    assert marks.sent == [False] and not ticker.held  # nothing to read: released at once
    ticker.start(backlog=50_000)
    assert marks.sent == [False, True] and ticker.held
    ticker.poll(_progress(logs={"0": 200}))  # takes a tick at 1000 s: offsets up to 1,000
    clock.t += 40
    ends["logs"]["0"] = 1_100
    ticker.poll(_progress(logs={"0": 1_000}))  # read past it 40 s later: still catching up
    assert ticker.held and marks.sent == [False, True]
    ticker.poll(_progress(logs={"0": 1_000}))  # the next tick, at 1040 s
    clock.t += 3
    ticker.poll(_progress(logs={"0": 1_100}))  # read past it 3 s later: caught up
    assert not ticker.held and marks.sent == [False, True, False]
    assert ticks == []  # no shard was due: no tick written


def test_a_parse_query_that_only_keeps_up_is_released_once_it_stops_gaining() -> None:
    # A saturated machine: the parse query stays 30 s behind its input. Held for good,
    # it would leave every deadline to the ticks; it is released once it stops gaining.
    clock, marks = Clock(), _Marks()
    offset = {"n": 100}
    ticker = Ticker(
        lambda: {"logs": {"0": offset["n"]}},
        lambda t, s: None,
        interval_s=1,
        wakes=lambda _t: [],
        clock=clock,
        send_hold=marks,
        caught_up_s=12,
    )
    ticker.start(backlog=10)
    behind = [60, 31, 29]
    for i, lag in enumerate(behind):
        ticker.poll(_progress(logs={"0": offset["n"] - 1}))  # takes a tick
        clock.t += lag
        ticker.poll(_progress(logs={"0": offset["n"]}))
        offset["n"] += 100
        assert ticker.held == (i == 0)
    assert marks.sent == [True, False]


def test_ticks_turned_off_while_held_release_the_shards() -> None:
    # A reload that sets tick_interval_s to 0 leaves nothing to end a hold: it ends now.
    marks = _Marks()
    ticker = Ticker(lambda: {}, lambda t, s: None, interval_s=1, clock=Clock(), send_hold=marks)
    ticker.start(backlog=5)
    ticker.interval_s = 0
    ticker.poll(None)
    assert not ticker.held and marks.sent == [True, False]


def test_marks_count_in_the_order_they_reached_the_bus_whatever_the_rows_order() -> None:
    held: dict[str, int] = {}
    late_first = [(hold_value(False, 7, 0), 2_000), (hold_value(True, 5, 0), 1_000)]
    assert not holding(held, late_first)


def test_a_mark_that_could_not_be_written_is_released_once_the_brokers_answer() -> None:
    # Half written, a hold may hold some partitions: the ticker counts itself held, and
    # its next prompt read writes the release.
    clock, sent = Clock(), []
    failing = {"n": 1}

    def send_hold(hold: bool) -> None:
        if failing["n"]:
            failing["n"] -= 1
            raise OSError("broker away")
        sent.append(hold)

    ticker = Ticker(
        lambda: {"logs": {"0": 5}}, lambda t, s: None, interval_s=1, wakes=lambda _t: [],
        clock=clock, send_hold=send_hold,
    )  # fmt: skip
    ticker.start(backlog=10)
    assert ticker.held and sent == []
    ticker.poll(_progress(logs={"0": 1}))
    clock.t += 1
    ticker.poll(_progress(logs={"0": 5}))
    assert not ticker.held and sent == [False]
