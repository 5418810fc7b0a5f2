"""The parser's case files (tests/data/parsing/*.yaml) and how their rows are collected and checked.

Shared by the log parser's tests (``test_parsing.py``) and the metric parser's
(``test_metric_parsing.py``).
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from streaming.replay_session import INTERPRETED
from streaming.schemas import EVENT_COLUMNS
from streaming.session import query_settings
from tests.conftest import RECORD_SCHEMA

DATA = Path(__file__).resolve().parent.parent / "data" / "parsing"

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)

CASE_KEYS = {"id", "flink", "source", "value", "kafka_ts", "expect"}

OUTPUT_COLUMNS = set(EVENT_COLUMNS) - {"topic", "partition", "offset", "kafka_ts"}

# parse_metrics(shapes=True) adds these (for `flinkwatch doctor`); metric cases may state them.
SHAPE_COLUMNS = ("naming", "shape")

Rows = dict[int, list[dict[str, Any]]]


def _load(name: str) -> list[dict[str, Any]]:
    cases = yaml.safe_load((DATA / name).read_text(encoding="utf-8"))
    assert isinstance(cases, list)
    return cases


LOG_CASES = _load("log_cases.yaml")

METRIC_CASES = _load("metric_cases.yaml")


def _ms(iso: str) -> int:
    """Epoch ms of an ISO string; a zone-less one is UTC."""
    t = dt.datetime.fromisoformat(iso)
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.UTC)
    return (t - EPOCH) // dt.timedelta(milliseconds=1)


def _records(spark: SparkSession, cases: list[dict[str, Any]], topic: str) -> DataFrame:
    """One record per case, offset = position, each with its own Kafka timestamp."""
    rows = []
    for i, case in enumerate(cases):
        ts = case.get("kafka_ts")
        kafka_ts = dt.datetime.fromtimestamp(_ms(ts) / 1000, tz=dt.UTC) if ts else None
        rows.append((case["value"], topic, 0, i, kafka_ts))
    return spark.createDataFrame(rows, RECORD_SCHEMA)


def _collect(parsed: DataFrame, extra: tuple[str, ...] = ()) -> Rows:
    """All output rows by offset; event_time as epoch ms (no Python time-zone conversion)."""
    cols = [c for c in EVENT_COLUMNS if c not in ("event_time", "kafka_ts")] + list(extra)
    out: Rows = defaultdict(list)
    for row in parsed.select(*cols, F.unix_millis("event_time").alias("event_time")).collect():
        out[row["offset"]].append(row.asDict())
    return out


def _expectations(case: dict[str, Any]) -> list[dict[str, Any]]:
    expect = case["expect"]
    return expect if isinstance(expect, list) else [expect]


def _check(case: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    expected = _expectations(case)
    assert len(rows) == len(expected), f"{len(rows)} rows: {rows}"
    if len(rows) > 1:  # one record, several events: pair them by metric name, else in seq order
        rows = sorted(rows, key=lambda r: (str(r["metric"]), r["seq"]))
        expected = sorted(expected, key=lambda w: str(w.get("metric")))
    for want_row, row in zip(expected, rows, strict=True):
        want_row = dict(want_row)
        # A case states either its kind or its dead-letter reason; the other must be null.
        if "error" in want_row:
            want_row.setdefault("kind", None)
        else:
            want_row.setdefault("error", None)
        context = f"message={row['message']!r} error={row['error']!r} detail={row['detail']!r}"
        for col, want in want_row.items():
            got = row[col]
            if isinstance(want, dict):
                assert got is not None and got.startswith(want["startswith"]), (
                    f"{col}: {got!r} does not start with {want['startswith']!r}; {context}"
                )
                continue
            if col == "event_time" and want is not None:
                want = _ms(want)
            assert got == want, f"{col}: got {got!r}, want {want!r}; {context}"


_COMPLETED = (
    "2026-11-23 04:42:23,446 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
    "    [] - Completed checkpoint {n} for job 4a65850149ce04ff4047c9701f25e7a7 (82250 bytes,"
    " checkpointDuration=851 ms, finalizationTime=21 ms)."
)


def _collect_interpreted(
    spark: SparkSession, parsed: DataFrame, extra: tuple[str, ...] = ()
) -> Rows:
    """A parse's rows as a short replay computes them: without generated classes."""
    with query_settings(spark, INTERPRETED):
        return _collect(parsed, extra)
