"""Both replays' timelines on one chart: a valid 720 x 360 PNG, a lane per detector and job."""

from __future__ import annotations

import io

from matplotlib import image

from sinks.reports import compare_chart
from sinks.reports.compare import compare, pages_of
from sinks.reports.compare_chart import MAX_LANES, comparison_chart
from tests.sinks.charts.alerts import PNG_MAGIC
from tests.sinks.reports.test_compare import MIN, T0, rec


def test_a_comparison_draws_one_png_of_the_chart_size() -> None:
    base = [rec("b1", T0 + 2 * MIN), rec("b1", T0 + 9 * MIN, "resolved")]
    base.append(rec("b2", T0, detector="late_barrier_acks"))
    new = [rec("n1", T0), rec("n2", T0 + MIN, detector="checkpoint_state_growth")]
    data = comparison_chart(compare(pages_of(base), pages_of(new)))
    assert data is not None and data[:8] == PNG_MAGIC
    assert image.imread(io.BytesIO(data), format="png").shape[:2] == (360, 720)


def test_two_quiet_runs_have_no_chart() -> None:
    assert comparison_chart(compare([], [])) is None


def test_at_most_max_lanes_are_drawn_and_the_rest_are_named(monkeypatch) -> None:
    drawn: list[str] = []
    real = compare_chart.subtitle
    monkeypatch.setattr(
        compare_chart, "subtitle", lambda fig, text: (drawn.append(text), real(fig, text))
    )
    new = [rec(f"n{i}", T0 + i * MIN, entity=f"job:{i:032x}") for i in range(MAX_LANES + 3)]
    data = comparison_chart(compare([], pages_of(new)))
    assert data is not None
    assert drawn and drawn[0].endswith("; 3 more lanes in the table")
