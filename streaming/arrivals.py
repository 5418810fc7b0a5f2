"""How an entity's events arrive from the bus, and in which order they are applied.

The bus is at-least-once and its records come from many sources at their own pace: a
record applied before comes again after a restart (:func:`fresh` drops it), a host's clock
may run ahead of the bus's (:func:`on_bus_clock` caps it), and while the parse query
catches up one source's records can come minutes before another's of the same time
(:func:`in_step` holds them back). :mod:`streaming.runner` applies what these let through.
"""

from __future__ import annotations

import logging

from streaming.entity import CATCHUP_IDLE_MS, MAX_SOURCES, SOURCE_HORIZON_MS, Header
from streaming.forwards import encode
from streaming.routes import BusEvent, decode

log = logging.getLogger(__name__)

#: How far ahead of its bus time a record's event time counts for its entity's detectors
#: (clocks a little apart); further ahead, it counts as its bus time plus this.
AHEAD_MS = 1_000


def fresh(events: list[BusEvent], header: Header) -> list[BusEvent]:
    """The events not applied before; ``header.seen`` is advanced past them.

    The bus is at-least-once: after a restart the parse query writes again what it wrote
    since its last commit. An entity's events share one bus partition (the parse query
    places them, :mod:`streaming.placement`), so from one source they arrive in the order
    of their records: a position ``(offset, seq)`` at or before
    the last one applied from that source is a repeat. Repeats inside one batch are
    dropped as well. Every source of the last hour (of the entity's event time) is
    remembered, however many partitions the raw topics have. The events are judged in
    the order of their positions, not of their arrival: a shuffle may reorder a group.
    """
    out: list[BusEvent] = []
    seen = header.seen
    batch: set[tuple[str, int, int]] = set()
    for e in sorted(events, key=_position):
        if e.src is None:
            out.append(e)
            continue
        ident = (e.src, e.offset, e.seq)
        last = seen.get(e.src)
        if ident in batch or (last is not None and [e.offset, e.seq] <= last[:2]):
            continue
        batch.add(ident)
        out.append(e)
        if last is None or [e.offset, e.seq] > last[:2]:
            seen[e.src] = [e.offset, e.seq, e.event.time_ms]
    if len(seen) > 1 and out:
        newest = max(v[2] for v in seen.values())
        old = [s for s, v in seen.items() if v[2] < newest - SOURCE_HORIZON_MS]
        for s in old:
            del seen[s]
        if len(seen) > MAX_SOURCES:
            for s in sorted(seen, key=lambda s: seen[s][2])[: len(seen) - MAX_SOURCES]:
                del seen[s]
    return out


def in_time(e: BusEvent) -> tuple[int, int]:
    """An event's place in time order (its record's offset breaks ties)."""
    return (e.event.time_ms, e.offset)


def in_step(
    header: Header, arrived: list[BusEvent], *, held: bool, ticked: int = 0
) -> list[BusEvent]:
    """The entity's events to apply now, in time order; the rest kept in ``header.held``.

    While the parse query catches up (``held``, :func:`streaming.ticks.holding`), one raw
    topic's records can reach the bus minutes before the other's of the same time: a
    micro-batch takes each topic's share of the backlog by count, not by time (a fleet's
    start writes a burst of log lines), and its tasks run unevenly. A job's metrics read
    half a minute ahead of its log lines would move its detectors past a checkpoint's
    deadline before the line saying it completed. So an event is applied only once every
    source of the entity (raw topic and partition) has reached its time; a source silent
    for :data:`~streaming.entity.CATCHUP_IDLE_MS` of the entity's time is idle and waited
    for no more; ``ticked``, the entity's clock by the ticks (every record up to it is on
    the bus), is reached whatever the sources. Released (or with nothing held), everything
    waiting is applied.
    """
    waiting = sorted([*_held_events(header), *arrived], key=in_time)
    header.held = []
    reached = _sources_reached(header) if held else None
    if reached is None:
        return waiting
    reached = max(reached, ticked)
    later = [e for e in waiting if e.event.time_ms > reached]
    header.held = [[encode(e), e.bus_ms] for e in later]
    return waiting[: len(waiting) - len(later)]


def _held_events(header: Header) -> list[BusEvent]:
    """The events the entity keeps for later; one that does not read back is dropped."""
    out = []
    for value, bus_ms in header.held:
        try:
            out.append(decode(value, bus_ms))
        except (ValueError, TypeError):
            log.warning("an event held for a catch-up does not read back: %.200s", value)
    return out


def _sources_reached(header: Header) -> int | None:
    """The time every source of the entity that is not idle has reached (``None``: none)."""
    times = [v[2] for v in header.seen.values() if len(v) > 2]
    if not times:
        return None
    newest = max(times)
    return min(t for t in times if t >= newest - CATCHUP_IDLE_MS)


def on_bus_clock(e: BusEvent) -> BusEvent:
    """The event with its time capped at its bus time plus :data:`AHEAD_MS`.

    An event happened before its record reached the bus, so a time later than that is a
    clock running ahead (a scraper's clock apart from the log's, a host's off by a
    minute). Detectors judge their deadlines by the times of their events: one record
    stamped 40 s ahead would otherwise decide every deadline of its entity in the next
    40 s at once, with none of the records that would have cleared them (a checkpoint
    "pending for 0.5 min" 2 s after its trigger). Capped, nothing moves an entity's time
    past its bus time, as the shared frontier already is (:func:`_newest`). A host whose
    clock runs ahead has its events on the bus's clock; one behind keeps its own (its
    delivery lag covers it). Records without a bus time (files) are left as they are.
    """
    if e.bus_ms is None or e.event.time_ms <= e.bus_ms + AHEAD_MS:
        return e
    return e._replace(event=e.event._replace(time_ms=e.bus_ms + AHEAD_MS))


def _position(e: BusEvent) -> tuple[str, int, int]:
    return (e.src or "", e.offset, e.seq)
