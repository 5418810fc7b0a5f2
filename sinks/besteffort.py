"""Delivery to the sinks drained inside the micro-batch (the alert file): best effort.

The alert file is a copy of the ledger, which is the record of every transition; Slack
and Prometheus do not depend on it. So a file that cannot be written (a full or
read-only volume, a quota, a bad path) must not fail the micro-batch: a failing batch is
replayed, fails again, and after ``spark.max_restarts`` the job would exit, with Slack and
Prometheus stopping with it. Here a failing sink is counted (:attr:`BestEffort.errors`,
exported as ``flinkwatch_sink_errors_total``), logged at most once per ``log_every_s``
with how many failures the line stands for, and tried again at a later batch after the
dispatcher's back-off (:class:`~sinks.dispatch.Backoff`), doubling from ``backoff_s`` to
``max_backoff_s``. Its transitions wait in the ledger, in order
(``flinkwatch_delivery_backlog``), and go out once the sink takes them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sinks.base import DeliverySink
from sinks.dispatch import Backoff, Outbox, deliver

log = logging.getLogger(__name__)


@dataclass
class _Failing:
    """A sink that failed: since when, and what the log has said."""

    since: float
    logged_at: float
    unlogged: int = 0
    last: str = ""


class BestEffort:
    """Delivers sinks' open transitions from the ledger without ever raising.

    Args:
        clock: Monotonic seconds (injected in tests).
        backoff_s: Wait after a first failure before the next try.
        max_backoff_s: Ceiling of the doubling wait.
        log_every_s: At most one log line per sink this often while it keeps failing.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        backoff_s: float = 1.0,
        max_backoff_s: float = 60.0,
        log_every_s: float = 60.0,
    ) -> None:
        self.clock = clock
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.log_every_s = log_every_s
        #: Failed delivery passes, by sink name (``flinkwatch_sink_errors_total``).
        self.errors: Counter[str] = Counter()
        self._backoff = Backoff(backoff_s, max_backoff_s)
        self._failing: dict[str, _Failing] = {}
        self._lock = threading.Lock()

    def failing(self, sink: str) -> bool:
        """Whether the sink's last try failed."""
        with self._lock:
            return sink in self._failing

    def count(self, sink: str, exc: BaseException) -> None:
        """Count one failure of a sink delivered elsewhere (the Slack dispatcher's)."""
        with self._lock:
            self.errors[sink] += 1

    def deliver(self, ledger: Outbox, sinks: Sequence[DeliverySink]) -> None:
        """One delivery pass over ``sinks``; failures are counted and logged, never raised."""
        for sink in sinks:
            now = self.clock()
            with self._lock:
                if not self._backoff.ready(sink.name, now):
                    continue  # backing off: a full disk is not hammered once per batch
            try:
                deliver(ledger, sink)
            except Exception as exc:  # noqa: BLE001 - the batch must go on (see module doc)
                self._failed(sink.name, exc, now)
            else:
                self._recovered(sink.name, now)

    def _failed(self, sink: str, exc: BaseException, now: float) -> None:
        with self._lock:
            self.errors[sink] += 1
            self._backoff.failed(sink, now)
            state = self._failing.get(sink)
            if state is None:
                state = _Failing(now, now)
                self._failing[sink] = state
                say = True
            else:
                state.unlogged += 1
                say = now - state.logged_at >= self.log_every_s
            state.last = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if not say:
                return
            repeats, state.unlogged, state.logged_at = state.unlogged, 0, now
        log.error(
            "sink=%s cannot be written (%s); detection, Slack and the ledger go on, its "
            "transitions wait in the ledger and are written in order when it can be "
            "(flinkwatch_sink_errors_total)%s",
            sink,
            state.last,
            f"; {repeats} more failure(s) since the last line" if repeats else "",
        )

    def _recovered(self, sink: str, now: float) -> None:
        with self._lock:
            self._backoff.recovered(sink)
            state = self._failing.pop(sink, None)
        if state is not None:
            log.warning(
                "sink=%s written again after %.0f s of failures; its waiting transitions "
                "were written",
                sink,
                now - state.since,
            )
