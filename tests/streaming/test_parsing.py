"""The parser on real Flink wording: every case in tests/data/parsing/log_cases.yaml.

All log cases go through ONE ``parse_logs`` call (a Spark action costs about a second);
each case then checks the rows of its own offset. The metric cases are the metric
parser's (``test_metric_parsing.py``); what the case files hold is checked here.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from detectors.model import EVENT_KINDS, NAME_CHARS, cap_name
from streaming.metric_parsing import parse_metrics
from streaming.parsing import (
    DEAD_LETTER_REASONS,
    ParseLimits,
    parse_logs,
)
from streaming.session import query_settings
from tests.conftest import RECORD_SCHEMA, records_df
from tests.streaming.parse_cases import (
    CASE_KEYS,
    DATA,
    LOG_CASES,
    METRIC_CASES,
    OUTPUT_COLUMNS,
    SHAPE_COLUMNS,
    Rows,
    _check,
    _collect,
    _collect_interpreted,
    _expectations,
    _ms,
    _records,
)


@pytest.fixture(scope="module")
def log_rows(spark: SparkSession) -> Rows:
    return _collect(parse_logs(_records(spark, LOG_CASES, "flink.logs")))


# --- the case files themselves ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cases"), [("log_cases.yaml", LOG_CASES), ("metric_cases.yaml", METRIC_CASES)]
)
def test_case_files_are_well_formed(name: str, cases: list[dict[str, Any]]) -> None:
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), f"{name}: duplicate ids"
    columns = OUTPUT_COLUMNS | (set(SHAPE_COLUMNS) if cases is METRIC_CASES else set())
    for case in cases:
        assert set(case) <= CASE_KEYS, f"{case['id']}: unknown keys {set(case) - CASE_KEYS}"
        assert {"id", "flink", "source", "value", "expect"} <= set(case), case["id"]
        assert str(case["source"]).startswith(("REAL ", "CONSTRUCTED")), case["id"]
        for want in _expectations(case):
            assert want and set(want) <= columns, f"{case['id']}: {set(want)}"
            assert ("kind" in want) != ("error" in want), f"{case['id']}: kind xor error"
            if "kind" in want:
                assert want["kind"] in EVENT_KINDS, case["id"]


def test_every_log_kind_has_a_case() -> None:
    covered = {w.get("kind") for c in LOG_CASES for w in _expectations(c)}
    missing = set(EVENT_KINDS) - {"metric", "unparsed"} - covered
    assert not missing, f"kinds without a log case: {sorted(missing)}"


def test_every_dead_letter_reason_has_a_case() -> None:
    log_errors = {w.get("error") for c in LOG_CASES for w in _expectations(c)}
    metric_errors = {w.get("error") for c in METRIC_CASES for w in _expectations(c)}
    # too_large, otlp_protobuf and otlp_record_cap are generated in tests below.
    assert {
        "invalid_json",
        "empty",
        "unknown_layout",
        "bad_timestamp",
        "missing_field",
        "metric_on_log_topic",
        "envelope_without_line",
    } <= log_errors
    assert {"invalid_json", "bad_type", "non_finite_value", "missing_field"} <= metric_errors
    # Every reason of the metric routes (DEAD_LETTER_REASONS' block before the log routes');
    # too_many_points is generated in test_points_past_the_cap_are_one_dead_letter.
    metric_block = slice(
        DEAD_LETTER_REASONS.index("log_on_metric_topic"),
        DEAD_LETTER_REASONS.index("metric_on_log_topic"),
    )
    routes = DEAD_LETTER_REASONS[metric_block]
    assert set(routes) - {"too_many_points"} <= metric_errors


# --- the cases --------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize(
    ("offset", "case"), list(enumerate(LOG_CASES)), ids=[c["id"] for c in LOG_CASES]
)
def test_log_case(offset: int, case: dict[str, Any], log_rows: Rows) -> None:
    _check(case, log_rows[offset])


@pytest.mark.spark
def test_oversized_records_are_dead_lettered(spark: SparkSession) -> None:
    limit = ParseLimits().max_record_bytes
    line = (
        "2024-03-11 19:02:46,003 INFO  org.apache.flink.runtime.jobmaster.JobMaster"
        "                 [] - Heartbeat of TaskManager with id tm-1 timed out. "
    )
    log = line + "x" * limit
    metric = json.dumps(
        {"name": "m", "value": 1, "timestamp": 1710183765871, "labels": {"pad": "x" * limit}}
    )
    logs = parse_logs(records_df(spark, [log])).select("kind", "error").collect()
    metrics = parse_metrics(records_df(spark, [metric])).select("kind", "error").collect()
    assert [(r.kind, r.error) for r in logs] == [(None, "too_large")]
    assert [(r.kind, r.error) for r in metrics] == [(None, "too_large")]


@pytest.mark.spark
def test_zone_less_log_timestamp_is_read_in_session_time_zone(spark: SparkSession) -> None:
    values = [
        # Flink's layout has no zone: the wall clock of the session time zone.
        "2020-10-17 14:51:36.289 [Checkpoint Timer] INFO  "
        "org.apache.flink.runtime.checkpoint.CheckpointCoordinator [] - "
        "Triggering checkpoint 37 (type=CHECKPOINT) @ 1602917496275 for job "
        "7848c696590291978aa8279b3c09e5d7.",
        # A shipper's timestamp with a zone stays the same instant.
        '{"message":"java.lang.OutOfMemoryError: Metaspace",'
        '"timestamp":"2024-05-20T09:20:11.402Z","kubernetes":{"pod_name":"tm-1"}}',
    ]
    spark.conf.set("spark.sql.session.timeZone", "Asia/Shanghai")
    try:
        rows = (
            parse_logs(records_df(spark, values))
            .select("offset", "error", F.unix_millis("event_time").alias("ms"))
            .orderBy("offset")
            .collect()
        )
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    shanghai = dt.timezone(dt.timedelta(hours=8))  # no DST in 2020
    assert [(r.error, r.ms) for r in rows] == [
        (None, _ms(dt.datetime(2020, 10, 17, 14, 51, 36, 289000, tzinfo=shanghai).isoformat())),
        (None, _ms("2024-05-20T09:20:11.402+00:00")),
    ]


# --- shipper routes (issue #33) -----------------------------------------------------------------


def _capture(spark: SparkSession, path: Path, topic_part: str) -> DataFrame:
    """The records of a real shipper capture (tests/data/shippers/*/README.md) on one topic."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if topic_part in r["topic"]:
            ts = dt.datetime.fromtimestamp(r["timestamp_ms"] / 1000, tz=dt.UTC)
            rows.append((r["value"], r["topic"], r["partition"], r["offset"], ts))
    return spark.createDataFrame(rows, RECORD_SCHEMA)


@pytest.mark.spark
@pytest.mark.parametrize(
    ("capture", "topic_part", "shape"),
    [
        (
            "layouts_expiry_2_3/layouts_expiry_2_3.kafka_jsonlayout.records.jsonl",
            "logs",
            "log4j2_json_layout",
        ),
        ("otelcol_growth_2_3/growth_2_3.records.jsonl", "logs", "otlp_json"),
    ],
)
def test_real_shipper_log_captures_parse_without_dead_letters(
    spark: SparkSession, capture: str, topic_part: str, shape: str
) -> None:
    records = _capture(spark, DATA.parent / "shippers" / capture, topic_part)
    rows = parse_logs(records, shapes=True).collect()
    assert len(rows) >= records.count()
    assert {(r.error, r.shape) for r in rows} == {(None, shape)}
    kinds = {r.kind for r in rows}
    assert {"checkpoint_triggered", "checkpoint_completed", "task_state"} <= kinds


def _case(cases: list[dict[str, Any]], ident: str) -> dict[str, Any]:
    return next(c for c in cases if c["id"] == ident)


@pytest.mark.spark
def test_a_job_name_of_a_mebibyte_is_cut_at_the_edge(spark: SparkSession) -> None:
    # The case files' job lines, with a name of 1 MiB (the record limit raised to let it in).
    name = "orders-etl-" + "x" * (1 << 20)
    log = _case(LOG_CASES, "job_failing_1_4_log4j1")
    metric = _case(METRIC_CASES, "canonical_iso_timestamp_job_labels")
    lim = ParseLimits(max_record_bytes=4 << 20)
    log_value = log["value"].replace("orders-enrichment", name)
    metric_value = metric["value"].replace('"orders_enrichment"', json.dumps(name))
    parsed = [
        *parse_logs(records_df(spark, [log_value]), lim).collect(),
        *parse_metrics(records_df(spark, [metric_value]), lim).collect(),
    ]
    cut = name[: NAME_CHARS - 1] + "…"
    assert [(r.kind, r.error, r.job_id, r.job_name) for r in parsed] == [
        ("job_state", None, log["expect"]["job_id"], cut),
        ("metric", None, metric["expect"]["job_id"], cut),
    ]
    assert cap_name(name) == cut and cap_name(cut) == cut and len(cut) == NAME_CHARS


@pytest.mark.spark
def test_a_short_replays_interpreted_expressions_parse_every_log_case_alike(
    spark: SparkSession, log_rows: Rows
) -> None:
    """A short replay evaluates the parse without generated classes (streaming.replay_session)."""
    parsed = parse_logs(_records(spark, LOG_CASES, "flink.logs"))
    assert _collect_interpreted(spark, parsed) == log_rows


def test_a_text_read_several_times_is_read_from_a_column(spark: SparkSession) -> None:
    """The cuts and the message's strip read columns, not their texts' whole expressions.

    A cut reads its text three or five times and the strip eleven; Spark merges the
    projections, repeating an inlined text at each read. The log parse's optimized plan was
    84,003 characters for these records with the names, the reason and the message
    inlined, 51,359 with them as columns, and the real-time parse optimizes it again at
    every commit. A bound, not a target: a new rule adds a little, an inlined text tens of KB.
    """
    # A real line (seed 002); the plan is the same for any record.
    df = parse_logs(records_df(spark, [_case(LOG_CASES, "cp_expired_1_4_seed")["value"]]))
    with query_settings(spark, {"spark.sql.maxPlanStringLength": str(2**30)}):
        size = len(df._jdf.queryExecution().optimizedPlan().treeString())
    assert size < 65_000, size
