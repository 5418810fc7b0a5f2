"""The outbox: each sink's open transitions taken from the ledger and sent, in order.

:func:`deliver` is the loop that calls the sinks: it takes a sink's open deliveries from
the ledger (:class:`Outbox`) in order, asks the sink after a crash or a send without an
answer whether it arrived (:meth:`~sinks.base.DeliverySink.confirm`), sends, and moves
each delivery along. ``sending`` is committed before the send starts. A send that fails
without saying whether it arrived (:class:`~sinks.base.AmbiguousDeliveryError`) stays
``sending``, with the error noted, and is asked about before any resend; one that surely
did not arrive (:class:`~sinks.base.RetryableDeliveryError`) goes back to ``pending``; a
refused one (:class:`~sinks.base.PermanentDeliveryError`) is ``failed`` and skipped.

The driver threads here drain the ledger into slow sinks (Slack, Alertmanager, webhooks).
The detect query only records transitions; delivery happens here, so a Slack
outage never holds a micro-batch back. When a send fails retryably the sink's
queue waits (its later transitions stay behind, in order) and is tried again
after a back-off that doubles up to a ceiling (:class:`Backoff`, which the alert file's
in-batch delivery, :class:`~sinks.besteffort.BestEffort`, uses too); a new batch wakes
the threads.

Each lane of sinks has a thread of its own: a sink is its own lane unless it names one
(:attr:`~sinks.base.DeliverySink.lane`). So a receiver that hangs holds back its own
lane only, for at most its time-out per send: one receiver's outage delays no other's
deliveries. The Slack sinks share the ``slack`` lane: they talk to one Slack, the
evidence chart follows the text page into its thread, and Slack's rate limits are per
workspace.

Other calls to Slack run in its lane too (:meth:`Dispatcher.submit`): the update of an
incident's message after a button was pressed in Slack. One thread means that update
and a transition's update of the same message never race, and neither runs in the
detect micro-batch or in the thread answering Slack's request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sinks.base import (
    AmbiguousDeliveryError,
    DeliverySink,
    PermanentDeliveryError,
    RetryableDeliveryError,
    Transition,
)

log = logging.getLogger(__name__)

#: Jobs waiting at most; one more drops the oldest (each job redoes all its work, so a
#: flood of presses costs a bounded queue, never memory).
MAX_JOBS = 256
#: Tries of a job that fails retryably, one per pass, before it is given up.
JOB_TRIES = 5
#: The lane whose thread runs the jobs (:meth:`Dispatcher.submit`): they update Slack.
JOBS_LANE = "slack"


class Outbox(Protocol):
    """What :func:`deliver` needs of the ledger: the open deliveries and their moves."""

    @property
    def outcomes(self) -> Counter[tuple[str, str]]:
        """Outcomes of sends, by (sink, outcome), for the metrics."""
        ...

    def pending(self, sink: str, limit: int = 100) -> list[tuple[Transition, str]]:
        """The sink's open deliveries in order, with their state (``pending``/``sending``)."""
        ...

    def mark(self, sink: str, seq: int, state: str, error: str | None = None) -> None:
        """Move one delivery to ``state`` (committed before this returns)."""
        ...

    def note(self, sink: str, seq: int, error: str) -> None:
        """Record why a delivery is still open without moving it."""
        ...

    def backlog(self) -> dict[str, int]:
        """Open (pending or sending) deliveries per sink."""
        ...


def deliver(
    outbox: Outbox, sink: DeliverySink, limit: int = 1000, at_most: int | None = None
) -> int:
    """Send the sink's open transitions in order until one fails retryably.

    ``at_most`` ends the call after that many transitions were handled (sent,
    confirmed or refused); ``None``: every open one.

    Returns:
        How many are still open for the sink.

    Raises:
        RetryableDeliveryError: the first retryable failure (an
            :class:`~sinks.base.AmbiguousDeliveryError` if the send may have
            arrived); later transitions wait behind it, so the sink receives them
            in order.
    """
    handled = 0
    while True:
        batch = outbox.pending(sink.name, limit=min(limit, 100))
        if not batch:
            return 0
        for t, state in batch:
            if at_most is not None and handled >= at_most:
                return outbox.backlog().get(sink.name, 0)
            handled += 1
            if state == "sending" and _confirmed(outbox, sink, t):
                continue
            _send(outbox, sink, t)


