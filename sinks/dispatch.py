"""The driver thread that drains the ledger into slow sinks (Slack).

The detect query only records transitions; delivery happens here, so a Slack
outage never holds a micro-batch back. When a send fails retryably the sink's
queue waits (its later transitions stay behind, in order) and is tried again
after a back-off that doubles up to a ceiling; a new batch wakes the thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from sinks.base import DeliverySink, RetryableDeliveryError
from sinks.ledger import AlertLedger

log = logging.getLogger(__name__)


class Dispatcher:
    """Delivers each sink's open transitions from the ledger, in a daemon thread."""

    def __init__(
        self,
        ledger: AlertLedger,
        sinks: Sequence[DeliverySink],
        *,
        backoff_s: float = 5.0,
        max_backoff_s: float = 300.0,
        poll_s: float = 30.0,
        on_error: Callable[[str, Exception], None] | None = None,
    ) -> None:
        """Create the dispatcher (call :meth:`start`).

        Args:
            ledger: Where transitions wait.
            sinks: The sinks this thread drains.
            backoff_s: First wait after a retryable failure.
            max_backoff_s: Ceiling of the doubling back-off.
            poll_s: Look at the ledger at least this often even without a wake-up.
            on_error: Called with (sink name, error) on each retryable failure.
        """
        self.ledger = ledger
        self.sinks = list(sinks)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.poll_s = poll_s
        self.on_error = on_error
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._wait: dict[str, float] = {}
        #: Open deliveries per sink after the last pass (the backlog).
        self.backlog: dict[str, int] = {s.name: 0 for s in self.sinks}

    def start(self) -> Dispatcher:
        """Start the thread; returns self."""
        self._thread = threading.Thread(target=self._run, name="flinkwatch-dispatch", daemon=True)
        self._thread.start()
        return self

    def wake(self) -> None:
        """New transitions were recorded: deliver them now (unless backing off)."""
        self._wake.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish the pass in progress (bounded by ``timeout_s``) and stop."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def drain_once(self) -> bool:
        """One pass over every sink; True when nothing is left open."""
        clear = True
        for sink in self.sinks:
            try:
                self.backlog[sink.name] = self.ledger.deliver(sink)
                self._wait.pop(sink.name, None)
            except RetryableDeliveryError as exc:
                clear = False
                wait = min(self._wait.get(sink.name, self.backoff_s / 2) * 2, self.max_backoff_s)
                self._wait[sink.name] = wait
                self.backlog[sink.name] = self.ledger.backlog().get(sink.name, 0)
                log.warning(
                    "sink=%s unavailable (%s); %d transitions wait, in order; next try in %.0f s",
                    sink.name,
                    exc,
                    self.backlog[sink.name],
                    wait,
                )
                if self.on_error is not None:
                    self.on_error(sink.name, exc)
            except Exception:
                # A bug in a sink must not kill the thread that every later alert needs.
                clear = False
                self._wait[sink.name] = self.max_backoff_s
                log.exception("sink=%s delivery crashed; retrying later", sink.name)
        return clear

    def _run(self) -> None:
        while not self._stop.is_set():
            self.drain_once()
            timeout = min(self._wait.values(), default=self.poll_s)
            if self._wait:
                # Backing off: a wake-up must not cut the wait short, or an outage
                # would be hammered once per micro-batch.
                self._stop.wait(timeout)
            else:
                self._wake.wait(timeout)
            self._wake.clear()
