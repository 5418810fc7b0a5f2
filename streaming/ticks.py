"""Ticks: event time that moves when nothing arrives at all.

Detectors live in event time, and event time moves only with records. A cluster whose
every job and TaskManager falls silent at once (a data centre, a network partition, the
whole Flink cluster stopped) sends nothing that could pass a deadline: ``job_lost`` would
wait for a record that never comes.

A tick is flinkwatch's own evidence of time: "every record the raw topics held at
broker time T has been parsed and is on the event bus". T is the broker's clock, not the
driver's (in cluster mode a driver clock ahead of the brokers and executors would judge
every deadline that much early): the driver writes a mark that names no shard to the
event bus, which the broker stamps (``LogAppendTime``,
:func:`streaming.topics.bus_topic_specs`), and takes the broker's stamp as T. Then it
reads the raw topics' end offsets, and once the parse query's progress shows it has read
past them, writes a tick ``{"kind": "tick", "event_ms": T, "p": p, "of": n}`` to each of
the event bus's n partitions (key :data:`TICK_KEY`). The detect query hands the tick to
the shards it names (``"shards"``; every shard when it names none); it carries no event
time for the watermark, so it never makes a real record late, and counts no later than
its own bus time (:func:`frontier`).

Ticks follow the deadlines, not the clock: each shard says, at the end of each of its
turns, at which frontier its first entity is due (:class:`~streaming.rows.EntityCount`),
and a tick is taken only when some shard would be due at its time, and names only those
shards (:func:`woken`). With nothing due (no entity at all, or every deadline minutes
away) no tick is written and the detect query starts no micro-batch. The first tick
after a start goes to every shard: until each has reported, the driver does not know
when it is due. A micro-batch may read the bus's partitions unevenly (``maxOffsetsPerTrigger``), so
a shard takes as the bus's frontier the time every partition has reached with its ticks
(:func:`frontier`): all records written before it are read. Deadlines past it, plus each
entity's own delivery lag and ``spark.deadline_grace_s``, fire. A tick never claims more
than the parse query has read, so a parse query that falls behind holds the ticks back.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

#: The bus key of tick records (no entity key looks like it: ``job:``, ``tm:``, ``cluster``).
TICK_KEY = "tick"
#: ``kind`` of a tick in the bus value.
TICK_KIND = "tick"

Offsets = dict[str, dict[str, int]]


def tick_value(
    event_ms: int, partition: int, partitions: int, shards: list[int] | None = None
) -> str:
    """A tick's bus value, for one of the bus's partitions; ``shards``: those it wakes."""
    d: dict[str, Any] = {"kind": TICK_KIND, "event_ms": event_ms, "p": partition, "of": partitions}
    if shards is not None:
        d["shards"] = shards
    return json.dumps(d)


def woken(due: dict[str, int | None], shards: int, t_ms: int) -> list[int] | None:
    """The shards a tick of time ``t_ms`` would wake; ``None``: every shard.

    ``due`` is each shard's first due time as it last reported it (``None``: nothing is
    due). Every shard until all ``shards`` have reported since the start.
    """
    if len(due) < shards:
        return None
    return sorted(int(s) for s, at in due.items() if at is not None and at <= t_ms)


def frontier(seen: dict[str, int], ticks: Iterable[tuple[str, int | None]]) -> int | None:
    """Fold ticks into ``seen`` (partition → latest tick); the time all have reached.

    ``ticks`` are ``(value, bus time ms)``: a tick counts no later than when it reached the
    bus, as records do (a driver whose clock runs ahead cannot claim a frontier the bus
    has not seen). ``None`` until a tick of every partition was seen. A value that is not
    a tick of this layout is ignored.
    """
    of = 0
    for value, bus_ms in ticks:
        try:
            d = json.loads(value)
            p, t, of = str(int(d["p"])), int(d["event_ms"]), max(of, int(d["of"]))
        except (ValueError, TypeError, KeyError):
            continue
        if bus_ms is not None:
            t = min(t, bus_ms)
        seen[p] = max(seen.get(p, t), t)
    of = max(of, int(seen.get("of", 0)))
    if of:
        seen["of"] = of
    times = [t for p, t in seen.items() if p != "of"]
    return min(times) if of and len(times) >= of else None


def read_past(progress: Any, target: Offsets) -> bool:
    """Whether a query's progress shows it read every partition of ``target`` to its end.

    ``progress`` is a ``StreamingQueryProgress``; a source's ``endOffset`` is Kafka's JSON
    ``{"topic": {"partition": offset}}`` (the next offset to read).
    """
    reached: Offsets = {}
    for source in getattr(progress, "sources", None) or []:
        try:
            end = json.loads(source.endOffset) if source.endOffset else {}
        except (TypeError, ValueError):
            continue
        if isinstance(end, dict):
            for topic, parts in end.items():
                if isinstance(parts, dict):
                    reached.setdefault(topic, {}).update({p: int(o) for p, o in parts.items()})
    return all(
        reached.get(topic, {}).get(p, -1) >= stop
        for topic, parts in target.items()
        for p, stop in parts.items()
    )


@dataclass
class Ticker:
    """Writes ticks to the event bus while the parse query keeps up, when a shard is due.

    Args:
        end_offsets: The raw topics' end offsets now (a Kafka round trip).
        send: Writes the tick of a time (ms) to every partition of the event bus, for the
            shards named (``None``: every shard).
        interval_s: The least time between two ticks taken; 0 disables ticks.
        wakes: The shards a tick of a time (ms) would wake (:func:`woken`; ``None``: every
            shard, an empty list: none, and no tick is taken).
        clock: The driver's wall time in seconds (``time.time``; injected in tests): when
            to look again, and, with ``mark``, an estimate of the broker's time between
            two marks.
        mark: The broker's time now (ms): a tick's time (``None``: the driver's clock).
        closer: Closes what ``send`` and ``mark`` hold (the Kafka producer).
    """

    end_offsets: Callable[[], Offsets]
    send: Callable[[int, list[int] | None], None]
    interval_s: float
    wakes: Callable[[int], list[int] | None] = lambda _t: None
    clock: Callable[[], float] = time.time
    mark: Callable[[], int] | None = None
    closer: Callable[[], None] = lambda: None
    #: The pending tick: its time (ms) and the raw topics' end offsets then.
    _pending: tuple[int, Offsets] | None = None
    _next: float = 0.0
    #: The broker's clock less the driver's, at the last mark (ms).
    _skew_ms: int = 0
    sent: int = 0
    #: Times the driver's loop looked (:meth:`poll`): its progress, which tests count.
    looks: int = 0

    def poll(self, parse_progress: Any) -> None:
        """Send the pending tick once the parse query read past it; take the next one.

        Called from the driver's loop (every quarter second). A pending tick goes out as
        soon as the parse query's progress shows it read past it (at once when nothing
        arrived since its last batch), to the shards due by then; a new one is taken when
        ``interval_s`` passed since the last and some shard would be due at its time. A
        failure to reach Kafka is logged and the tick tried again at the next interval.
        """
        now = self.clock()
        now_ms = int(now * 1000) + self._skew_ms  # the broker's time, as last measured
        self.looks += 1
        if self.interval_s <= 0:
            return
        try:
            if self._pending is not None and read_past(parse_progress, self._pending[1]):
                t = self._pending[0]
                self._pending = None
                # Asked again: records read meanwhile may have woken the shards already.
                shards = self.wakes(t)
                if shards is None or shards:
                    self.send(t, shards)
                    self.sent += 1
            if self._pending is None and now >= self._next and self.wakes(now_ms) != []:
                self._next = now + self.interval_s
                # The broker's time first, then the offsets: every record the raw topics
                # held at that time is within them.
                t = now_ms if self.mark is None else self.mark()
                self._skew_ms = t - int(now * 1000)
                self._pending = (t, self.end_offsets())
        except Exception as exc:  # Kafka unreachable for a moment: the next interval retries
            log.warning("ticks: cannot read the raw topics or write the tick: %s", exc)

    def close(self) -> None:
        """Close the ticker's Kafka client, if it opened one."""
        self.closer()
