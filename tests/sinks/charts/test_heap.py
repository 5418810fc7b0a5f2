"""The chart of ``idle_heap_growth`` (``sinks/charts/heap.py``): the heap floor beside the records."""

from __future__ import annotations

from detectors.idle_heap_growth import IdleHeapGrowthEvidence
from sinks.charts.heap import idle_heap
from tests.sinks.charts.alerts import TM, idle_heap_alert


def evidence() -> tuple[object, IdleHeapGrowthEvidence]:
    alert = idle_heap_alert()
    return alert, IdleHeapGrowthEvidence.model_validate(alert.evidence)


def test_the_floor_and_its_fitted_growth_sit_over_an_idle_job_s_zero_records() -> None:
    alert, ev = evidence()
    fig = idle_heap(alert, ev)  # type: ignore[arg-type]
    assert fig is not None
    heap_ax, rec_ax = fig.axes
    assert heap_ax.get_ylabel() == "heap used after GC (MB)" and rec_ax.get_ylabel() == "records/s"
    assert [line.get_label() for line in heap_ax.get_lines()] == [
        "post-GC heap floor",
        f"fitted growth ({ev.growth_mb_per_h:+,.0f} MB/h)",
    ]
    assert [t.get_text() for t in rec_ax.texts] == ["zero records in and out"]
    assert fig.get_suptitle() == f"idle_heap_growth: TaskManager {TM}"
    assert heap_ax.get_title(loc="left").endswith(f"idle {ev.idle_s / 60:.0f} min")


def test_buckets_without_a_floor_give_no_chart() -> None:
    alert, ev = evidence()
    floorless = [b._replace(floor_mb=None) for b in ev.buckets]
    assert idle_heap(alert, ev.model_copy(update={"buckets": floorless})) is None  # type: ignore[arg-type]


def test_a_heap_max_far_above_the_floor_draws_a_log_axis_with_its_line() -> None:
    alert, ev = evidence()
    top = max(b.floor_mb for b in ev.buckets if b.floor_mb is not None)
    fig = idle_heap(alert, ev.model_copy(update={"heap_max_mb": 10 * top}))  # type: ignore[arg-type]
    assert fig is not None
    heap_ax = fig.axes[0]
    assert heap_ax.get_yscale() == "log"
    assert f"Heap_Max {10 * top:,.0f} MB" in [line.get_label() for line in heap_ax.get_lines()]
