"""The parse step every parsing query shares (``streaming/events.py``)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from conf import load_config
from streaming.events import parse_limits, parsed_events
from streaming.parsing import ParseLimits
from tests.conftest import records_df


def test_the_parse_limits_are_the_configs_parsing_section() -> None:
    cfg = load_config(
        text="parsing:\n  max_record_bytes: 4096\n  max_future_skew_s: 2.5\n"
        "  max_points_per_record: 7\n"
    )
    lim = parse_limits(cfg)
    assert (lim.max_record_bytes, lim.max_future_ms, lim.max_points_per_record) == (4096, 2500, 7)
    # What the config does not name keeps the parser's own bounds.
    assert lim.max_message_chars == ParseLimits().max_message_chars


@pytest.mark.spark
def test_the_parse_query_reads_naming_rules_from_the_config_it_starts_with(
    spark: SparkSession,
) -> None:
    # A reload restarts the queries with the new config (streaming.supervise), and each
    # start builds the parse query through parsed_events: the rules in force are the new ones.
    value = '{"name":"heap.used","value":1,"timestamp":1710183765871,"labels":{}}'
    logs, metrics = records_df(spark, []), records_df(spark, [value], topic="flink.metrics")
    before = load_config(text="")
    after = load_config(
        text="parsing:\n  metric_names:\n"
        "    - {match: 'heap\\.used', name: flink_taskmanager_Status_JVM_Memory_Heap_Used}\n"
    )
    names = [
        parsed_events(logs, metrics, cfg).select("metric").first()["metric"]
        for cfg in (before, after)
    ]
    assert names == ["heap.used", "flink_taskmanager_Status_JVM_Memory_Heap_Used"]
