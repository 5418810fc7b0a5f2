"""A record out of its envelope: the line, the JSON layout, and what the envelope says."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from streaming.log_envelopes import _unwrapped
from streaming.otlp_logs import otlp_exploded
from streaming.parse_columns import ParseLimits
from tests.conftest import records_df
from tests.streaming.parse_cases import LOG_CASES

pytestmark = pytest.mark.spark

_LINE = (
    "2024-03-11 19:02:46,003 INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - "
    "Heartbeat of TaskManager with id tm-1 timed out."
)
_LAYOUT = {"level": "WARN", "message": "m", "timestamp": "2024-03-11T19:02:46.003Z"}
_PATH = "/var/log/hadoop/container_e01_1_0001_01_000002/taskmanager.log"
_RSYSLOG = next(c["value"] for c in LOG_CASES if c["id"] == "rsyslog_default_template_fatal_oom")


def test_the_line_and_layout_out_of_each_envelope(spark: SparkSession) -> None:
    values = [
        _LINE,
        json.dumps(
            {
                "log": _LINE + "\n",
                "stream": "stdout",
                "kubernetes": {"pod_name": "tm-1", "host": "node-a"},
            }
        ),
        json.dumps(_LAYOUT),
        json.dumps({"log": json.dumps(_LAYOUT) + "\n", "stream": "stdout", "time": "T1"}),
        json.dumps(_LAYOUT) + "\n\tat a.B.c(B.java:1)",
        json.dumps({"kubernetes": {"pod_name": "tm-2"}, "stream": "stdout"}),
        json.dumps({"foo": 1}),
        json.dumps(
            {
                "@timestamp": "T2",
                "message": _LINE,
                "log": {"offset": 1, "file": {"path": _PATH}},
                "host": {"name": "h1"},
            }
        ),
        _RSYSLOG,
    ]
    records = otlp_exploded(records_df(spark, values), 1 << 20, 100)
    cols = ["offset", "_line", "_flink_json", "_nested", "_tail", "_envelope", "_pod"]
    cols += ["_env_host", "_env_ts", "_shape_env"]
    rows = [
        r.asDict()
        for r in _unwrapped(records, ParseLimits(), shapes=True)
        .select(*cols, "_j.message")
        .orderBy("offset")
        .collect()
    ]
    got = [tuple(r[c] for c in [*cols[1:], "message"]) for r in rows]
    no = (False, False, "", None)
    assert got == [
        (_LINE, *no, None, None, None, None, None),
        (_LINE + "\n", *no, "tm-1", "node-a", None, "fluentbit", None),
        (None, True, False, "", None, None, None, None, None, "m"),
        # Docker's json-file around a JSON layout: the layout is read, the envelope's time kept.
        (None, True, True, "", None, None, None, "T1", "docker_json", "m"),
        # Lines after the JSON object belong to its message.
        (None, True, False, "\tat a.B.c(B.java:1)", None, None, None, None, None, "m"),
        # An envelope known by its keys, without a line; an unknown object without one.
        (None, False, False, "", True, "tm-2", None, None, None, None),
        (None, False, False, "", False, None, None, None, None, None),
        (_LINE, *no, None, "h1", "T2", "filebeat", _LINE),
        (_RSYSLOG, *no, None, "vm", None, None, None),
    ]
