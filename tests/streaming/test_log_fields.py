"""A classified message's fields: its kind's patterns, the job id's fallbacks, the reason."""

from __future__ import annotations

import re

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from streaming.log_fields import _FIELD_RULES, _FIELDS, _log_fields, _match_slots
from streaming.log_kinds import _KIND_RULES, _TASK_CAUSE_RULES

_JOB = "7848c696590291978aa8279b3c09e5d7"
_MDC = "016ba2f5c82eb9472e74954d863dbbbb"
_FILE = "b5a0c61ab1b1495dd9c2f8e45d349957"


def test_every_field_rule_reads_groups_its_pattern_has_for_a_kind_a_rule_names() -> None:
    kinds = {k for k, _, _ in (*_KIND_RULES, *_TASK_CAUSE_RULES)}
    assert set(_FIELD_RULES) <= kinds
    for kind, rules in _FIELD_RULES.items():
        for pattern, groups in rules:
            n = re.compile(pattern).groups
            assert set(groups) <= set(_FIELDS), kind
            for g in groups.values():
                assert all(1 <= i <= n for i in (g if isinstance(g, tuple) else (g,))), kind


@pytest.mark.spark
def test_fields_by_kind_and_the_job_id_by_whose_word(spark: SparkSession) -> None:
    cases = [
        (
            "checkpoint_completed",
            f"Completed checkpoint 37 for job {_JOB} (123456 bytes, checkpointDuration=789 ms).",
        ),
        (
            "heartbeat_timeout",
            "Heartbeat of TaskManager with id tm-1(10.0.0.7:6122) timed out.",
        ),
        (
            "container_memory_kill",
            "Container [pid=1,containerID=container_e05_1_0042_01_000003] is running 1B beyond"
            " the 'PHYSICAL' memory limit.",
        ),
        # A task's line prints an attempt id, never a job id.
        ("task_state", "Map (1/2) (9c5ac532a5f8459790af009cbc74fd3a) switched from A to B"),
        # A free line: its MDC's job first, then the job it names, then its file's one job.
        ("log_warn", f"Lost contact with job {_JOB}"),
        ("log_warn", f"Lost contact with job {_JOB}"),
        ("log_warn", "Lost contact"),
        ("log_error", f"id {_JOB} went away"),
        # An unclassified line has no reason, however exceptional.
        ("unparsed", "boom\njava.lang.IllegalStateException: no"),
        ("job_state", "Job orders (abc) failed\njava.lang.IllegalStateException: no"),
    ]
    mdc = [None, None, None, None, _MDC, None, None, None, None, None]
    df = spark.createDataFrame(
        [(i, k, m, mdc[i]) for i, (k, m) in enumerate(cases)],
        "i int, kind string, msg string, mdc string",
    )
    kind, msg = F.col("kind"), F.col("msg")
    slots = _match_slots(kind, msg)
    df = df.select("*", *[s.alias(f"_slot{i}") for i, s in enumerate(slots)])
    slot_cols = [F.col(f"_slot{i}") for i in range(len(slots))]
    fields = _log_fields(kind, msg, slot_cols, F.col("mdc"), F.lit(_FILE))
    rows = [
        r.asDict()
        for r in df.select("i", *[v.alias(f) for f, v in fields.items()]).orderBy("i").collect()
    ]
    assert {k: rows[0][k] for k in ("checkpoint_id", "size_bytes", "duration_ms", "job_id")} == {
        "checkpoint_id": 37,
        "size_bytes": 123456,
        "duration_ms": 789,
        "job_id": _JOB,
    }
    assert (rows[1]["tm_id"], rows[1]["host"]) == ("tm-1", "10.0.0.7")
    assert (rows[2]["tm_id"], rows[2]["reason"]) == ("container_e05_1_0042_01_000003", "physical")
    assert (rows[3]["task"], rows[3]["to_state"], rows[3]["job_id"]) == ("Map (1/2)", "B", None)
    assert [r["job_id"] for r in rows[4:8]] == [_MDC, _JOB, _FILE, _FILE]
    assert rows[8]["reason"] is None
    assert rows[9]["reason"] == "java.lang.IllegalStateException: no"
