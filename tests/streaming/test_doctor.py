"""The doctor's judgement over a counted sample (no Spark: the counts are given)."""

from __future__ import annotations

import json

from detectors import REGISTRY
from detectors.idle_heap_growth import HEAP_USED
from detectors.model import EVENT_KINDS, LAST_CHECKPOINT_DURATION
from streaming.doctor import (
    NEEDS,
    Count,
    Example,
    Tally,
    as_json,
    diagnose,
    render_text,
    side_of_logger,
)

TM_NUM_RECORDS_OUT = "flink_taskmanager_job_task_numRecordsOut"


def c(kind=None, *, n=10, shape="log4j_text", error=None, job=False, tm=False, side=None,
      metric=None, input="logs", source=None) -> Count:  # fmt: skip
    # A line that names its TaskManager comes from a source that does, unless told.
    return Count(
        input, shape, kind, error, job, tm, side, metric, n, tm if source is None else source
    )


def healthy() -> list[Count]:
    return [
        c("checkpoint_triggered", job=True, side="jobmanager"),
        c("checkpoint_completed", job=True, side="jobmanager"),
        c("job_state", job=True, side="jobmanager"),
        c("unparsed", side="jobmanager", n=500),
        c("unparsed", tm=True, side="taskmanager", n=300),
        c("log_warn", job=True, tm=True, side="taskmanager", n=4),
        c("metric", tm=True, metric=HEAP_USED, input="metrics", shape="canonical"),
        c(
            "metric",
            tm=True,
            job=True,
            metric=TM_NUM_RECORDS_OUT,
            input="metrics",
            shape="canonical",
        ),
    ]


def views(counts: list[Count]) -> dict[str, object]:
    return {v.detector: v for v in diagnose(Tally(tuple(counts))).detectors}


def test_every_detector_has_needs_within_what_it_reads() -> None:
    assert set(NEEDS) == set(REGISTRY)
    for name, needs in NEEDS.items():
        for need in needs:
            assert need.signals and need.missing
            for s in need.signals:
                assert s.kind in EVENT_KINDS, (name, s.kind)
                # A metric a detector is judged by is one it reads: no drift from its code.
                assert s.metrics <= REGISTRY[name].metrics, (name, s.metrics)


def test_a_healthy_sample_leaves_every_detector_ready() -> None:
    got = views(healthy())
    assert {n: v.verdict for n, v in got.items()} == dict.fromkeys(REGISTRY, "ready")


def test_without_heap_metrics_idle_heap_growth_cannot_page() -> None:
    counts = [x for x in healthy() if x.metric != HEAP_USED]
    v = views(counts)["idle_heap_growth"]
    assert v.verdict == "partial"  # throughput is still there
    assert any("no heap metrics seen for any TaskManager" in m for m in v.missing)
    v = views([x for x in counts if x.input == "logs"])["idle_heap_growth"]
    assert v.verdict == "blind"
    text = "\n".join(render_text(diagnose(Tally(tuple(x for x in counts if x.input == "logs")))))
    assert "BLIND    idle_heap_growth" in text
    assert "cannot page: no heap metrics seen for any TaskManager" in text


def test_taskmanager_lines_without_their_taskmanager_blind_jvm_fatal() -> None:
    counts = [
        c("unparsed", tm=False, side="taskmanager", n=300) if x.side == "taskmanager" else x
        for x in healthy()
    ]
    counts.append(c("fatal_error", side="taskmanager", n=2))
    got = views(counts)
    assert got["jvm_fatal"].verdict == "blind"
    assert "Starting TaskManager with ResourceID" in got["jvm_fatal"].missing[0]
    assert any("2 fatal error" in n for n in got["tm_lost"].notes)
    assert got["tm_lost"].verdict == "partial"


def test_a_source_that_names_its_taskmanager_is_enough_for_jvm_fatal() -> None:
    # A TaskManager's own log file: its lines name no TaskManager, its start line does.
    counts = [
        c("unparsed", tm=False, source=True, side="taskmanager", n=300)
        if x.side == "taskmanager"
        else x
        for x in healthy()
    ]
    assert views(counts)["jvm_fatal"].verdict == "ready"


def test_taskmanager_warnings_that_name_no_job_are_said() -> None:
    counts = [x for x in healthy() if x.kind != "log_warn"]
    counts += [
        c("log_warn", side="taskmanager", tm=True, n=40),
        c("log_error", side="jobmanager", job=True, n=3),
    ]
    v = views(counts)["new_error_pattern"]
    assert v.verdict == "partial"
    assert v.notes == (
        "TaskManager lines name no job (40 WARN/ERROR lines): new_error_pattern sees only "
        "JobManager lines",
    )
    # No line at all that names a job: blind, not partial.
    counts = [x for x in counts if x.kind != "log_error"]
    assert views(counts)["new_error_pattern"].verdict == "blind"


