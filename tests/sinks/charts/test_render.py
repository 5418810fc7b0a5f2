"""Evidence charts (``sinks/charts/__init__.py``): each alert, driven from events, renders to a valid small PNG."""

from __future__ import annotations

import pytest

from detectors import REGISTRY
from sinks.charts import CHARTS, render
from tests.sinks.charts.alerts import (
    BUILDERS,
    creep_alert,
    decoded,
    idle_heap_alert,
)


def test_every_chart_is_of_a_registered_detector_and_every_one_is_tested_here() -> None:
    assert set(CHARTS) <= set(REGISTRY)
    assert set(BUILDERS) == set(CHARTS)


@pytest.mark.parametrize("detector", sorted(BUILDERS))
def test_an_alert_driven_from_events_renders_a_small_png(detector: str) -> None:
    alert = BUILDERS[detector]()
    assert alert.detector == detector
    pixels = decoded(render(alert))
    # Something is drawn: not one flat colour.
    assert pixels.reshape(-1, pixels.shape[-1]).std(axis=0).max() > 0.05


@pytest.mark.parametrize("detector", sorted(BUILDERS))
def test_a_chart_is_the_same_bytes_each_time(detector: str) -> None:
    alert = BUILDERS[detector]()
    assert render(alert) == render(alert)


def test_evidence_without_a_series_gives_no_chart() -> None:
    alert = creep_alert()
    empty = {
        **alert.evidence,
        "durations_ms": [],
        "sizes_bytes": [],
        "checkpoint_ids": [],
        "times_ms": [],
    }
    assert render(alert.model_copy(update={"evidence": empty})) is None
    # An idle_heap_growth resolve before any verdict carries only why and a hint.
    idle = idle_heap_alert().model_copy(update={"evidence": {"why": "idle", "hint": "h"}})
    assert render(idle) is None
    # Evidence of another shape (another release) is no chart either, not an error.
    assert render(alert.model_copy(update={"evidence": {"durations_ms": "lots"}})) is None


def test_values_no_axis_can_place_give_no_chart_not_an_error(caplog) -> None:
    alert = creep_alert()
    far = alert.model_copy(update={"event_time_ms": 10**15})  # the year 33658
    assert render(far) is None
    assert "cannot be drawn" in caplog.text and alert.alert_id in caplog.text


def test_detectors_without_a_series_have_no_chart() -> None:
    for name in ("tm_lost", "jvm_fatal"):
        alert = creep_alert().model_copy(update={"detector": name, "evidence": {}})
        assert render(alert) is None
