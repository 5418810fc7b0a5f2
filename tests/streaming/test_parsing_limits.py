"""Records at the edge of the limits parse (or dead-letter) without failing the query."""

from __future__ import annotations

import datetime as dt

import pytest

from streaming.parsing import parse_logs
from tests.conftest import records_df

pytestmark = pytest.mark.spark


def test_a_deep_multi_line_stack_trace_parses(spark) -> None:
    frames = "".join(
        f"\n\tat org.apache.flink.streaming.runtime.tasks.StreamTask.method{i}(StreamTask.java:{i}) ~[flink-dist-1.18.1.jar:1.18.1]"
        for i in range(8000)
    )
    record = (
        "2024-02-02 07:31:12,004 ERROR org.apache.flink.util.FatalExitExceptionHandler              [] - "
        "FATAL: Thread 'Source Data Fetcher for Source: kafka-orders (2/4)#0' produced an uncaught exception. "
        "Stopping the process...\njava.lang.OutOfMemoryError: Java heap space" + frames
    )
    assert 500_000 < len(record) < 1_048_576
    rows = parse_logs(
        records_df(spark, [record], kafka_ts=dt.datetime(2024, 2, 2, 7, 31, 13, tzinfo=dt.UTC))
    ).collect()
    assert [(r["kind"], r["reason"], r["error"]) for r in rows] == [
        ("fatal_error", "java.lang.OutOfMemoryError: Java heap space", None)
    ]
