"""The driver thread that drains the ledger into slow sinks (Slack).

The detect query only records transitions; delivery happens here, so a Slack
outage never holds a micro-batch back. When a send fails retryably the sink's
queue waits (its later transitions stay behind, in order) and is tried again
after a back-off that doubles up to a ceiling; a new batch wakes the thread.

Other calls to the same receiver run here too (:meth:`Dispatcher.submit`): the update
of an incident's message after a button was pressed in Slack. One thread means that
update and a transition's update of the same message never race, and neither runs in
the detect micro-batch or in the thread answering Slack's request.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from sinks.base import DeliverySink, PermanentDeliveryError, RetryableDeliveryError
from sinks.ledger import AlertLedger

log = logging.getLogger(__name__)

#: Jobs waiting at most; one more drops the oldest (each job redoes all its work, so a
#: flood of presses costs a bounded queue, never memory).
MAX_JOBS = 256
#: Tries of a job that fails retryably, one per pass, before it is given up.
JOB_TRIES = 5


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
        self._jobs_lock = threading.Lock()
        #: Waiting jobs by key, oldest first, with the tries left.
        self._jobs: dict[str, tuple[Callable[[], None], int]] = {}

    def start(self) -> Dispatcher:
        """Start the thread; returns self."""
        self._thread = threading.Thread(target=self._run, name="flinkwatch-dispatch", daemon=True)
        self._thread.start()
        return self

    def submit(self, key: str, job: Callable[[], None]) -> None:
        """Run ``job`` in the dispatcher's thread, before its next pass.

        A job waiting under the same ``key`` is replaced: a job that renders the current
        state of something (a message) needs to run once, however often it was asked for.
        A job that raises :class:`~sinks.base.RetryableDeliveryError` is tried again at
        the next pass (after the back-off while the receiver fails), up to ``JOB_TRIES``
        times; any other failure is logged and the job dropped.
        """
        with self._jobs_lock:
            self._jobs.pop(key, None)
            self._jobs[key] = (job, JOB_TRIES)
            while len(self._jobs) > MAX_JOBS:
                dropped = next(iter(self._jobs))
                del self._jobs[dropped]
                log.warning("dispatch: more than %d jobs wait; dropped %s", MAX_JOBS, dropped)
        self._wake.set()

    def run_jobs(self) -> int:
        """Run the waiting jobs once each, oldest first; returns how many still wait."""
        with self._jobs_lock:
            jobs, self._jobs = self._jobs, {}
        for key, (job, tries) in jobs.items():
            try:
                job()
            except RetryableDeliveryError as exc:
                if tries > 1:
                    log.info("dispatch: %s failed (%s); trying again later", key, exc)
                    with self._jobs_lock:
                        self._jobs.setdefault(key, (job, tries - 1))  # unless asked anew
                else:
                    log.warning("dispatch: %s failed %d times (%s); given up", key, JOB_TRIES, exc)
            except PermanentDeliveryError as exc:
                log.warning("dispatch: %s refused (%s); given up", key, exc)
            except Exception:
                # Like a sink's bug: the thread every later alert needs must survive it.
                log.exception("dispatch: %s crashed; given up", key)
        with self._jobs_lock:
            return len(self._jobs)

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
            self.run_jobs()
            self.drain_once()
            timeout = min(self._wait.values(), default=self.poll_s)
            if self._wait:
                # Backing off: a wake-up must not cut the wait short, or an outage
                # would be hammered once per micro-batch.
                self._stop.wait(timeout)
            else:
                self._wake.wait(timeout)
            self._wake.clear()
