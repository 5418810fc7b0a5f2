"""The shape a log record is named by (``parse_logs(shapes=True)``), and the shapes that are no log."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from streaming.log_shapes import LOG_ENVELOPES, LOG_LAYOUTS, NOT_LOG_SHAPES
from streaming.parse_columns import DEAD_LETTER_REASONS
from streaming.parsing import parse_logs
from streaming.schemas import EVENT_COLUMNS
from tests.conftest import records_df
from tests.streaming.parse_cases import _COMPLETED, DATA, LOG_CASES


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
