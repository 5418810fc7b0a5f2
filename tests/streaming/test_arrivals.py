"""How an entity's events arrive (``streaming/arrivals.py``): repeats, catch-up order."""

from __future__ import annotations

import json

from streaming.arrivals import fresh, in_step
from streaming.entity import CATCHUP_IDLE_MS, Header
from streaming.forwards import encode
from streaming.routes import BusEvent, decode

T0 = 1_700_000_000_000


def _bus(src: str, offset: int, seq: int = 0, t: int = T0) -> BusEvent:
    return decode(
        json.dumps({"kind": "metric", "event_ms": t, "src": src, "offset": offset, "seq": seq})
    )


def _positions(events: list[BusEvent]) -> list[tuple[str | None, int, int]]:
    return sorted((e.src, e.offset, e.seq) for e in events)


def test_repeats_of_applied_records_are_dropped_per_source() -> None:
    header = Header()
    first = [_bus("logs:0", 10), _bus("metrics:1", 7, 0), _bus("metrics:1", 7, 1)]
    assert len(fresh(first, header)) == 3
    assert {s: v[:2] for s, v in header.seen.items()} == {"logs:0": [10, 0], "metrics:1": [7, 1]}
    # After a restart the parse query writes its last batch again, then goes on.
    again = [
        _bus("logs:0", 10),
        _bus("metrics:1", 7, 1),
        _bus("metrics:1", 7, 2),
        _bus("logs:0", 11),
        _bus("logs:0", 11),  # twice in one batch
        _bus("logs:1", 3),  # a source not seen yet
    ]
    assert _positions(fresh(again, header)) == [
        ("logs:0", 11, 0),
        ("logs:1", 3, 0),
        ("metrics:1", 7, 2),
    ]


def test_repeats_are_dropped_whatever_the_number_of_source_partitions() -> None:
    # A keyless shipper spreads one entity's records over every raw partition: with only
    # the last 16 sources remembered, 8 of 24 repeats were applied again (issue #22).
    header = Header()
    first = [_bus(f"flink.logs:{p}", 100 + p) for p in range(48)]
    assert len(fresh(first, header)) == 48
    assert fresh(first, header) == []


def test_a_source_silent_for_an_hour_of_event_time_is_forgotten() -> None:
    header = Header()
    fresh([_bus("old:0", 1, t=T0), _bus("live:0", 1, t=T0)], header)
    fresh([_bus("live:0", 2, t=T0 + 3_600_001)], header)
    assert set(header.seen) == {"live:0"}


def test_held_events_wait_for_the_slowest_source_that_is_not_idle() -> None:
    header = Header(seen={"logs:0": [5, 0, 1_000], "metrics:0": [9, 0, 40_000]})
    arrived = [_bus("metrics:0", 8, t=30_000), _bus("logs:0", 5, t=1_000)]
    applied = in_step(header, arrived, held=True)
    assert [e.event.time_ms for e in applied] == [1_000]
    assert [decode(v, b).event.time_ms for v, b in header.held] == [30_000]
    # A source silent for CATCHUP_IDLE_MS of the entity's time is idle: not waited for.
    header.seen["logs:1"] = [1, 0, 40_000 - CATCHUP_IDLE_MS - 1]
    assert [e.event.time_ms for e in in_step(header, [], held=True)] == []
    header.seen["logs:0"] = [6, 0, 35_000]
    assert [e.event.time_ms for e in in_step(header, [], held=True)] == [30_000]
    # A tick says every record up to the entity's clock by it is on the bus: reached.
    header.held = [[_enc(38_000), 38_000]]
    assert [e.event.time_ms for e in in_step(header, [], held=True)] == []
    assert [e.event.time_ms for e in in_step(header, [], held=True, ticked=39_000)] == [38_000]
    # Released: everything that waited, in time order.
    header.held = [[v, b] for v, b in ((_enc(50_000), 50_000), (_enc(45_000), 45_000))]
    assert [e.event.time_ms for e in in_step(header, [], held=False)] == [45_000, 50_000]
    assert header.held == []


def _enc(t: int) -> str:
    return encode(_bus("metrics:0", t, t=t))
