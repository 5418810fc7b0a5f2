"""Detectors that raise: one failure policy for their events and their deadlines.

A detector is isolated per entity: a call that raises skips that event (or deadline), the
state is rebuilt without it, and the driver is told (:class:`~streaming.notes.DetectorFailure`).
After :data:`MAX_FAILURES` calls in a row that raise the state is given up and its open
incident resolved (:func:`judge_failure`, the one place that decides it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from detectors import Alert, Detector, Event
from detectors.base import DetectorState
from streaming.entity import close_incident
from streaming.notes import DetectorFailure, failure

log = logging.getLogger(__name__)

#: Calls in a row that may raise for one detector of an entity before its state is
#: dropped (and its open incident resolved): a state it cannot handle must not stay.
MAX_FAILURES = 3
#: Retry delay of a deadline whose call raised (capped by the idle TTL).
RETRY_MS = 60_000


@dataclass
class Fold:
    """Where a detector's events left it: state, deadline, transitions, calls that raised.

    Attributes:
        state: The state to save (``None``: drop it).
        timer: The detector's next deadline.
        alerts: Transitions, in order.
        errors: The calls that raised.
        failures: Calls in a row that raised (kept in the header).
        dropped: The state was dropped after :data:`MAX_FAILURES` failures in a row.
    """

    state: DetectorState | None
    timer: int | None
    alerts: list[Alert] = field(default_factory=list)
    errors: list[DetectorFailure] = field(default_factory=list)
    failures: int = 0
    dropped: bool = False


@dataclass(frozen=True)
class Raised:
    """What a detector call that raised leads to (:func:`judge_failure`).

    Attributes:
        note: The failure, for the driver to log and count.
        failures: Calls in a row that raised, to keep (0 once the state is dropped).
        dropped: The state is to be dropped: it raised :data:`MAX_FAILURES` times in a row.
        closing: With ``dropped``, the resolved transition of its open incident.
    """

    note: DetectorFailure
    failures: int
    dropped: bool
    closing: list[Alert]


def judge_failure(
    detector: Detector[Any, Any],
    entity: str,
    state: DetectorState | None,
    exc: BaseException,
    call: str,
    failures: int,
    at_ms: int,
) -> Raised:
    """The one failure policy, for events and deadlines alike.

    ``state`` is the detector's state without the call that raised (rebuilt or restored
    by the caller), ``failures`` the calls in a row that raised before this one. After
    :data:`MAX_FAILURES` in a row the state is given up: a state the detector cannot
    handle must not stay, and its open incident is resolved at ``at_ms``.
    """
    failures += 1
    dropped = failures >= MAX_FAILURES
    note = failure(detector.name, entity, state, exc, call, failures, dropped=dropped)
    if not dropped:
        return Raised(note, failures, False, [])
    return Raised(note, 0, True, close_incident(detector, state, at_ms, "it kept failing"))


def fold_events(
    detector: Detector[Any, Any],
    entity: str,
    start: Callable[[], DetectorState | None],
    events: list[Event],
    timer: int | None,
    failures: int = 0,
    first: DetectorState | None = None,
) -> Fold:
    """Apply ``events`` to the state ``start()`` builds, isolating calls that raise.

    Each event goes through :meth:`Detector.advance`: the deadlines due by its time fire
    first, so one long batch gives what live micro-batches would. Detectors change their
    state in place, so a call that raises may leave it half changed. Such an event is
    skipped and the state is rebuilt from ``start()`` with the events that went through
    (detectors are pure: the same calls give the same state), which costs nothing while
    nothing raises. After :data:`MAX_FAILURES` in a row the state is dropped and its open
    incident resolved. ``first`` is ``start()``'s result when the caller has it already
    (parsing a state is most of what a few events cost).
    """
    out = Fold(first if first is not None else start(), timer, failures=failures)
    good: list[Event] = []

    def step(event: Event) -> tuple[Alert, ...]:
        s = detector.advance(out.state, out.timer, event)
        out.state, out.timer = s.state, s.timer_ms
        return s.alerts

    for event in events:
        try:
            out.alerts.extend(step(event))
        except Exception as exc:  # noqa: BLE001 - one detector must not stop the query
            log.debug("detector=%s entity=%s raised", detector.name, entity, exc_info=True)
            out.state, out.timer = start(), timer
            for e in good:
                step(e)
            # The rebuilt state is the new starting point: each event is replayed at most
            # once, however many of the batch's events raise.
            snapshot, timer, good = _frozen(detector, out.state), out.timer, []
            start = partial(_thawed, detector, snapshot)
            raised = judge_failure(
                detector, entity, out.state, exc, "on_event", out.failures, event.time_ms
            )
            out.failures = raised.failures
            out.dropped = out.dropped or raised.dropped
            out.errors.append(raised.note)
            if raised.dropped:
                out.alerts.extend(raised.closing)
                out.state, out.timer = None, None
                start, timer = partial(_thawed, detector, None), None
            continue
        out.failures = 0
        good.append(event)
    return out


def _frozen(detector: Detector[Any, Any], state: DetectorState | None) -> str | None:
    return None if state is None else detector.dump_json(state)


def _thawed(detector: Detector[Any, Any], snapshot: str | None) -> DetectorState | None:
    if snapshot is None:
        return None
    state: DetectorState = detector.load_json(snapshot)
    return state
