"""The checkpoint detectors' charts (``sinks/charts/checkpoints.py``) on thin and partial evidence."""

from __future__ import annotations

import warnings

from sinks.charts import render
from tests.sinks.charts.alerts import (
    creep_alert,
    decoded,
    growth_alert,
    restart_alert,
)


def test_a_single_point_or_a_flat_series_draws_without_a_warning() -> None:
    alert = creep_alert()
    ev = alert.evidence
    one = {k: ev[k][-1:] for k in ("durations_ms", "sizes_bytes", "checkpoint_ids", "times_ms")}
    flat = {"durations_ms": [0] * 3, "sizes_bytes": [0] * 3, "checkpoint_ids": [1, 2, 3]}
    restarts = restart_alert()
    cases = [
        alert.model_copy(update={"evidence": {**ev, **one, "fit": None}}),
        alert.model_copy(update={"evidence": {**ev, **flat, "times_ms": ev["times_ms"][:3]}}),
        restarts.model_copy(
            update={
                "evidence": {**restarts.evidence, "timeline": restarts.evidence["timeline"][:1]}
            }
        ),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for case in cases:
            decoded(render(case))


def test_a_creep_without_sizes_or_a_fit_yet_still_draws_its_durations() -> None:
    alert = creep_alert()
    ev = {**alert.evidence, "fit": None, "sizes_bytes": [None] * len(alert.evidence["sizes_bytes"])}
    decoded(render(alert.model_copy(update={"evidence": ev})))


def test_state_growth_without_heap_draws_without_the_heap_line() -> None:
    with_heap = render(growth_alert(state_backend="heap", state_heap_mb=3057))
    without = render(growth_alert())
    decoded(without)
    assert with_heap != without