def _confirmed(outbox: Outbox, sink: DeliverySink, t: Transition) -> bool:
    """After a crash mid-send, or a send without an answer: whether it arrived.

    Only the sink can tell. True: found delivered (marked so); False: send it (again).

    Raises:
        RetryableDeliveryError: the sink cannot tell yet; sending blind could page
            twice, so it waits, in order, and is asked again.
    """
    try:
        arrived = sink.confirm(t)
    except RetryableDeliveryError as exc:
        outbox.note(sink.name, t.seq, f"cannot confirm yet: {exc}")
        outbox.outcomes[(sink.name, "retry")] += 1
        raise
    if arrived:
        log.info("sink=%s %s: found delivered, not sent again", sink.name, t.key)
        outbox.mark(sink.name, t.seq, "delivered")
        outbox.outcomes[(sink.name, "confirmed")] += 1
        return True
    if arrived is None:
        log.warning(
            "sink=%s %s: earlier send's outcome unknown and the sink cannot tell; sending again",
            sink.name,
            t.key,
        )
        outbox.outcomes[(sink.name, "resent_unconfirmed")] += 1
    return False


def _send(outbox: Outbox, sink: DeliverySink, t: Transition) -> None:
    """Send one transition, ``sending`` committed first; its outcome recorded after."""
    outbox.mark(sink.name, t.seq, "sending")
    try:
        sink.send(t)
    except AmbiguousDeliveryError as exc:
        # It may have arrived: it stays `sending`, so the next pass asks the sink
        # before sending it again.
        log.warning(
            "sink=%s %s: outcome unknown (%s); will confirm before resending",
            sink.name,
            t.key,
            exc,
        )
        outbox.note(sink.name, t.seq, f"outcome unknown: {exc}")
        outbox.outcomes[(sink.name, "unknown")] += 1
        raise
    except RetryableDeliveryError as exc:
        # Not sent: back to pending, so no confirm() is needed for it.
        outbox.mark(sink.name, t.seq, "pending", str(exc)[:500])
        outbox.outcomes[(sink.name, "retry")] += 1
        raise
    except PermanentDeliveryError as exc:
        log.error("sink=%s %s: refused, skipped: %s", sink.name, t.key, exc)
        outbox.mark(sink.name, t.seq, "failed", str(exc)[:500])
        outbox.outcomes[(sink.name, "failed")] += 1
        return
    outbox.mark(sink.name, t.seq, "delivered")
    outbox.outcomes[(sink.name, "delivered")] += 1


