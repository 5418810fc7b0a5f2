"""Every Spark schema comes from the Python models: a field added there reaches them all."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import DoubleType, IntegerType, LongType, StringType

from detectors import Alert, AlertStatus, Event, Severity
from streaming.metric_parsing import parse_metrics
from streaming.parsing import ParseLimits, parse_logs
from streaming.schemas import (
    ALERT_COLUMNS,
    BUS_VALUE_SCHEMA,
    EVENT_COLUMNS,
    alert_of,
    alert_row,
)
from tests.conftest import records_df


def test_the_bus_carries_every_event_field_with_its_type_and_the_record_position() -> None:
    types = {f.name: f.dataType for f in BUS_VALUE_SCHEMA.fields}
    names = {"time_ms": "event_ms"}
    for name in Event._fields:
        assert names.get(name, name) in types
    assert types["event_ms"] == LongType() and types["checkpoint_id"] == LongType()
    assert types["value"] == DoubleType() and types["message"] == StringType()
    assert (types["src"], types["offset"], types["seq"]) == (
        StringType(),
        LongType(),
        IntegerType(),
    )


def test_an_alert_row_round_trips_and_keeps_the_output_columns_of_earlier_versions() -> None:
    alert = Alert(
        alert_id="a1",
        detector="checkpoint_failures",
        entity="job:7f",
        status=AlertStatus.ESCALATED,
        severity=Severity.CRITICAL,
        event_time_ms=42,
        job_id="7f",
        summary="s",
        evidence={"n": [1, 2]},
    )
    row = alert_row(alert)
    assert alert_of(row) == alert
    # The detect query's output columns, in the order checkpoints written before were made
    # with: a reordered model must not reorder them.
    assert ALERT_COLUMNS == (
        "alert_id",
        "detector",
        "entity",
        "status",
        "severity",
        "event_ms",
        "job_id",
        "job_name",
        "tm_id",
        "host",
        "summary",
        "evidence",
    )


@pytest.mark.spark
def test_both_parsers_give_exactly_the_event_columns(spark: SparkSession) -> None:
    lim = ParseLimits()
    assert parse_logs(records_df(spark, ["x"]), lim).columns == list(EVENT_COLUMNS)
    assert parse_metrics(records_df(spark, ["x"]), lim).columns == list(EVENT_COLUMNS)


# The schemas `from_json` reads, as the DDL text they are written as types for
# (streaming.schemas.struct_of: a type is not read by Spark's SQL parser at each plan).
_KV = "array<struct<key: string, value: struct<stringValue: string, intValue: string>>>"
_POINTS = (
    f"struct<dataPoints: array<struct<attributes: {_KV}, timeUnixNano: string, "
    "asDouble: string, asInt: string, flags: string>>>"
)
_ATTRS = "array<struct<key: string, value: struct<stringValue: string>>>"
AS_DDL = {
    "metric_parsing._OTLP_SCHEMA": (
        f"resourceMetrics array<struct<resource: struct<attributes: {_KV}>, "
        "scopeMetrics: array<struct<metrics: array<struct<name: string, "
        f"gauge: {_POINTS}, sum: {_POINTS}, histogram: string, summary: string, "
        "exponentialHistogram: string>>>>>>, _corrupt string"
    ),
    "otlp_logs._OTLP_LOGS_SCHEMA": (
        f"resourceLogs array<struct<resource: struct<attributes: {_ATTRS}>, "
        "scopeLogs: array<struct<scope: struct<name: string>, logRecords: array<string>>>>>, "
        "_corrupt string"
    ),
    "otlp_logs._OTLP_RECORD_SCHEMA": (
        "timeUnixNano string, observedTimeUnixNano string, severityText string, "
        f"severityNumber string, body struct<stringValue: string>, attributes {_ATTRS}"
    ),
    "bus._HEAD": "event_ms long, shards array<int>",
}


@pytest.mark.parametrize("name", sorted(AS_DDL))
def test_each_json_schema_is_the_type_spark_reads_from_its_ddl(
    spark: SparkSession, name: str
) -> None:
    import importlib

    from pyspark.sql.types import StructType

    module, attr = name.split(".")
    ours = getattr(importlib.import_module(f"streaming.{module}"), attr)
    jvm = spark.sparkContext._jvm
    theirs = StructType.fromJson(
        json.loads(jvm.org.apache.spark.sql.types.StructType.fromDDL(AS_DDL[name]).json())
    )
    assert ours == theirs
