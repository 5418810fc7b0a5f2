"""The parser on real Flink wording: every case in tests/data/parsing/*.yaml.

All log cases go through ONE ``parse_logs`` call and all metric cases through ONE
``parse_metrics`` call (a Spark action costs about a second); each case then checks the
rows of its own offset.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from conf import load_config
from conf.pipeline import MetricNameRule
from detectors.model import EVENT_KINDS, NAME_CHARS, cap_name
from streaming.app import parsed_events
from streaming.metric_parsing import SHAPES, parse_metrics
from streaming.parsing import (
    DEAD_LETTER_REASONS,
    LOG_ENVELOPES,
    LOG_LAYOUTS,
    MAX_OTLP_LOG_RECORDS,
    NOT_LOG_SHAPES,
    ParseLimits,
    parse_logs,
)
from streaming.schemas import EVENT_COLUMNS
from tests.conftest import RECORD_SCHEMA, records_df

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


@pytest.fixture(scope="module")
def log_rows(spark: SparkSession) -> Rows:
    return _collect(parse_logs(_records(spark, LOG_CASES, "flink.logs")))


@pytest.fixture(scope="module")
def metric_rows(spark: SparkSession) -> Rows:
    parsed = parse_metrics(_records(spark, METRIC_CASES, "flink.metrics"), shapes=True)
    return _collect(parsed, SHAPE_COLUMNS)


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


def test_every_shape_has_a_case() -> None:
    shapes = {w.get("shape") for c in METRIC_CASES for w in _expectations(c)}
    assert set(SHAPES) <= shapes


# --- the cases --------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize(
    ("offset", "case"), list(enumerate(LOG_CASES)), ids=[c["id"] for c in LOG_CASES]
)
def test_log_case(offset: int, case: dict[str, Any], log_rows: Rows) -> None:
    _check(case, log_rows[offset])


@pytest.mark.spark
@pytest.mark.parametrize(
    ("offset", "case"), list(enumerate(METRIC_CASES)), ids=[c["id"] for c in METRIC_CASES]
)
def test_metric_case(offset: int, case: dict[str, Any], metric_rows: Rows) -> None:
    _check(case, metric_rows[offset])


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

_COMPLETED = (
    "2026-11-23 04:42:23,446 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
    "    [] - Completed checkpoint {n} for job 4a65850149ce04ff4047c9701f25e7a7 (82250 bytes,"
    " checkpointDuration=851 ms, finalizationTime=21 ms)."
)


def _otlp_request(bodies: list[str]) -> str:
    records = [
        {
            "timeUnixNano": "0",
            "observedTimeUnixNano": "1795408943452000000",
            "body": {"stringValue": b},
        }
        for b in bodies
    ]
    host = {"key": "host.name", "value": {"stringValue": "gke-pool-1-4f2a"}}
    return json.dumps(
        {
            "resourceLogs": [
                {"resource": {"attributes": [host]}, "scopeLogs": [{"logRecords": records}]}
            ]
        },
        separators=(",", ":"),  # compact, as the collector's exporter writes it
    )


@pytest.mark.spark
def test_an_otlp_request_with_10000_log_records_is_cut_at_the_cap(spark: SparkSession) -> None:
    cap = MAX_OTLP_LOG_RECORDS
    request = _otlp_request([_COMPLETED.format(n=n) for n in range(1, 10_001)])
    lim = ParseLimits(max_record_bytes=len(request) + 1)
    rows = parse_logs(records_df(spark, [request]), lim).orderBy("seq").collect()
    assert len(rows) == cap + 1
    events, surplus = rows[:cap], rows[cap]
    assert [(r.seq, r.kind, r.checkpoint_id) for r in events] == [
        (i, "checkpoint_completed", i + 1) for i in range(cap)
    ]
    assert {r.host for r in events} == {"gke-pool-1-4f2a"}
    assert (surplus.seq, surplus.kind, surplus.error) == (cap, None, "otlp_record_cap")
    assert surplus.detail == f"{10_000 - cap} log records beyond the first {cap}"
    assert len(surplus.raw) == 65536


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _otlp_proto(body: str) -> str:
    """An ExportLogsServiceRequest in protobuf, as Kafka's value cast to a string shows it."""
    any_value = _field(1, body.encode())
    record = (
        bytes([1 << 3 | 1])
        + (1795408943452000000).to_bytes(8, "little")  # time_unix_nano
        + bytes([2 << 3])
        + _varint(9)  # severity_number
        + _field(5, any_value)  # body
    )
    host = _field(1, _field(1, b"host.name") + _field(2, _field(1, b"gke-pool-1-4f2a")))
    request = _field(1, _field(1, host) + _field(2, _field(2, record)))
    return request.decode("utf-8", errors="replace")


