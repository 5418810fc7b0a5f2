"""Spark settings derived from the ``spark`` config section (no Spark started)."""

from __future__ import annotations

import pytest

from conf import SparkConfig
from streaming.session import cluster_settings


def test_defaults_add_no_setting() -> None:
    # Local mode and an unsized cluster keep Spark's own defaults.
    assert cluster_settings(SparkConfig()) == {}


def test_executor_sizes_map_to_spark_keys() -> None:
    cfg = SparkConfig(executor_memory="2g", executor_cores=3)
    assert cluster_settings(cfg) == {"spark.executor.memory": "2g", "spark.executor.cores": "3"}


def test_options_pass_through_and_win_over_the_sized_keys() -> None:
    cfg = SparkConfig(
        executor_memory="2g",
        options={"spark.executor.memory": "4g", "spark.driver.host": "10.0.0.5"},
    )
    assert cluster_settings(cfg) == {
        "spark.executor.memory": "4g",
        "spark.driver.host": "10.0.0.5",
    }


@pytest.mark.parametrize("bad", ["2 GB", "-1g", "lots"])
def test_executor_memory_must_be_a_spark_size(bad: str) -> None:
    with pytest.raises(ValueError, match="executor_memory"):
        SparkConfig(executor_memory=bad)
