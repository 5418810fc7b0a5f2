"""``bench.plan_cost --tasks``: what a task pays to make a plan's projections."""

from __future__ import annotations

import pytest

from bench.plan_cost import task_projections

pytestmark = pytest.mark.spark


def test_each_projection_of_the_plan_is_made_and_its_costliest_column_named(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    # Two projections that cannot be collapsed: the second reads the first's regex twice.
    df = (
        spark.range(3)
        .select(F.regexp_replace(F.col("id").cast("string"), r"\d", "x").alias("a"))
        .select(
            F.when(F.col("a") == "x", F.lit("one")).otherwise(F.col("a")).alias("b"),
            F.col("a").alias("c"),
        )
    )
    out = task_projections(df, repeat=1, top=2)
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert out["projections"] == plan.count("Project [")
    assert out["projections"] >= 1 and out["task_s"] > 0
    top = out["top_columns"]
    assert len(top) == 2 and top[0]["ms"] >= top[1]["ms"] > 0
    # Columns of the plan's projections, named as Spark prints them.
    assert all(" AS " in c["expression"] or c["expression"].startswith("a#") for c in top)
