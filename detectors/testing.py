"""Run a detector on one entity in plain Python, exactly as the runner does (Spark's ``TwsTester``).

The runner loads an entity's state from its saved JSON before every call and saves it
after, and passes the pending timer along; :class:`DetectorTester` does the same, so a
state that does not survive a JSON round trip (a set, a datetime, an undeclared field)
fails in a unit test, in milliseconds, not under Spark. Time is event time only: feed
events in order, then advance to a time as a watermark passing would.

Example:
    >>> from detectors.checkpoint_failures import CheckpointFailures
    >>> t = DetectorTester(CheckpointFailures(CheckpointFailures.params_model(min_expired=2)))
    >>> expired = [Event("checkpoint_expired", 1000 * i, job_id="7f", checkpoint_id=i)
    ...            for i in (1, 2)]
    >>> [a.status.value for a in t.feed(*expired)], t.state.firing
    (['firing'], True)
    >>> t.advance_to(6 * 3600 * 1000 + 2000)[0].summary
    'job 7f: no events from this job any more'
    >>> t.state is None
    True
    >>> t.standing()
    'no checkpoint seen for this job'
"""

from __future__ import annotations

from typing import Any, Generic

from detectors.base import Detector, S
from detectors.model import Alert, Event


class DetectorTester(Generic[S]):
    """One detector on one entity: feed events, advance time, read the alerts and the state.

    Attributes:
        detector: The detector under test.
        state: The entity's state after the last call, as the runner would load it
            (``None``: not watched, or dropped).
        timer: When the entity is due next (``None``: never).
        alerts: Every transition so far, in order.
    """

    def __init__(self, detector: Detector[Any, S], *, state: S | None = None) -> None:
        self.detector = detector
        self.state: S | None = state
        self.timer: int | None = None
        self.alerts: list[Alert] = []

    def feed(self, *events: Event) -> list[Alert]:
        """Feed events in order; each first fires the timers due by its time.

        Returns:
            The transitions these events made, in order.
        """
        made: list[Alert] = []
        for event in events:
            step = self.detector.advance(self._saved(), self.timer, event)
            made.extend(step.alerts)
            self.state, self.timer = self._reloaded(step.state), step.timer_ms
        self.alerts.extend(made)
        return made

    def advance_to(self, time_ms: int) -> list[Alert]:
        """Fire every timer due by ``time_ms``, each at its own time (a watermark passing).

        Returns:
            The transitions the timers made, in order.
        """
        step = self.detector.fire_due(self._saved(), self.timer, time_ms)
        self.state, self.timer = self._reloaded(step.state), step.timer_ms
        self.alerts.extend(step.alerts)
        return list(step.alerts)

    def standing(self) -> str:
        """Where the entity stands now, in the detector's words (:meth:`Detector.standing`).

        Asked of the state as the runner would load it next, as ``flinkwatch explain`` does.
        """
        return self.detector.standing(self._saved())

    def _saved(self) -> S | None:
        return roundtrip(self.detector, self.state)

    def _reloaded(self, state: S | None) -> S | None:
        return roundtrip(self.detector, state)


def roundtrip(det: Detector[Any, S], state: S | None) -> S | None:
    """The state as the next call sees it after the runner saved it: JSON text, loaded back."""
    if state is None:
        return None
    return det.load_json(det.dump_json(state))


def drive(
    det: Detector[Any, S],
    events: list[Event],
    *,
    until: int | None = None,
    state: S | None = None,
    timer: int | None = None,
) -> tuple[S | None, list[Alert]]:
    """Feed ``events`` in order, then fire the timers due by ``until``; the state and alerts.

    ``state`` and ``timer`` continue an earlier run; :func:`drive_timer` also returns the
    pending timer.
    """
    state, _timer, alerts = drive_timer(det, events, until=until, state=state, timer=timer)
    return state, alerts


def drive_timer(
    det: Detector[Any, S],
    events: list[Event],
    *,
    until: int | None = None,
    state: S | None = None,
    timer: int | None = None,
) -> tuple[S | None, int | None, list[Alert]]:
    """:func:`drive`, also returning the pending timer."""
    tester = DetectorTester(det, state=state)
    tester.timer = timer
    tester.feed(*events)
    if until is not None:
        tester.advance_to(until)
    return tester.state, tester.timer, tester.alerts
