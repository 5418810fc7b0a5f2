"""The helpers both parsers build on, each on the texts it was written for."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from detectors.model import NAME_CHARS, cap_name
from streaming.parse_columns import (
    ParseLimits,
    _group,
    _groups,
    _rx,
    capped_name,
    epoch_ms_from_text,
    longer_than,
    prefix,
    time_error,
)

pytestmark = pytest.mark.spark


def _values(spark: SparkSession, texts: list[str | None]) -> list[dict[str, object]]:
    """Per text, what each text helper makes of it (one Spark action for them all)."""
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, t string")
    t = F.col("t")
    groups = _groups(t, r"^(\w+)=(\d*)", 2)
    return [
        r.asDict()
        for r in df.select(
            "i",
            longer_than(t, 4).alias("longer"),
            prefix(t, 4).alias("prefix"),
            capped_name(t).alias("capped"),
            _rx(t, r"id=(\w+)").alias("rx"),
            groups.alias("g"),
        )
        .select("*", _group(F.col("g"), 1).alias("g1"), _group(F.col("g"), 2).alias("g2"))
        .orderBy("i")
        .collect()
    ]


def test_lengths_and_prefixes_count_characters_not_bytes(spark: SparkSession) -> None:
    long_name = "é" * (NAME_CHARS + 1)
    rows = _values(spark, ["abcd", "abcde", "éééé", "ééééé", long_name, None])
    assert [(r["longer"], r["prefix"]) for r in rows] == [
        (False, "abcd"),
        (True, "abcd"),
        # Eight bytes, four characters: not longer, kept whole.
        (False, "éééé"),
        (True, "éééé"),
        (True, "éééé"),
        (None, None),
    ]
    assert rows[4]["capped"] == cap_name(long_name) and len(rows[4]["capped"]) == NAME_CHARS
    assert [r["capped"] for r in rows[:4]] == ["abcd", "abcde", "éééé", "ééééé"]


def test_one_regex_evaluation_yields_every_group(spark: SparkSession) -> None:
    rows = _values(spark, ["tm=42 id=x1", "tm= rest", "no match", None])
    assert [(r["g1"], r["g2"], r["rx"]) for r in rows] == [
        ("tm", "42", "x1"),
        # A group that took no part (or matched nothing) is null, as is a text without a match.
        ("tm", None, None),
        (None, None, None),
        (None, None, None),
    ]


def test_event_times_from_numbers_of_any_unit_and_from_dates(spark: SparkSession) -> None:
    texts = [
        "1710183765",
        "1710183765871",
        "1710183765871123",
        "1710183765871123456",
        "2024-03-11 19:02:45,871",
        "2024-03-11T19:02:45.871Z",
        "yesterday",
    ]
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, t string")
    got = [
        r.ms for r in df.orderBy("i").select(epoch_ms_from_text(F.col("t")).alias("ms")).collect()
    ]
    assert got == [1710183765000, *[1710183765871] * 5, None]


def test_an_event_time_outside_the_limits_is_a_bad_timestamp(spark: SparkSession) -> None:
    lim = ParseLimits()
    kafka = dt.datetime(2024, 3, 11, 19, 2, 45, tzinfo=dt.UTC)
    kafka_ms = 1710183765000
    cases = [
        (kafka_ms, kafka),
        (kafka_ms + lim.max_future_ms, kafka),
        (kafka_ms + lim.max_future_ms + 1, kafka),
        (lim.min_event_ms - 1, kafka),
        (None, kafka),
        # A file's record has no Kafka time: bounded by max_event_ms alone.
        (lim.max_event_ms, None),
        (lim.max_event_ms + 1, None),
    ]
    df = spark.createDataFrame(
        [(i, ms, ts) for i, (ms, ts) in enumerate(cases)], "i int, ms long, ts timestamp"
    )
    got = [
        r.e
        for r in df.orderBy("i")
        .select(time_error(F.col("ms"), F.col("ts"), lim).alias("e"))
        .collect()
    ]
    bad = "bad_timestamp"
    assert got == [None, None, bad, bad, bad, None, bad]