@pytest.mark.spark
def test_otlp_protobuf_is_refused_with_its_own_reason(spark: SparkSession) -> None:
    value = _otlp_proto(_COMPLETED.format(n=1))
    rows = parse_logs(records_df(spark, [value]), shapes=True).collect()
    assert [(r.kind, r.error, r.shape) for r in rows] == [(None, "otlp_protobuf", "otlp_protobuf")]


# One record per shape: (case id or a record, the shape parse_logs(shapes=True) names).
_SHAPES = [
    ("layout_kubectl_timestamps_prefix", "log4j_text"),
    ("unparsed_lone_stack_frame", "log4j_text"),
    ("log_warn_json_context_map_job_id", "flink_json"),
    ("log4j2_json_layout_instant_completed_2_3", "log4j2_json_layout"),
    ("log_error_ecs_mdc_job_id_2_3", "ecs_json"),
    ("envelope_fluentbit_docker_trailing_newline", "fluentbit"),
    ("fluentbit_k8s_wrapping_ecs_fatal_oom", "fluentbit+ecs_json"),
    (json.dumps({"log": _COMPLETED.format(n=1) + "\n", "stream": "stdout"}), "docker_json"),
    ("docker_json_wrapping_flink_json_layout_seed000", "docker_json+flink_json"),
    ("vector_k8s_text_line_host_from_pod_node_name", "vector"),
    ("vector_k8s_wrapping_ecs_fatal_oom", "vector+ecs_json"),
    ("envelope_filebeat_ecs_log_object", "filebeat"),
    ("envelope_filebeat_decoded_json_layout_fatal_seed000", "filebeat+flink_json"),
    (json.dumps({"message": _COMPLETED.format(n=1)}), "json_envelope"),
    ("otlp_json_bridge_bare_message_nanos_as_strings", "otlp_json"),
    ("otlp_json_body_ecs_layout", "otlp_json+ecs_json"),
    ("dead_metric_canonical_on_log_topic", "metric_json"),
    ("dead_metric_telegraf_json_on_log_topic", "telegraf_json"),
    ("dead_metric_vector_on_log_topic", "vector_metric"),
    ("dead_metric_otlp_json_on_log_topic", "otlp_metrics"),
    ("dead_metric_influx_line_on_log_topic", "influx_line"),
    ("dead_unknown_layout", "unknown"),
    ("dead_json_without_line", "unknown"),
]


@pytest.mark.spark
def test_the_shape_column_names_each_record_shape(spark: SparkSession) -> None:
    by_id = {c["id"]: c["value"] for c in LOG_CASES}
    values = [by_id.get(v, v) for v, _ in _SHAPES]
    parsed = parse_logs(records_df(spark, values), shapes=True)
    assert parsed.columns == [*EVENT_COLUMNS, "own_tm", "shape"]
    got = [(r.offset, r.shape) for r in parsed.orderBy("offset").collect()]
    assert got == [(i, shape) for i, (_, shape) in enumerate(_SHAPES)]


def test_every_shape_and_dead_letter_reason_is_documented() -> None:
    page = (DATA.parent.parent.parent / "docs" / "input-formats.md").read_text(encoding="utf-8")
    for reason in DEAD_LETTER_REASONS:
        assert f"| `{reason}` |" in page, reason
    for shape in (*LOG_LAYOUTS, *LOG_ENVELOPES, *NOT_LOG_SHAPES):
        assert f"`{shape}`" in page, shape
    # otlp_protobuf has a test of its own.
    shown = {s for _, s in _SHAPES if "+" not in s} | {"otlp_protobuf"}
    assert shown == {*LOG_LAYOUTS, *LOG_ENVELOPES, *NOT_LOG_SHAPES}


@pytest.mark.spark
def test_points_past_the_cap_are_one_dead_letter(spark: SparkSession) -> None:
    line = "prometheus,host=jm_0 " + ",".join(f"flink_m{i}={i}" for i in range(5))
    lim = ParseLimits(max_points_per_record=3)
    rows = (
        parse_metrics(records_df(spark, [line + " 1710183765000000000"]), lim)
        .select("seq", "kind", "metric", "error", "detail")
        .orderBy("seq")
        .collect()
    )
    assert [(r.seq, r.kind, r.error) for r in rows] == [
        (0, "metric", None),
        (1, "metric", None),
        (2, "metric", None),
        (3, None, "too_many_points"),
    ]
    # One dead letter stands for the samples past the cap (here 2), not one each.
    assert rows[3].detail == "samples past the first 3 of the record"


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


@pytest.mark.spark
def test_shapes_adds_naming_and_shape_as_the_last_columns(spark: SparkSession) -> None:
    plain = parse_metrics(records_df(spark, ["x"]))
    shaped = parse_metrics(records_df(spark, ["x"]), shapes=True)
    assert plain.columns == list(EVENT_COLUMNS)
    assert shaped.columns == [*EVENT_COLUMNS, "naming", "shape"]


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
