"""OTLP/JSON log requests (``streaming/otlp_logs.py``): a row per log record, cut at the cap."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from streaming.otlp_logs import MAX_OTLP_LOG_RECORDS, otlp_exploded
from streaming.parsing import ParseLimits, parse_logs
from tests.conftest import records_df
from tests.streaming.parse_cases import _COMPLETED, DATA


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


def test_the_default_cap_covers_the_collectors_default_batch() -> None:
    # The batch processor's send_batch_size (8,192) is what a busy log file fills.
    assert ParseLimits().max_otlp_log_records == MAX_OTLP_LOG_RECORDS >= 8192


@pytest.mark.spark
def test_an_otlp_request_with_more_log_records_than_the_cap_is_cut_at_the_cap(
    spark: SparkSession,
) -> None:
    cap = 20
    total = cap + 7
    bodies = [_COMPLETED.format(n=n) for n in range(1, total + 1)]
    request = _otlp_request(bodies)
    lim = ParseLimits(max_record_bytes=len(request) + 1, max_otlp_log_records=cap)
    rows = parse_logs(records_df(spark, [request]), lim).orderBy("seq").collect()
    assert len(rows) == cap + 1
    events, surplus = rows[:cap], rows[cap]
    assert [(r.seq, r.kind, r.checkpoint_id) for r in events] == [
        (i, "checkpoint_completed", i + 1) for i in range(cap)
    ]
    assert {r.host for r in events} == {"gke-pool-1-4f2a"}
    assert (surplus.seq, surplus.kind, surplus.error) == (cap, None, "otlp_record_cap")
    assert surplus.detail == f"{total - cap} log records beyond the first {cap}"
    # The dead letter holds the first record past the cap, not the request.
    assert json.loads(surplus.raw)["body"]["stringValue"] == bodies[cap]


@pytest.mark.spark
def test_an_otlp_log_records_dead_letter_holds_that_record_not_the_request(
    spark: SparkSession,
) -> None:
    # Each row of a request carries its own record's text, never the request's: a row that
    # carried the request would make a request's cost grow with the square of its records.
    bodies = [_COMPLETED.format(n=1), "no layout on this line", _COMPLETED.format(n=3)]
    request = _otlp_request(bodies)
    rows = parse_logs(records_df(spark, [request])).orderBy("seq").collect()
    assert [(r.seq, r.kind, r.error) for r in rows] == [
        (0, "checkpoint_completed", None),
        (1, None, "unknown_layout"),
        (2, "checkpoint_completed", None),
    ]
    record = json.loads(request)["resourceLogs"][0]["scopeLogs"][0]["logRecords"][1]
    assert json.loads(rows[1].raw) == record


@pytest.mark.spark
def test_an_otlp_request_too_large_or_unreadable_is_one_dead_letter(spark: SparkSession) -> None:
    request = _otlp_request([_COMPLETED.format(n=n) for n in range(1, 4)])
    broken = request[:-2]
    lim = ParseLimits(max_record_bytes=len(request) - 1)
    rows = parse_logs(records_df(spark, [request, broken]), lim).orderBy("offset").collect()
    assert [(r.offset, r.seq, r.error) for r in rows] == [
        (0, 0, "too_large"),
        (1, 0, "invalid_json"),
    ]
    assert [r.raw for r in rows] == [request, broken]


@pytest.mark.spark
def test_a_real_collector_capture_gets_a_row_per_log_record_and_other_records_pass(
    spark: SparkSession,
) -> None:
    # The OpenTelemetry Collector's kafka exporter on a real run (tests/data/shippers/).
    capture = DATA.parent / "shippers" / "otelcol_growth_2_3" / "growth_2_3.records.jsonl"
    requests = [
        r["value"]
        for r in map(json.loads, capture.read_text(encoding="utf-8").splitlines())
        if "logs" in r["topic"]
    ]
    want = []
    for offset, value in enumerate(requests):
        records = [
            lr
            for rl in json.loads(value)["resourceLogs"]
            for sl in rl["scopeLogs"]
            for lr in sl["logRecords"]
        ]
        for seq, lr in enumerate(records):
            stamp = lr.get("timeUnixNano", "0")
            ts = stamp if int(stamp) > 0 else lr["observedTimeUnixNano"]
            want.append((offset, seq, lr["body"]["stringValue"], ts))
    plain = _COMPLETED.format(n=1)
    rows = otlp_exploded(records_df(spark, [*requests, plain]), 1 << 20).collect()
    got = sorted((r.offset, r._seq, r._o.line, r._o.ts) for r in rows if r._is_otlp)
    assert got == want
    # A row's value is its own log record's JSON, not the request's.
    by_row = {(r.offset, r._seq): json.loads(r.value) for r in rows if r._is_otlp}
    assert by_row == {
        (offset, seq): lr
        for offset, value in enumerate(requests)
        for seq, lr in enumerate(
            lr
            for rl in json.loads(value)["resourceLogs"]
            for sl in rl["scopeLogs"]
            for lr in sl["logRecords"]
        )
    }
    assert {(r._otlp_bad, r._otlp_n) for r in rows if r.offset == 0} == {
        (False, sum(1 for w in want if w[0] == 0))
    }
    (other,) = [r for r in rows if not r._is_otlp]
    assert (other.value, other._o, other._seq) == (plain, None, None)
