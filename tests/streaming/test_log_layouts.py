"""A line's layout: the text layouts' regex, rsyslog's host, the JSON layouts' time and trace."""

from __future__ import annotations

import json
import re

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streaming.log_envelopes import _LOG_JSON_SCHEMA
from streaming.log_layouts import (
    _LAYOUT,
    _SYSLOG_HOST,
    _blank,
    _layout_ms,
    _line_breaks,
    _rstripped,
    _thrown,
)
from streaming.schemas import JSON_OPTS
from tests.streaming.parse_cases import LOG_CASES

_BY_ID = {c["id"]: c["value"] for c in LOG_CASES}
_CKPT = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator"


@pytest.mark.parametrize(
    ("case", "groups"),
    [
        (
            "layout_kubectl_timestamps_prefix",
            ("2024-06-03 10:10:00,002", "INFO", _CKPT, "Checkpoint 1843 of job"),
        ),
        (
            "layout_logback_thread",
            ("2022-01-10 08:00:02.219", "INFO", _CKPT, "Completed checkpoint 88"),
        ),
        (
            "rsyslog_default_template_fatal_oom",
            (
                "2026-11-24 06:00:17,182",
                "ERROR",
                "org.apache.flink.runtime.taskmanager.Task",
                "Encountered fatal error",
            ),
        ),
        (
            "tm_released_nodemanager_stopping_container_is_not",
            (
                "2020-05-11 03:09:43,211",
                "INFO",
                "org.apache.hadoop.yarn.server.nodemanager.containermanager.ContainerManagerImpl",
                "Stopping container",
            ),
        ),
    ],
)
def test_one_regex_reads_every_text_layout(case: str, groups: tuple[str, ...]) -> None:
    m = re.match(_LAYOUT, _BY_ID[case])
    assert m is not None
    assert m.group(1, 2, 3) == groups[:3]
    assert m.group(4).startswith(groups[3])


def test_rsyslogs_header_names_the_host_and_flinks_own_layout_names_none() -> None:
    m = re.match(_SYSLOG_HOST, _BY_ID["rsyslog_default_template_fatal_oom"])
    assert m is not None and m[1] == "vm"
    assert re.match(_SYSLOG_HOST, _BY_ID["layout_kubectl_timestamps_prefix"]) is None


@pytest.mark.spark
def test_blank_texts_trailing_space_and_escaped_line_breaks(spark: SparkSession) -> None:
    texts = [
        "",
        " \t\n",
        "\u2028",
        " x",
        "done \r\n",
        "boom\\njava.lang.IllegalStateException: no\\n\tat a.B.c(B.java:1)",
        # A real line break: the `\n` in the text stays as written.
        "path C:\\new\nCaused by: x",
        "a literal \\n in prose",
    ]
    df = spark.createDataFrame(list(enumerate(texts)), "i int, t string")
    t = F.col("t")
    rows = df.select(
        "i", _blank(t).alias("b"), _rstripped(t).alias("r"), _line_breaks(t).alias("l")
    )
    got = [(r.b, r.r, r.l) for r in rows.orderBy("i").collect()]
    assert [b for b, _, _ in got] == [True, True, True, False, False, False, False, False]
    assert [r for _, r, _ in got][3:5] == [" x", "done"]
    assert [line for _, _, line in got][5:] == [
        "boom\njava.lang.IllegalStateException: no\n\tat a.B.c(B.java:1)",
        texts[6],
        texts[7],
    ]


@pytest.mark.spark
def test_json_layouts_time_and_exception_as_a_pattern_layout_prints_them(
    spark: SparkSession,
) -> None:
    records = [
        {"timestamp": "2024-03-11T19:02:45.871Z"},
        {"instant": {"epochSecond": 1710183765, "nanoOfSecond": 871123456}},
        {"timeMillis": 1710183765871},
        {
            "thrown": {
                "name": "java.lang.IllegalStateException",
                "message": "no",
                "cause": {"name": "java.io.IOException", "message": "gone"},
                "extendedStackTrace": [{"class": "a.B", "method": "c"}],
            }
        },
        {"thrown": {"name": "x.Y", "extendedStackTrace": "x.Y: z\n\tat a.B.c(B.java:1)"}},
    ]
    df = spark.createDataFrame(
        [(i, json.dumps(r)) for i, r in enumerate(records)], "i int, v string"
    )
    j = F.from_json(F.col("v"), _LOG_JSON_SCHEMA, JSON_OPTS)
    rows = df.select("i", _layout_ms(j).alias("ms"), _thrown(j).alias("t")).orderBy("i").collect()
    assert [r.ms for r in rows] == [1710183765871, 1710183765871, 1710183765871, None, None]
    assert [r.t for r in rows] == [
        None,
        None,
        None,
        "java.lang.IllegalStateException: no\nCaused by: java.io.IOException: gone",
        "x.Y: z\n\tat a.B.c(B.java:1)",
    ]
