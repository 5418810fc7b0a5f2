"""How a job's records are written: Flink's layouts, JSON, the envelope; in time order."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from lab.fleet import FleetSpec, Incident, SimRecord, job_id, tm_id
from lab.fleet.identity import Identity
from lab.fleet.records import Records
from tests.lab.fleet.helpers import (
    CONTINUATION,
    DEFAULT_LAYOUT,
    LOG4J1,
    LOG4J2,
    by_job,
    log4j_ms,
    run,
)


def assert_default_layout(value: str, time_ms: int, log4j2: bool) -> None:
    first, *rest = value.split("\n")
    m = DEFAULT_LAYOUT.match(first)
    assert m, first
    assert log4j_ms(m["ts"]) == time_ms  # UTC, and the same instant as the record's time
    strict = (LOG4J2 if log4j2 else LOG4J1).match(first)
    assert strict, first
    logger = strict["logger"]
    assert len(logger) == max(60, len(logger.rstrip())), f"logger not padded to 60: {first!r}"
    # Flink's classes (Pekko's too), Akka's remoting before 1.18, the job's own code.
    assert logger.startswith(("org.apache.", "akka.", "com.example."))
    for line in rest:
        assert CONTINUATION.match(line), line
        assert not DEFAULT_LAYOUT.match(line)


def test_default_layout_jobs_write_flinks_log4j2_pattern(fleet) -> None:
    spec, records = fleet
    logs = by_job(spec, records, "log")
    for i in (0, 2):  # 1.11 and 1.18; job 2's failures carry stack traces
        assert logs[i]
        for r in logs[i]:
            assert_default_layout(r.value.decode(), r.time_ms, log4j2=True)
    assert any("\n\tat " in r.value.decode() for r in logs[2])


def test_log4j1_versions_write_two_spaces_and_no_brackets() -> None:
    spec = FleetSpec(
        jobs=1, flink_versions=("1.9",), incidents=(Incident("checkpoint_expiry", 0, 60),)
    )
    logs = [r for r in run(spec, 400) if r.stream == "log"]
    assert logs
    for r in logs:
        assert_default_layout(r.value.decode(), r.time_ms, log4j2=False)


def test_json_layout_records_are_seed_000_objects(fleet) -> None:
    spec, records = fleet
    logs = by_job(spec, records, "log")[1]
    assert logs
    for r in logs:
        first, *trace = r.value.decode().split("\n")
        obj = json.loads(first)
        assert list(obj) == ["level", "timestamp", "thread", "file", "line", "message"]
        assert obj["level"] in {"INFO", "WARN", "ERROR"}
        assert log4j_ms(obj["timestamp"]) == r.time_ms
        assert obj["file"].endswith(".java") and obj["line"].isdigit() and obj["thread"]
        # As log4j prints a throwable after a pattern layout: plain lines after the object.
        assert all(CONTINUATION.match(line) for line in trace)


def test_json_layout_with_a_stack_trace_keeps_it_after_the_object() -> None:
    spec = FleetSpec(
        jobs=2, flink_versions=("1.18",), incidents=(Incident("checkpoint_expiry", 1, 30),)
    )
    logs = by_job(spec, run(spec, 300), "log")[1]
    warns = [r for r in logs if "Failed to trigger or complete" in r.value.decode()]
    assert warns
    first, second, *_ = warns[0].value.decode().split("\n")
    assert json.loads(first)["level"] == "WARN"
    assert second == (
        "org.apache.flink.runtime.checkpoint.CheckpointException: "
        "Checkpoint expired before completing."
    )


def test_envelope_records_wrap_a_default_layout_line(fleet) -> None:
    spec, records = fleet
    logs = by_job(spec, records, "log")[3]
    assert logs
    pods = {tm_id(spec, 3, k) for k in range(spec.tms_per_job)}
    for r in logs:
        env = json.loads(r.value)
        assert set(env) == {"log", "stream", "time", "kubernetes"}
        assert env["stream"] == "stdout"
        assert_default_layout(env["log"], r.time_ms, log4j2=True)
        shipped = datetime.strptime(env["time"][:23], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
        assert env["time"].endswith("Z") and round(shipped.timestamp() * 1000) == r.time_ms
        kube = env["kubernetes"]
        assert kube["namespace_name"] == "flink" and re.fullmatch(r"node-\d+", kube["host"])
        if r.key == job_id(spec, 3).encode():
            assert kube["pod_name"].startswith("inventory-sync-3-") and kube["pod_name"] not in pods
        else:
            assert kube["pod_name"] == r.key.decode()


def test_queued_records_come_out_in_time_order_equal_times_as_queued() -> None:
    records = Records(Identity(FleetSpec(jobs=1), 0))
    for t, value in ((30, b"c"), (10, b"a"), (30, b"d"), (20, b"b"), (40, b"e")):
        records.push(SimRecord("metric", t, None, value))
    assert [r.value for r in records.ready(40)] == [b"a", b"b", b"c", b"d"]
    assert [r.value for r in records.ready(41)] == [b"e"]
