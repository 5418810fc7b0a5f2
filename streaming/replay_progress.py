"""A replay's progress as log lines: records read, event time reached, alerts so far.

A replay of a month of logs runs for minutes and, before this, said nothing until it
ended. :class:`ReplayProgress` logs one line at least every ``every_s`` seconds while it
runs and a summary at the end, from what the driver knows (:class:`ReplayCounts`):
records once the parse has read every file (parse batch 1), alerts once the detectors
have run (detect batches 0 and 1, :mod:`streaming.replay`), so the numbers move a step
at a time; the lines keep coming while a long step runs, with the Spark tasks done of
the stages running, so a replay that is alive looks alive and says how far its step is.
Pure Python: the clock is injected and nothing here imports Spark.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

log = logging.getLogger("flinkwatch")


class ReplayCounts(BaseModel):
    """What a replay has done so far, as the driver sees it.

    Attributes:
        records: Records read and parsed (events and dead letters), once parsed.
        newest_event_ms: The newest event time among them (epoch ms, UTC), if any.
        alerts: Alert transitions written so far.
        parse_batches: Parse batches finished (a replay has one).
        detect_batches: Detect batches delivered (a replay has two: its records, its end).
        tasks: Tasks of the Spark stages running now (0: none running).
        tasks_done: How many of them are done.
    """

    model_config = ConfigDict(frozen=True)

    records: int = 0
    newest_event_ms: int | None = None
    alerts: int = 0
    parse_batches: int = 0
    detect_batches: int = 0
    tasks: int = 0
    tasks_done: int = 0


def _utc(ms: int | None) -> str:
    if ms is None:
        return "none yet"
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ReplayProgress:
    """Logs a replay's progress every ``every_s`` seconds and a summary at the end.

    Example:
        >>> ticks = iter([0.0, 10.0, 12.5])
        >>> p = ReplayProgress(lambda: ReplayCounts(records=5), clock=lambda: next(ticks),
        ...                    emit=print)
        >>> p.poll()
        replay: 5 records read, event time none yet, 0 alerts (parse batches 0, detect batches 0)
        True
        >>> p.finish()
        replay: done in 12.5 s: 5 records read (0/s), event time none yet, 0 alerts
    """

    def __init__(
        self,
        counts: Callable[[], ReplayCounts],
        *,
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        emit: Callable[[str], object] = log.info,
    ) -> None:
        self.counts = counts
        self.every_s = every_s
        self.clock = clock
        self.emit = emit
        self.started = clock()
        self._last = self.started

    def poll(self) -> bool:
        """Log a progress line if ``every_s`` has passed since the last; True if it did."""
        now = self.clock()
        if now - self._last < self.every_s:
            return False
        self._last = now
        c = self.counts()
        if c.parse_batches or c.records:
            said = (
                f"replay: {c.records:,} records read, event time {_utc(c.newest_event_ms)}, "
                f"{c.alerts:,} alerts (parse batches {c.parse_batches}, "
                f"detect batches {c.detect_batches})"
            )
        else:
            # Nothing counted yet is not nothing read: the parse counts its records when
            # it ends (a long input's one pass, through the detectors, minutes later).
            said = "replay: reading the files (their records are counted once parsed)"
        tasks = f"; Spark: {c.tasks_done:,} of {c.tasks:,} tasks done" if c.tasks else ""
        self.emit(said + tasks)
        return True

    def finish(self) -> None:
        """Log the summary line: the totals, how long it took and the read rate."""
        elapsed = self.clock() - self.started
        c = self.counts()
        rate = c.records / elapsed if elapsed > 0 else 0.0
        self.emit(
            f"replay: done in {elapsed:.1f} s: {c.records:,} records read ({rate:,.0f}/s), "
            f"event time {_utc(c.newest_event_ms)}, {c.alerts:,} alerts"
        )

    def run_until(self, stop: threading.Event, tick_s: float = 1.0) -> None:
        """Poll every ``tick_s`` seconds until ``stop`` is set (a daemon thread's loop)."""
        while not stop.wait(tick_s):
            self.poll()

    def start(self) -> Callable[[bool], None]:
        """Poll in a daemon thread.

        Returns:
            The function that stops the polling; with ``True`` (the replay succeeded) it
            logs the summary line too.
        """
        stop = threading.Event()
        thread = threading.Thread(
            target=self.run_until, args=(stop,), name="flinkwatch-replay-progress", daemon=True
        )
        thread.start()

        def done(succeeded: bool) -> None:
            stop.set()
            thread.join()
            if succeeded:
                self.finish()

        return done
