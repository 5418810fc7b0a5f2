"""The driver thread that drains the ledger into slow sinks (Slack, Alertmanager).

The detect query only records transitions; delivery happens here, so a Slack
outage never holds a micro-batch back. When a send fails retryably the sink's
queue waits (its later transitions stay behind, in order) and is tried again
after a back-off that doubles up to a ceiling; a new batch wakes the thread.
Each sink backs off on its own: one receiver's outage does not delay another's
deliveries.

Other calls to the same receiver run here too (:meth:`Dispatcher.submit`): the update
of an incident's message after a button was pressed in Slack. One thread means that
update and a transition's update of the same message never race, and neither runs in
the detect micro-batch or in the thread answering Slack's request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence

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
        backoffs: Mapping[str, tuple[float, float]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create the dispatcher (call :meth:`start`).

        Args:
            ledger: Where transitions wait.
            sinks: The sinks this thread drains.
            backoff_s: First wait after a retryable failure.
            max_backoff_s: Ceiling of the doubling back-off.
            poll_s: Look at the ledger at least this often even without a wake-up.
            on_error: Called with (sink name, error) on each retryable failure.
            backoffs: (first wait, ceiling) of a sink by name, where it differs from
                ``backoff_s`` and ``max_backoff_s``.
            clock: Monotonic seconds (injected in tests).
        """
        self.ledger = ledger
        self.sinks = list(sinks)
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.poll_s = poll_s
        self.on_error = on_error
        self._backoffs = dict(backoffs or {})
        self._clock = clock
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The back-off of each sink that failed, and when it may be tried again.
        self._wait: dict[str, float] = {}
        self._due: dict[str, float] = {}
        #: The last pass left work for a sink served a few at a time (:attr:`per_pass`).
        self._more = False
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
        """One pass over every sink not backing off; True when nothing is left open."""
        clear = True
        self._more = False
        now = self._clock()
        for sink in self.sinks:
            if self._due.get(sink.name, now) > now:
                clear = False  # backing off: an outage is not hammered once per batch
                continue
            try:
                left = self.ledger.deliver(sink, at_most=sink.per_pass)
                self.backlog[sink.name] = left
                # A sink served a few at a time comes back at once, after the others.
                if sink.per_pass is not None and left > 0:
                    self._more, clear = True, False
                self._wait.pop(sink.name, None)
                self._due.pop(sink.name, None)
            except RetryableDeliveryError as exc:
                clear = False
                first, ceiling = self._backoffs.get(sink.name, (self.backoff_s, self.max_backoff_s))
                wait = min(self._wait.get(sink.name, first / 2) * 2, ceiling)
                self._wait[sink.name] = wait
                self._due[sink.name] = now + wait
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
                ceiling = self._backoffs.get(sink.name, (0.0, self.max_backoff_s))[1]
                self._wait[sink.name] = ceiling
                self._due[sink.name] = now + ceiling
                log.exception("sink=%s delivery crashed; retrying later", sink.name)
        return clear

    def _run(self) -> None:
        while not self._stop.is_set():
            self.run_jobs()
            self.drain_once()
            now = self._clock()
            # A wake-up (a new batch) drains the sinks not backing off at once; a sink
            # backing off is tried when its wait is over.
            timeout = min([self.poll_s, *(due - now for due in self._due.values())])
            if self._more:
                timeout = 0.0
            self._wake.wait(max(timeout, 0.0))
            self._wake.clear()
