"""Feeding a detector as the Spark adapter would: events in order, due timers in between."""

from __future__ import annotations

from typing import Any

from detectors import Alert, Detector, Event


def drive(
    det: Detector[Any], events: list[Event], *, until: int | None = None, timers: bool = True
) -> tuple[dict | None, list[Alert]]:
    """Feed events in order; run due timers between them (as a watermark passing would).

    ``timers=False`` delivers every event first, as one long micro-batch does; ``until``
    then runs the timers due up to that time.
    """
    st: dict | None = None
    timer: int | None = None
    alerts: list[Alert] = []

    def run_timers(upto: int) -> None:
        nonlocal st, timer
        while st is not None and timer is not None and timer <= upto:
            step = det.on_timer(st, timer)
            alerts.extend(step.alerts)
            st, timer = step.state, step.timer_ms

    for e in events:
        if timers:
            run_timers(e.time_ms - 1)
        step = det.on_event(st, e, e.time_ms)
        alerts.extend(step.alerts)
        st, timer = step.state, step.timer_ms
    if until is not None:
        run_timers(until)
    return st, alerts
