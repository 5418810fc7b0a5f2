"""Routing: each detector gets its event kinds and only the metric names it reads."""

from __future__ import annotations

import pytest

from conf import AppConfig
from detectors.checkpoint_creep import DURATION_METRIC
from detectors.idle_heap_growth import HEAP_USED
from streaming.app import routed_events

pytestmark = pytest.mark.spark

JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
TM = "container_e05_1699999999999_0042_01_000003"


def test_metric_events_reach_only_the_detectors_that_name_them(spark) -> None:
    rows = [
        ("metric", DURATION_METRIC, JOB, None),
        ("metric", HEAP_USED, JOB, TM),
        ("metric", "flink_taskmanager_Status_JVM_CPU_Load", JOB, TM),  # nobody reads it
        ("checkpoint_expired", None, JOB, None),
    ]
    events = spark.createDataFrame(
        rows, "kind string, metric string, job_id string, tm_id string"
    ).selectExpr("*", "cast(null as string) as error")
    got = sorted(
        (r["detector"], r["kind"], r["metric"])
        for r in routed_events(events, AppConfig()).collect()
    )
    assert got == [
        ("checkpoint_creep", "checkpoint_expired", None),
        ("checkpoint_creep", "metric", DURATION_METRIC),
        ("checkpoint_failures", "checkpoint_expired", None),
        ("idle_heap_growth", "metric", HEAP_USED),
        ("late_barrier_acks", "checkpoint_expired", None),
    ]