def test_metrics_alone_keep_the_checkpoint_detectors_that_read_them() -> None:
    counts = [c("metric", job=True, metric=LAST_CHECKPOINT_DURATION, input="metrics")]
    got = views(counts)
    assert got["checkpoint_creep"].verdict == "ready"
    assert got["checkpoint_failures"].verdict == "blind"
    # A gauge without its job_id label places nothing.
    counts = [c("metric", metric=LAST_CHECKPOINT_DURATION, input="metrics")]
    assert views(counts)["checkpoint_creep"].verdict == "blind"


def test_job_gauges_alone_leave_job_lost_blind_and_its_jobmanagers_lines_make_it_ready() -> None:
    # Gauges start no watch without the JobManager's log: a job's gauges just stop at its end.
    gauges = [
        c("metric", job=True, metric=m, input="metrics", shape="canonical")
        for m in ("flink_jobmanager_job_uptime", "flink_jobmanager_job_numRestarts")
    ]
    v = views(gauges)["job_lost"]
    assert v.verdict == "blind"
    assert "from its uptime gauge once a line of its JobManager's log is read" in v.missing[0]
    # A running job's checkpoint lines with its uptime: watched (no RUNNING line needed).
    checkpoints = c("checkpoint_completed", job=True, side="jobmanager")
    assert views([*gauges, checkpoints])["job_lost"].verdict == "ready"


def test_shapes_reasons_and_kinds_are_counted_with_an_example() -> None:
    ex = Example("logs", "unknown_layout", "flink.logs", 1, 42, "Nov 24 host flink: hello\nmore")
    counts = [
        *healthy(),
        c(None, error="unknown_layout", shape="unknown", n=7),
        c(None, error="invalid_json", shape="unknown", n=1),
    ]
    d = diagnose(Tally(tuple(counts), (ex,), {"logs": "flink.logs: the newest 1,000 records"}))
    text = "\n".join(render_text(d))
    assert "flink.logs: the newest 1,000 records" in text
    assert (
        "unknown_layout" in text
        and "e.g. flink.logs[1]@42: Nov 24 host flink: hello\\nmore" in text
    )
    shape = {(s.input, s.shape): s for s in d.shapes}
    assert shape["logs", "log4j_text"].records == 834
    assert shape["logs", "unknown"].dead == 8
    kinds = {k.kind: k for k in d.kinds}
    assert (kinds["log_warn"].with_job, kinds["log_warn"].with_tm) == (4, 4)
    doc = json.loads(json.dumps(as_json(d)))
    assert doc["dead_letters"][0] == {
        "input": "logs",
        "reason": "unknown_layout",
        "records": 7,
        "example": vars(ex),
    }
    assert {v["detector"] for v in doc["detectors"]} == set(REGISTRY)


def test_only_enabled_detectors_are_judged() -> None:
    d = diagnose(Tally(tuple(healthy())), ["tm_lost"])
    assert [v.detector for v in d.detectors] == ["tm_lost"]


def test_the_side_of_a_line_is_its_logger() -> None:
    assert side_of_logger("org.apache.flink.runtime.taskexecutor.TaskExecutor") == "taskmanager"
    assert side_of_logger("org.apache.flink.runtime.taskmanager.Task") == "taskmanager"
    assert (
        side_of_logger("org.apache.flink.runtime.checkpoint.CheckpointCoordinator") == "jobmanager"
    )
    assert side_of_logger("com.example.MyFunction") is None
    assert side_of_logger(None) is None


def test_a_rule_is_judged_by_the_events_it_reads_naming_its_entity() -> None:
    from conf import AppConfig

    bp = "flink_taskmanager_job_task_backPressuredTimeMsPerSecond"
    rules = [
        {"name": "backpressure", "kind": "threshold", "metric": bp, "value": 800},
        {"name": "expiries", "kind": "frequency", "kinds": ["checkpoint_expired"]}
        | {"count": 3, "window_s": 600},
    ]
    cfg = AppConfig.model_validate({"rules": rules})
    names = ["checkpoint_failures", "backpressure", "expiries"]
    d = diagnose(Tally(tuple(healthy())), names, cfg.catalog())
    got = {v.detector: v for v in d.detectors}
    assert list(got) == names
    assert got["backpressure"].verdict == "blind"
    assert got["backpressure"].missing == (f"no {bp} naming its job",)
    # A count of rare lines can judge once lines of its jobs arrive: none expired is fine.
    assert got["expiries"].verdict == "ready"
    with_bp = [*healthy(), c("metric", job=True, tm=True, metric=bp, input="metrics")]
    d = diagnose(Tally(tuple(with_bp)), names, cfg.catalog())
    assert {v.detector: v.verdict for v in d.detectors}["backpressure"] == "ready"
    assert "BLIND" not in "\n".join(render_text(d))
