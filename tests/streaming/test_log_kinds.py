"""A message's kind: the first line's rule, else the whole message's, a task failure's cause, a level."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from detectors.model import EVENT_KINDS
from streaming.log_kinds import (
    _KIND_RULES,
    _TASK_CAUSE_RULES,
    FREE_KINDS,
    _by_cause,
    _by_level,
    _classify,
    _guard,
)

_JOB = "b5a0c61ab1b1495dd9c2f8e45d349957"
_TASK_FAILED = (
    "Source: orders (1/1)#0 (9c5ac532a5f8459790af009cbc74fd3a) switched from RUNNING to FAILED"
    " with failure cause: org.apache.flink.util.FlinkException: Disconnect from JobManager"
    f" responsible for {_JOB}."
)
_JM_TIMEOUT = (
    "Caused by: java.util.concurrent.TimeoutException: The heartbeat of JobManager with id"
    " 4c8e0f3a9b2d1e7f6a5b4c3d2e1f0a9b timed out."
)


def test_every_rule_names_a_known_kind() -> None:
    kinds = [k for k, _, _ in (*_KIND_RULES, *_TASK_CAUSE_RULES)] + list(FREE_KINDS.values())
    assert set(kinds) <= set(EVENT_KINDS)
    assert len({k for k, _, _ in _KIND_RULES}) == len(_KIND_RULES)


def test_an_anchored_literal_prefix_guards_its_pattern_unasked() -> None:
    assert _guard(r"^Completed checkpoint \d+", ()) == ("Completed checkpoint ",)
    # An alternation may match without the prefix; a pattern's own guards are its own.
    assert _guard(r"^Stopping worker|^Closing", ()) == ()
    assert _guard(r"^Completed checkpoint \d+", ("Completed",)) == ("Completed",)
    assert _guard(r"^\d+ checkpoints", ()) == ()


@pytest.mark.spark
def test_the_first_line_decides_then_the_whole_message_then_the_cause_then_the_level(
    spark: SparkSession,
) -> None:
    cases = [
        ("Completed checkpoint 12 for job x (1 bytes, checkpointDuration=1 ms).", "INFO"),
        # The first line wins over a cause further down.
        (
            "Triggering checkpoint 3 (type=CHECKPOINT)\nCaused by: java.lang.OutOfMemoryError",
            "INFO",
        ),
        # An unremarkable first line: the whole message classifies.
        (
            "Could not start.\nCaused by: org.apache.flink.runtime.registration."
            "RegistrationTimeoutException: Could not register at the ResourceManager within",
            "INFO",
        ),
        # A guard's literal without its pattern is no match.
        ("the word OutOfMemoryError in prose", "INFO"),
        (f"{_TASK_FAILED}\n\tat org.apache.flink.Foo.bar(Foo.java:1)\n{_JM_TIMEOUT}", "WARN"),
        (_TASK_FAILED, "WARN"),
        ("Something odd happened", "WARN"),
        ("Something odd happened", "WARNING"),
        ("Something odd happened", "FATAL"),
        ("Something odd happened", "INFO"),
        ("Something odd happened", None),
    ]
    df = spark.createDataFrame(
        [(i, m, lv) for i, (m, lv) in enumerate(cases)], "i int, msg string, level string"
    )
    msg = F.col("msg")
    kinds = (
        df.select("i", "msg", "level", F.substring_index(msg, "\n", 1).alias("first"))
        .select("*", _classify(msg, F.col("first")).alias("ruled"))
        .select("*", _by_cause(F.col("ruled"), msg).alias("caused"))
        .select("i", _by_level(F.col("caused"), F.col("level")).alias("kind"))
        .orderBy("i")
    )
    assert [r.kind for r in kinds.collect()] == [
        "checkpoint_completed",
        "checkpoint_triggered",
        "registration_timeout",
        "unparsed",
        "jm_heartbeat_timeout",
        "task_state",
        "log_warn",
        "log_warn",
        "log_error",
        "unparsed",
        "unparsed",
    ]