class Backoff:
    """When each failing sink may be tried again: a wait that doubles up to a ceiling.

    The first failure waits ``first``, each further one twice the last, at most
    ``ceiling``; a success forgets it. Not thread-safe: a sink's entries are written
    by the one thread that delivers to it (or under its caller's lock).

    Args:
        first: The wait after a first failure (seconds).
        ceiling: The longest wait.
        per_sink: (first, ceiling) of a sink by name, where it differs.
    """

    def __init__(
        self,
        first: float,
        ceiling: float,
        per_sink: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        self.first = first
        self.ceiling = ceiling
        self._per_sink = dict(per_sink or {})
        self._wait: dict[str, float] = {}
        self._due: dict[str, float] = {}

    def ready(self, sink: str, now: float) -> bool:
        """Whether the sink may be tried at ``now`` (it is not waiting out a failure)."""
        return self._due.get(sink, now) <= now

    def due(self, sink: str) -> float | None:
        """When the failing sink may be tried again; None: it is not failing."""
        return self._due.get(sink)

    def wait(self, sink: str) -> float | None:
        """The failing sink's current wait; None: it is not failing."""
        return self._wait.get(sink)

    def failed(self, sink: str, now: float) -> float:
        """A failure at ``now``: the wait before the next try, doubled from the last."""
        first, ceiling = self._per_sink.get(sink, (self.first, self.ceiling))
        wait = min(self._wait.get(sink, first / 2) * 2, ceiling)
        self._wait[sink] = wait
        self._due[sink] = now + wait
        return wait

    def crashed(self, sink: str, now: float) -> float:
        """A failure that is a bug, not an outage: the longest wait at once."""
        ceiling = self._per_sink.get(sink, (0.0, self.ceiling))[1]
        self._wait[sink] = ceiling
        self._due[sink] = now + ceiling
        return ceiling

    def recovered(self, sink: str) -> bool:
        """A success: the back-off is forgotten. Whether the sink was failing."""
        self._wait.pop(sink, None)
        return self._due.pop(sink, None) is not None


def lane_of(sink: DeliverySink) -> str:
    """The lane a sink is served in: the one it names, else its own."""
    return sink.lane or sink.name


@dataclass
class _Lane:
    """Sinks served one after another by one thread."""

    name: str
    sinks: list[DeliverySink] = field(default_factory=list)
    wake: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


class Dispatcher:
    """Delivers each sink's open transitions from the ledger, a daemon thread per lane."""

    def __init__(
        self,
        ledger: Outbox,
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
            sinks: The sinks these threads drain.
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
        #: When each failing sink is tried again; a sink's entries are written by its
        #: lane's thread only.
        self._backoff = Backoff(backoff_s, max_backoff_s, self._backoffs)
        self._clock = clock
        self._stop = threading.Event()
        self._lanes: dict[str, _Lane] = {}
        for sink in self.sinks:
            self._lanes.setdefault(lane_of(sink), _Lane(lane_of(sink))).sinks.append(sink)
        # The jobs update Slack's messages: they run in its lane, or alone without one.
        self._lanes.setdefault(JOBS_LANE, _Lane(JOBS_LANE))
        #: Open deliveries per sink after the last pass (the backlog).
        self.backlog: dict[str, int] = {s.name: 0 for s in self.sinks}
        self._jobs_lock = threading.Lock()
        #: Waiting jobs by key, oldest first, with the tries left.
        self._jobs: dict[str, tuple[Callable[[], None], int]] = {}

    def start(self) -> Dispatcher:
        """Start a thread per lane; returns self."""
        for lane in self._lanes.values():
            lane.thread = threading.Thread(
                target=self._run, args=(lane,), name=f"flinkwatch-dispatch-{lane.name}", daemon=True
            )
            lane.thread.start()
        return self

    def submit(self, key: str, job: Callable[[], None]) -> None:
        """Run ``job`` in the Slack lane's thread, before its next pass.

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
        self._lanes[JOBS_LANE].wake.set()

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
        for lane in self._lanes.values():
            lane.wake.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Finish the passes in progress (bounded by ``timeout_s`` in all) and stop."""
        self._stop.set()
        self.wake()
        deadline = time.monotonic() + timeout_s
        for lane in self._lanes.values():
            if lane.thread is not None:
                lane.thread.join(max(deadline - time.monotonic(), 0.0))

    def drain_once(self) -> bool:
        """One pass over every sink not backing off, in the calling thread.

        Returns:
            True when nothing is left open.
        """
        clear, _ = self._pass(self.sinks)
        return clear

    def _pass(self, sinks: Sequence[DeliverySink]) -> tuple[bool, bool]:
        """One pass over ``sinks``: (nothing left open, a sink served a few at a time has more)."""
        clear, more = True, False
        now = self._clock()
        for sink in sinks:
            if not self._backoff.ready(sink.name, now):
                clear = False  # backing off: an outage is not hammered once per batch
                continue
            try:
                left = deliver(self.ledger, sink, at_most=sink.per_pass)
                self.backlog[sink.name] = left
                # A sink served a few at a time comes back at once, after the others.
                if sink.per_pass is not None and left > 0:
                    more, clear = True, False
                self._backoff.recovered(sink.name)
            except RetryableDeliveryError as exc:
                clear = False
                wait = self._backoff.failed(sink.name, now)
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
                self._backoff.crashed(sink.name, now)
                log.exception("sink=%s delivery crashed; retrying later", sink.name)
        return clear, more

    def _run(self, lane: _Lane) -> None:
        while not self._stop.is_set():
            # Cleared before the pass: a wake-up during it makes the next one come at once.
            lane.wake.clear()
            if lane.name == JOBS_LANE:
                self.run_jobs()
            _, more = self._pass(lane.sinks)
            now = self._clock()
            # A wake-up (a new batch) drains the sinks not backing off at once; a sink
            # backing off is tried when its wait is over.
            dues = [d - now for s in lane.sinks if (d := self._backoff.due(s.name)) is not None]
            timeout = 0.0 if more else min([self.poll_s, *dues])
            lane.wake.wait(max(timeout, 0.0))
