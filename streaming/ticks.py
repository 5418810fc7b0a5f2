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

A parse query that starts behind (after an outage, a restart, idle topics waking) races
through its backlog unevenly: one topic's tasks minutes ahead of the other's, a
micro-batch's metric task done before its log task starts. The newest time on the bus
then says nothing of what is still to come, for the records' frontier nor for the
watermark that follows it. So before it writes anything the driver writes a hold
(:func:`hold_value`) to every partition, and a release once the parse query has caught up
(:meth:`Ticker.start`); a shard between the two decides deadlines by ticks alone
(:func:`holding`, :attr:`streaming.clock.Clock.held`), and applies an entity's events only
as every source of it reaches their time (:func:`streaming.arrivals.in_step`).
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


def hold_value(hold: bool, event_ms: int, partition: int) -> str:
    """A catch-up mark's bus value: the parse query starts behind (``hold``) or caught up.

    A tick for every shard that claims no time: ``event_ms`` (the driver's clock when it
    was written) orders the marks of a partition and gives the bus its shape. Without the
    ticks' ``of``, :func:`frontier` skips it, as a release before this one's does (which
    would take it for a tick of now).
    """
    return json.dumps({"kind": TICK_KIND, "event_ms": event_ms, "p": partition, "hold": int(hold)})


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
        if "hold" in d:
            continue  # a catch-up mark (:func:`holding`) claims no time
        if bus_ms is not None:
            t = min(t, bus_ms)
        seen[p] = max(seen.get(p, t), t)
    of = max(of, int(seen.get("of", 0)))
    if of:
        seen["of"] = of
    times = [t for p, t in seen.items() if p != "of"]
    return min(times) if of and len(times) >= of else None


def holding(held: dict[str, int], ticks: Iterable[tuple[str, int | None]]) -> bool:
    """Fold catch-up marks into ``held`` (partitions whose latest mark holds); whether any does.

    The driver writes a hold to every bus partition before a parse query that starts behind
    writes anything, and a release once it has caught up (:meth:`Ticker.start`): a
    partition between the two carries records of the catch-up, whose tasks race through
    the backlog unevenly. A shard is held while any partition's latest mark holds.
    """
    marks: list[tuple[int, int, str, int]] = []
    for value, bus_ms in ticks:
        try:
            d = json.loads(value)
            marks.append((bus_ms or 0, int(d["event_ms"]), str(int(d["p"])), int(d["hold"])))
        except (ValueError, TypeError, KeyError):
            continue
    # In the order they were written: a batch's rows of a shard may come in any order.
    for _bus, _at, p, hold in sorted(marks):
        if hold:
            held[p] = 1
        else:
            held.pop(p, None)
    return bool(held)


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
        send_hold: Writes a catch-up mark (:func:`hold_value`, ``True``: hold) to every
            partition of the event bus.
        caught_up_s: A parse query that reads past the raw topics' ends within this many
            seconds of taking them has caught up (:meth:`start`).
    """

    end_offsets: Callable[[], Offsets]
    send: Callable[[int, list[int] | None], None]
    interval_s: float
    wakes: Callable[[int], list[int] | None] = lambda _t: None
    clock: Callable[[], float] = time.time
    mark: Callable[[], int] | None = None
    closer: Callable[[], None] = lambda: None
    send_hold: Callable[[bool], None] = lambda _hold: None
    caught_up_s: float = 12.0
    #: The pending tick: its time (ms) and the raw topics' end offsets then.
    _pending: tuple[int, Offsets] | None = None
    _next: float = 0.0
    #: The broker's clock less the driver's, at the last mark (ms).
    _skew_ms: int = 0
    sent: int = 0
    #: Times the driver's loop looked (:meth:`poll`): its progress, which tests count.
    looks: int = 0
    #: Whether the shards are held (a hold written, its release not yet).
    held: bool = False
    #: While held: how long the parse query took to read past the last tick's offsets (s).
    _behind_s: float | None = None

    def start(self, backlog: int) -> None:
        """A parse query starts with ``backlog`` raw records to read: hold or release.

        Behind, its tasks race through the backlog unevenly (a topic's partitions hours
        ahead of the other's in real time, a micro-batch's log task done before its metric
        task starts), so the newest time on the bus says nothing of what is still to come:
        the shards are held (deadlines wait for ticks) until it has caught up. It has once
        a tick's offsets are read within :attr:`caught_up_s` of taking them, or, when it
        no longer gains on its input (a read taking at least half as long as the one
        before: a parse query that only keeps up), once it stays that close. Nothing to
        read: a release at once (a process that stopped while held wrote none).
        """
        if self.interval_s <= 0:
            # No ticks, no hold: a hold an earlier run left (its process stopped) goes.
            self._release("ticks are off", quiet=True)
            return
        # Held until a release is written, whether or not this mark is: a write that
        # failed half way may have held some partitions (the next polls try again).
        self.held, self._behind_s = True, None
        # A tick taken before the start says nothing of this query: take one now.
        self._pending, self._next = None, 0.0
        if backlog <= 0:
            self._release("nothing to read", quiet=True)
            return
        try:
            self.send_hold(True)
        except Exception as exc:  # Kafka unreachable: the next polls release when it answers
            log.warning("ticks: cannot write the catch-up mark: %s", exc)
            return
        log.info("parse: %d records behind; deadlines wait until it has caught up", backlog)

    def _release(self, why: str, *, quiet: bool = False) -> None:
        """Write the release; a failure is logged and the next poll tries again."""
        try:
            self.send_hold(False)
        except Exception as exc:  # Kafka unreachable for a moment: held until it answers
            log.warning("ticks: cannot write the catch-up release: %s", exc)
            return
        self.held = False
        if not quiet:
            log.info("parse: caught up (%s); deadlines by the records' time again", why)

    def _caught_up(self, behind_s: float) -> bool:
        """Whether a read that took ``behind_s`` seconds ends the hold (:meth:`start`)."""
        before, self._behind_s = self._behind_s, behind_s
        return behind_s <= self.caught_up_s or (before is not None and behind_s >= before / 2)

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
            if self.held:
                # Ticks turned off by a reload: nothing could end the hold.
                self._release("ticks are off")
            return
        try:
            if self._pending is not None and read_past(parse_progress, self._pending[1]):
                t = self._pending[0]
                self._pending = None
                behind_s = (now_ms - t) / 1000
                if self.held and self._caught_up(behind_s):
                    self._release(f"{behind_s:.1f} s behind the raw topics")
                # Asked again: records read meanwhile may have woken the shards already.
                shards = self.wakes(t)
                if shards is None or shards:
                    self.send(t, shards)
                    self.sent += 1
            # While held, ticks measure the catch-up: taken whether or not a shard is due.
            wanted = self.held or self.wakes(now_ms) != []
            if self._pending is None and now >= self._next and wanted:
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
