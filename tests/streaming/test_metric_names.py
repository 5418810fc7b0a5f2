"""The metric naming rules (``streaming/metric_names.py``): the user's first, then the built-ins.

Each built-in scheme's cases are in tests/data/parsing/metric_cases.yaml
(``test_metric_parsing.py``); here the order and the anchoring of the rules.
"""

from __future__ import annotations

from dataclasses import fields

import pytest
from pyspark.sql import SparkSession

from conf.pipeline import MetricNameRule
from streaming.metric_names import BUILTIN_NAMES, LABELS, name_rules
from streaming.metric_parsing import parse_metrics
from tests.conftest import records_df


def test_the_users_rules_come_first_named_by_their_place_then_the_built_ins() -> None:
    own = (
        MetricNameRule(match=r"a\.(\w+)", name="flink_a_$1", labels={"host": "$1"}),
        MetricNameRule(match=r"b", name="flink_b"),
    )
    rules = name_rules(own)
    assert [(r.scheme, r.match, r.name, r.labels) for r in rules[:2]] == [
        ("config[0]", r"a\.(\w+)", "flink_a_$1", {"host": "$1"}),
        ("config[1]", "b", "flink_b", {}),
    ]
    assert rules[2:] == BUILTIN_NAMES
    assert name_rules() == BUILTIN_NAMES


def test_a_rules_key_holds_every_field() -> None:
    # The parse's expressions for the rules are kept by it (streaming/jvm_columns.py).
    rule = name_rules((MetricNameRule(match="a", name="flink_a", labels={"host": "h"}),))[0]
    assert dict(rule.key) == {
        "scheme": "config[0]",
        "match": "a",
        "name": "flink_a",
        "labels": (("host", "h"),),
        "guard": None,
    }
    assert {rule.key, BUILTIN_NAMES[0].key}  # hashable
    assert {f.name for f in fields(rule)} == {k for k, _ in rule.key}


def test_the_built_in_schemes_fill_only_the_labels_an_event_has() -> None:
    assert {k for r in BUILTIN_NAMES for k in r.labels} <= set(LABELS)
    schemes = {r.scheme for r in BUILTIN_NAMES}
    assert schemes == {"influxdb", "datadog", "jmx", "jmx_exporter", "graphite"}


@pytest.mark.spark
def test_configured_names_come_before_the_built_in_ones(spark: SparkSession) -> None:
    rules = (
        # A Graphite prefix the default scope formats do not know.
        MetricNameRule(
            match=r"prod\.flink\.([^.]+)\.taskmanager\.([^.]+)\.Status\.JVM\.Memory\.Heap\.Used",
            name="flink_taskmanager_Status_JVM_Memory_Heap_Used",
            labels={"host": "$1", "tm_id": "$2"},
        ),
        # Overrides the InfluxDB built-in for one measurement, and the label the record has.
        MetricNameRule(
            match="taskmanager_(Status_JVM_Memory_Heap_Max)",
            name="flink_taskmanager_$1",
            labels={"host": "renamed"},
        ),
    )
    values = [
        '{"name":"prod.flink.worker-7.taskmanager.tm_1.Status.JVM.Memory.Heap.Used",'
        '"value":5,"timestamp":1710183765871}',
        '{"name":"taskmanager_Status_JVM_Memory_Heap_Max","value":9,"timestamp":1710183765871,'
        '"labels":{"host":"worker-7","tm_id":"tm_1"}}',
        # Only the whole name matches: the rule is anchored.
        '{"name":"xprod.flink.w.taskmanager.t.Status.JVM.Memory.Heap.Used","value":1,'
        '"timestamp":1710183765871}',
    ]
    rows = (
        parse_metrics(records_df(spark, values), names=rules, shapes=True)
        .select("offset", "metric", "host", "tm_id", "naming")
        .orderBy("offset")
        .collect()
    )
    assert [tuple(r)[1:] for r in rows] == [
        ("flink_taskmanager_Status_JVM_Memory_Heap_Used", "worker-7", "tm_1", "config[0]"),
        ("flink_taskmanager_Status_JVM_Memory_Heap_Max", "renamed", "tm_1", "config[1]"),
        ("xprod.flink.w.taskmanager.t.Status.JVM.Memory.Heap.Used", None, None, "none"),
    ]
