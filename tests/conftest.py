"""Shared fixtures: one Spark session and (for integration tests) one Kafka broker per run."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence

import pytest
from pyspark.sql import DataFrame, SparkSession

from streaming.session import get_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = get_session(app_name="flinkwatch-tests")
    yield session
    session.stop()


RECORD_SCHEMA = "value string, topic string, partition int, offset long, kafka_ts timestamp"


def records_df(
    spark: SparkSession,
    values: Sequence[str | None],
    kafka_ts: dt.datetime | None = None,
    topic: str = "flink.logs",
) -> DataFrame:
    """Records as the Kafka source hands them to the parser (offset = position)."""
    rows = [(v, topic, 0, i, kafka_ts) for i, v in enumerate(values)]
    return spark.createDataFrame(rows, RECORD_SCHEMA)
