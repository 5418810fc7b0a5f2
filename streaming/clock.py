"""The detect query's sense of time: when an entity's deadlines are decided.

Detectors see event time only. An entity's deadlines are decided when Spark's watermark
passes them, and, in live runs, as soon as the fleet's own clock has: the bus's newest
time (its frontier), less ``spark.deadline_grace_s`` and less how late the entity's records
usually reach the bus. :class:`Clock` is that sense of time in one micro-batch,
:class:`WakeUp` when an entity is due again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class WakeUp(NamedTuple):
    """When an entity is due: the watermark or the bus frontier that reaches its deadline.

    See :meth:`Clock.wake`; the shard keeps it as ``[watermark_ms, frontier_ms]``.
    """

    watermark_ms: int
    frontier_ms: int


@dataclass(frozen=True)
class Clock:
    """The detect query's sense of time in one micro-batch.

    An entity's deadline is decided when Spark's watermark passes it, or once the bus's
    frontier (its newest time, from records or ticks) is past it by the entity's delivery
    lag and ``grace_ms``: by then everything the entity sent up to the deadline is on the
    bus.

    Why the batch's own records count (``batch_ms``): each is on the bus before the batch
    fixed the offsets it reads, and its time is no later than when it reached the bus
    (it is capped at its bus time). An entity's records up to a deadline reach the bus
    within its lag of it, so once a record of the batch is past the deadline by that lag,
    they were on the bus when the batch started and are in it or an earlier one. Spark's
    watermark says the same one micro-batch later (it moves at a batch's end).

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
    """

    watermark_ms: int
    delay_ms: int = 0
    grace_ms: int | None = None
    tick_ms: int | None = None
    batch_ms: int | None = None

    @property
    def frontier_ms(self) -> int:
        """The bus's newest time, from records or from a tick.

        Records: this batch's, and the batches' before it (the watermark plus delay).
        """
        times = (self.watermark_ms + self.delay_ms, self.tick_ms, self.batch_ms)
        return max(t for t in times if t is not None)

    def _margin(self, lag_ms: int | None) -> int:
        """How far behind the frontier an entity's data is surely complete."""
        if lag_ms is None:
            return self.delay_ms
        grace = self.delay_ms if self.grace_ms is None else self.grace_ms
        return grace + max(lag_ms, 0)

    def now(self, lag_ms: int | None) -> int:
        """An entity's clock: its deadlines up to it are decided.

        ``lag_ms``: how late its records reach the bus (``None``: unknown, the files bus,
        where only the watermark counts).
        """
        return max(self.watermark_ms, self.frontier_ms - self._margin(lag_ms))

    def wake(self, deadline: int, lag_ms: int | None) -> WakeUp:
        """When an entity with this earliest deadline is due (see :meth:`due`)."""
        return WakeUp(deadline, deadline + self._margin(lag_ms))

    def due(self, wake: WakeUp) -> bool:
        """Whether an entity's :meth:`wake` has come."""
        return self.watermark_ms >= wake.watermark_ms or self.frontier_ms >= wake.frontier_ms

    def timer(self, wake: WakeUp) -> int:
        """The watermark at which records alone make ``wake`` come (Spark's timer)."""
        return min(wake.watermark_ms, wake.frontier_ms - self.delay_ms)
