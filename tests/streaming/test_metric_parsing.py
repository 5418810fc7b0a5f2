"""The metric parser (``streaming/metric_parsing.py``): every case in metric_cases.yaml.

All metric cases (tests/data/parsing/metric_cases.yaml) go through ONE ``parse_metrics``
call; each case then checks the rows of its own offset. Names, caps and shape columns.
"""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from streaming.metric_parsing import SHAPES, parse_metrics
from streaming.parsing import ParseLimits
from streaming.schemas import EVENT_COLUMNS
from tests.conftest import records_df
from tests.streaming.parse_cases import (
    METRIC_CASES,
    SHAPE_COLUMNS,
    Rows,
    _check,
    _collect,
    _collect_interpreted,
    _expectations,
    _records,
)


@pytest.fixture(scope="module")
def metric_rows(spark: SparkSession) -> Rows:
    parsed = parse_metrics(_records(spark, METRIC_CASES, "flink.metrics"), shapes=True)
    return _collect(parsed, SHAPE_COLUMNS)


def test_every_shape_has_a_case() -> None:
    shapes = {w.get("shape") for c in METRIC_CASES for w in _expectations(c)}
    assert set(SHAPES) <= shapes


@pytest.mark.spark
@pytest.mark.parametrize(
    ("offset", "case"), list(enumerate(METRIC_CASES)), ids=[c["id"] for c in METRIC_CASES]
)
def test_metric_case(offset: int, case: dict[str, Any], metric_rows: Rows) -> None:
    _check(case, metric_rows[offset])


@pytest.mark.spark
def test_points_past_the_cap_are_one_dead_letter(spark: SparkSession) -> None:
    line = "prometheus,host=jm_0 " + ",".join(f"flink_m{i}={i}" for i in range(5))
    lim = ParseLimits(max_points_per_record=3)
    rows = (
        parse_metrics(records_df(spark, [line + " 1710183765000000000"]), lim)
        .select("seq", "kind", "metric", "error", "detail")
        .orderBy("seq")
        .collect()
    )
    assert [(r.seq, r.kind, r.error) for r in rows] == [
        (0, "metric", None),
        (1, "metric", None),
        (2, "metric", None),
        (3, None, "too_many_points"),
    ]
    # One dead letter stands for the samples past the cap (here 2), not one each.
    assert rows[3].detail == "samples past the first 3 of the record"


@pytest.mark.spark
def test_shapes_adds_naming_and_shape_as_the_last_columns(spark: SparkSession) -> None:
    plain = parse_metrics(records_df(spark, ["x"]))
    shaped = parse_metrics(records_df(spark, ["x"]), shapes=True)
    assert plain.columns == list(EVENT_COLUMNS)
    assert shaped.columns == [*EVENT_COLUMNS, "naming", "shape"]


@pytest.mark.spark
def test_a_short_replays_interpreted_expressions_parse_every_metric_case_alike(
    spark: SparkSession, metric_rows: Rows
) -> None:
    """A short replay evaluates the parse without generated classes (streaming.replay_session)."""
    parsed = parse_metrics(_records(spark, METRIC_CASES, "flink.metrics"), shapes=True)
    assert _collect_interpreted(spark, parsed, SHAPE_COLUMNS) == metric_rows
