"""The detect query's sense of time: when an entity's deadlines are decided.

Detectors see event time only. An entity's deadlines are decided when Spark's watermark
passes them, and, in live runs, as soon as the fleet's own clock has: the bus's newest
time (its frontier), less ``spark.deadline_grace_s`` and less how far behind that frontier
the entity's records usually arrive. :class:`Clock` is that sense of time in one
micro-batch, :class:`Lag` how late an entity's records arrive, :class:`WakeUp` when an
entity is due again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Lag(NamedTuple):
    """How late an entity's records arrive: :meth:`streaming.entity.Header.lag_ms`.

    Two measures, one per kind of frontier (:class:`Clock`):

    * ``frontier_ms``: how far behind the records' frontier (the newest time the bus had
      shown in the micro-batches before) its records arrive. A stall of the path every
      record shares (a parse batch's end, a pause of the broker) holds the frontier back
      with them and adds nothing here; a shipper slower than the others, a host clock
      behind, a topic parsed later than another add their delay.
    * ``bus_ms``: how long its records take from their event time to the bus. A tick is
      the bus's own time (every record the raw topics held then is on the bus), not the
      records': what it decides waits for this (history replayed into Kafka, or a
      shipper an hour behind, is not judged by a tick of now).
    """

    frontier_ms: int
    bus_ms: int


class WakeUp(NamedTuple):
    """When an entity is due: the watermark, the records' frontier or a tick reaching it.

    See :meth:`Clock.wake`; the shard keeps it as ``[watermark_ms, frontier_ms,
    tick_ms]``. ``tick_ms`` ``None`` (a wake-up saved as two numbers by a release before
    it): ``frontier_ms``.
    """

    watermark_ms: int
    frontier_ms: int
    tick_ms: int | None = None

    @property
    def by_tick(self) -> int:
        """The tick that makes it due."""
        return self.frontier_ms if self.tick_ms is None else self.tick_ms


@dataclass(frozen=True)
class Clock:
    """The detect query's sense of time in one micro-batch.

    An entity's deadline is decided when Spark's watermark passes it, or once the bus's
    frontier is past it by ``grace_ms`` and the entity's :class:`Lag`: by then everything
    the entity sent up to the deadline is on the bus. Two frontiers: the records' (their
    newest time, :attr:`records_ms`), which an entity's records trail by ``Lag.frontier_ms``,
    and the ticks' (:attr:`tick_ms`, the bus's own time), which they trail by
    ``Lag.bus_ms``.

    Why the batch's own records count (``batch_ms``): each is on the bus before the batch
    fixed the offsets it reads, and its time is no later than when it reached the bus
    (it is capped at its bus time). An entity's records up to a deadline arrive within its
    lag behind the frontier, so once a record of the batch is past the deadline by that
    lag, they were on the bus when the batch started and are in it or an earlier one.
    Spark's watermark says the same one micro-batch later (it moves at a batch's end).

    Attributes:
        watermark_ms: Spark's event-time watermark: the bus's newest event time (of the
            batch before) less ``delay_ms``.
        delay_ms: ``spark.watermark_delay_s``.
        grace_ms: ``spark.deadline_grace_s``; ``None``: ``delay_ms`` (records decide no
            sooner than the watermark; ticks still move time when nothing arrives).
        tick_ms: The time every bus partition's ticks have reached (:mod:`streaming.ticks`):
            every record the raw topics held then is on the bus.
        batch_ms: The newest time of the shard's records in this micro-batch, each the
            earlier of its event time and its bus time (``None``: none, or the files bus,
            where records carry no bus time and only the watermark counts).
        held: The parse query is catching up (:func:`streaming.ticks.holding`): its tasks
            race through the backlog unevenly, so neither the records' newest time nor
            the watermark that follows it says what is still to come. Only ticks decide.
        lag_window_ms: ``spark.lag_window_s``, the windows an entity's delivery lag is kept
            over (``None``: :data:`streaming.entity.LAG_WINDOW_MS`).
    """

    watermark_ms: int
    delay_ms: int = 0
    grace_ms: int | None = None
    tick_ms: int | None = None
    batch_ms: int | None = None
    held: bool = False
    lag_window_ms: int | None = None

    @property
    def before_ms(self) -> int:
        """The records' frontier before this batch: the batches' before it (watermark + delay).

        An entity's record that arrives now is behind it by :attr:`Lag.frontier_ms`.
        """
        return self.watermark_ms + self.delay_ms

    @property
    def records_ms(self) -> int:
        """The records' frontier: the newest time of this batch's and the batches' before."""
        return self.before_ms if self.batch_ms is None else max(self.before_ms, self.batch_ms)

    def _margins(self, lag: Lag | None) -> tuple[int, int]:
        """How far behind the records' frontier and behind a tick an entity's data is complete."""
        if lag is None:
            return self.delay_ms, self.delay_ms
        grace = self.delay_ms if self.grace_ms is None else self.grace_ms
        return grace + max(lag.frontier_ms, 0), grace + max(lag.bus_ms, 0)

    def now(self, lag: Lag | None) -> int:
        """An entity's clock: its deadlines up to it are decided.

        ``lag``: how late its records arrive (``None``: unknown, the files bus, where only
        the watermark counts).
        """
        by_records, by_tick = self._margins(lag)
        # Held: no deadline is decided but by a tick (0: none, as before any watermark).
        now = 0 if self.held else max(self.watermark_ms, self.records_ms - by_records)
        return now if self.tick_ms is None else max(now, self.tick_ms - by_tick)

    def wake(self, deadline: int, lag: Lag | None) -> WakeUp:
        """When an entity with this earliest deadline is due (see :meth:`due`)."""
        by_records, by_tick = self._margins(lag)
        return WakeUp(deadline, deadline + by_records, deadline + by_tick)

    def due(self, wake: WakeUp) -> bool:
        """Whether an entity's :meth:`wake` has come."""
        by_records = not self.held and (
            self.watermark_ms >= wake.watermark_ms or self.records_ms >= wake.frontier_ms
        )
        return by_records or (self.tick_ms is not None and self.tick_ms >= wake.by_tick)

    def timer(self, wake: WakeUp) -> int:
        """The watermark at which records alone make ``wake`` come (Spark's timer)."""
        return min(wake.watermark_ms, wake.frontier_ms - self.delay_ms)
