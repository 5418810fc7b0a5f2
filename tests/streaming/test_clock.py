"""The detect query's sense of time (``streaming/clock.py``): when a deadline is decided."""

from __future__ import annotations

from streaming.clock import Clock, Lag, WakeUp


def test_the_records_frontier_is_the_newest_of_the_watermark_and_the_batch() -> None:
    assert Clock(1_000, delay_ms=500).records_ms == 1_500
    assert Clock(1_000, delay_ms=500, batch_ms=9_000).records_ms == 9_000
    assert Clock(1_000, delay_ms=500, batch_ms=900).records_ms == 1_500
    # A tick is the bus's own time, not a record's: it is no part of the records' frontier.
    assert Clock(1_000, delay_ms=500, tick_ms=4_000).records_ms == 1_500


def test_an_entity_of_unknown_lag_is_decided_by_the_watermark_alone() -> None:
    # The files bus: records carry no bus time, so only the watermark counts.
    clock = Clock(10_000, delay_ms=2_000, batch_ms=50_000)
    assert clock.now(None) == 48_000  # frontier less the watermark delay
    assert Clock(10_000, delay_ms=2_000).now(None) == 10_000


def test_a_known_lag_waits_grace_and_lag_behind_the_frontier() -> None:
    clock = Clock(10_000, delay_ms=2_000, grace_ms=1_000, tick_ms=30_000)
    assert clock.now(Lag(0, 5_000)) == 30_000 - 1_000 - 5_000  # a tick waits the bus lag
    assert clock.now(Lag(0, -7)) == 29_000  # a clock ahead of the bus counts as no lag
    # No grace given: the watermark delay.
    assert Clock(10_000, delay_ms=2_000, tick_ms=30_000).now(Lag(0, 5_000)) == 23_000
    # Never behind the watermark.
    assert Clock(10_000, delay_ms=0, grace_ms=0, tick_ms=11_000).now(Lag(0, 60_000)) == 10_000


def test_the_records_frontier_waits_for_how_far_behind_it_records_arrive() -> None:
    # Records on the bus 5 s after their event time, in step with every other record (a
    # parse that commits every 5 s): the records' frontier is as late as they are, so it
    # waits for the grace alone; a tick, the bus's own time, for the 5 s as well.
    lag = Lag(frontier_ms=0, bus_ms=5_000)
    records = Clock(10_000, delay_ms=2_000, grace_ms=1_000, batch_ms=30_000)
    assert records.now(lag) == 29_000
    assert Clock(10_000, delay_ms=2_000, grace_ms=1_000, tick_ms=30_000).now(lag) == 24_000
    # A shipper 3 s behind the other records: the records' frontier waits for it.
    assert records.now(Lag(frontier_ms=3_000, bus_ms=5_000)) == 26_000
    assert records.before_ms == 12_000  # the frontier before the batch: watermark + delay


def test_an_entity_wakes_when_the_watermark_or_the_frontier_reaches_its_deadline() -> None:
    clock = Clock(10_000, delay_ms=2_000, grace_ms=1_000)
    wake = clock.wake(20_000, Lag(500, 3_000))
    assert wake == WakeUp(20_000, 21_500, 24_000)
    assert not clock.due(wake)
    assert Clock(20_000).due(wake)  # the watermark reached it
    assert Clock(10_000, delay_ms=2_000, batch_ms=21_500).due(wake)  # the records did
    assert not Clock(10_000, delay_ms=2_000, batch_ms=21_499).due(wake)
    assert Clock(10_000, delay_ms=2_000, tick_ms=24_000).due(wake)  # a tick did
    assert not Clock(10_000, delay_ms=2_000, tick_ms=23_999).due(wake)
    # Spark's timer: the watermark at which records alone bring the frontier there.
    assert clock.timer(wake) == 19_500
    assert clock.timer(WakeUp(30_000, 24_000, 24_000)) == 22_000


def test_a_wake_up_saved_without_its_tick_is_due_by_its_frontier() -> None:
    # Saved as two numbers by a release before the two frontiers: a tick reaching its
    # frontier makes it due, as it did then.
    old = WakeUp(20_000, 24_000)
    assert old.by_tick == 24_000
    assert Clock(0, tick_ms=24_000).due(old)
    assert not Clock(0, tick_ms=23_999).due(old)


def test_a_held_clock_decides_by_ticks_alone() -> None:
    # The parse query catches up: its tasks race through the backlog unevenly, so neither
    # the records' newest time nor the watermark that follows it says what is to come.
    lag = Lag(frontier_ms=0, bus_ms=5_000)
    held = Clock(60_000, delay_ms=2_000, grace_ms=1_000, batch_ms=90_000, held=True)
    assert held.now(lag) == 0
    assert not held.due(WakeUp(10_000, 10_000, 100_000))  # the watermark and records past it
    ticked = Clock(60_000, delay_ms=2_000, grace_ms=1_000, tick_ms=30_000, held=True)
    assert ticked.now(lag) == 24_000
    assert ticked.due(WakeUp(10_000, 10_000, 24_000))
    assert not ticked.due(WakeUp(10_000, 10_000, 31_000))
