"""Feeding a detector exactly as the Spark adapter does, state through JSON between calls."""

from __future__ import annotations

from typing import Any

from detectors import Alert, Detector, Event


def roundtrip(det: Detector[Any, Any], state: Any) -> Any:
    """The state as the next call sees it after Spark saved it: JSON text, loaded back.

    A state that does not survive serialisation (a set, a datetime, a field the model
    does not declare) fails here, in milliseconds, not under Spark.
    """
    if state is None:
        return None
    return det.load_json(det.dump_json(state))


def drive(
    det: Detector[Any, Any],
    events: list[Event],
    *,
    until: int | None = None,
    state: Any = None,
    timer: int | None = None,
) -> tuple[Any, list[Alert]]:
    """Feed events in order through :meth:`Detector.advance` (due timers fire first).

    ``until`` then fires the timers due up to that time, as a watermark passing would.
    ``state`` and ``timer`` continue an earlier run. Returns the final state and every
    transition in order; :func:`drive_timer` returns the pending timer as well.
    """
    state, _timer, alerts = drive_timer(det, events, until=until, state=state, timer=timer)
    return state, alerts


def drive_timer(
    det: Detector[Any, Any],
    events: list[Event],
    *,
    until: int | None = None,
    state: Any = None,
    timer: int | None = None,
) -> tuple[Any, int | None, list[Alert]]:
    """:func:`drive`, also returning the pending timer."""
    alerts: list[Alert] = []
    for e in events:
        step = det.advance(roundtrip(det, state), timer, e)
        alerts.extend(step.alerts)
        state, timer = step.state, step.timer_ms
    if until is not None:
        step = det.fire_due(roundtrip(det, state), timer, until)
        alerts.extend(step.alerts)
        state, timer = step.state, step.timer_ms
    return roundtrip(det, state), timer, alerts
