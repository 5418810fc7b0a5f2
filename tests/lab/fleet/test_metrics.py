"""Metrics: names and labels, heap and GC, throughput, checkpoint statistics."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from lab.fleet import FleetSpec, Incident, SimRecord, job_id, tm_id
from tests.lab.fleet.helpers import (
    COMPLETED,
    JOB_LABELS,
    LABEL_VALUE,
    START_MS,
    TASK_LABELS,
    TM_LABELS,
    by_job,
    floors,
    messages,
    points,
    run,
    samples,
)

# --- formats and labels -------------------------------------------------------------------


def test_canonical_metrics_carry_flink_names_and_filtered_labels(fleet) -> None:
    spec, records = fleet
    metrics = by_job(spec, records, "metric")
    names = set()
    for i in (0, 1, 3):
        for r in metrics[i]:
            m = json.loads(r.value)
            assert list(m) == ["name", "value", "timestamp", "labels"]
            assert m["timestamp"] == r.time_ms and isinstance(m["value"], int | float)
            labels = m["labels"]
            if m["name"].startswith("flink_taskmanager_job_task_"):
                assert set(labels) == TASK_LABELS
            elif m["name"].startswith("flink_taskmanager_"):
                assert set(labels) == TM_LABELS
            else:
                assert m["name"].startswith("flink_jobmanager_job_")
                assert set(labels) == JOB_LABELS
            assert all(LABEL_VALUE.match(v) for v in labels.values()), labels
            if "job_id" in labels:
                assert labels["job_id"] == job_id(spec, i)
            if "tm_id" in labels:
                assert r.key is not None
                assert labels["tm_id"] == re.sub(r"[-.]", "_", r.key.decode())
            names.add(m["name"])
    assert {
        "flink_taskmanager_Status_JVM_Memory_Heap_Used",
        "flink_taskmanager_Status_JVM_Memory_Heap_Max",
        "flink_taskmanager_job_task_numRecordsInPerSecond",
        "flink_taskmanager_job_task_numRecordsOutPerSecond",
        "flink_taskmanager_job_task_numRecordsIn",
        "flink_taskmanager_job_task_numRecordsOut",
        "flink_jobmanager_job_lastCheckpointDuration",
        "flink_jobmanager_job_lastCheckpointSize",
    } <= names


def test_telegraf_metrics_use_fields_tags_and_seconds(fleet) -> None:
    spec, records = fleet
    metrics = by_job(spec, records, "metric")[2]
    assert metrics
    for r in metrics:
        m = json.loads(r.value)
        assert set(m) == {"name", "fields", "tags", "timestamp"}
        assert m["timestamp"] == r.time_ms // 1000
        (value,) = m["fields"].values()
        assert isinstance(value, int | float)
        assert {"host", "url"} <= set(m["tags"]) and m["name"].startswith("flink_")
        assert all(LABEL_VALUE.match(v) for k, v in m["tags"].items() if k != "url")


# --- heap, GC and throughput --------------------------------------------------------------


def test_heap_used_is_a_gc_sawtooth_below_max(fleet) -> None:
    spec, records = fleet
    used = samples(spec, records, "flink_taskmanager_Status_JVM_Memory_Heap_Used")
    heap_max = samples(spec, records, "flink_taskmanager_Status_JVM_Memory_Heap_Max")
    assert len(used) == spec.jobs * spec.tms_per_job
    for series, values in used.items():
        ceiling = heap_max[series][0]
        assert all(0 < v < ceiling for v in values)
        assert any(b < 0.7 * a for a, b in zip(values, values[1:], strict=False)), series
        assert max(values) > 1.5 * min(values)


def test_busy_taskmanagers_keep_a_sawtooth_over_a_flat_floor() -> None:
    # The negative of idle_heap_leak: under load the heap swings, the floor does not climb.
    spec = FleetSpec(jobs=8)
    records = run(spec, 3600)
    used = points(records, "flink_taskmanager_Status_JVM_Memory_Heap_Used")
    heap_max = {
        k: v[0][1]
        for k, v in points(records, "flink_taskmanager_Status_JVM_Memory_Heap_Max").items()
    }
    assert len(used) == spec.jobs * spec.tms_per_job
    for series, values in used.items():
        for lo in range(START_MS + 60_000, START_MS + 3_300_000, 300_000):
            window = [v for t, v in values if lo <= t < lo + 300_000]
            # At least one collection (a drop of over 20%) in every 5-minute window.
            assert any(b < 0.8 * a for a, b in zip(window, window[1:], strict=False)), series
        f = floors(values, START_MS + 60_000, START_MS + 3_600_000)
        assert (max(f) - min(f)) / heap_max[series] < 0.08, (series, f)
        first, last = statistics.mean(f[:5]), statistics.mean(f[-5:])
        assert abs(last - first) / heap_max[series] < 0.03, (series, f)
    rates = points(records, "flink_taskmanager_job_task_numRecordsOutPerSecond")
    assert all(v > 0 for values in rates.values() for t, v in values if t > START_MS + 10_000)


def test_record_counters_add_up_the_rates(fleet) -> None:
    spec, records = fleet
    key = tm_id(spec, 0, 0).encode()
    rates = points(records, "flink_taskmanager_job_task_numRecordsOutPerSecond", key)
    counts = points(records, "flink_taskmanager_job_task_numRecordsOut", key)
    counts_in = points(records, "flink_taskmanager_job_task_numRecordsIn", key)
    assert set(rates) == set(counts) == set(counts_in) and len(counts) == 3
    for series, values in counts.items():
        assert [v for _, v in values] == sorted(v for _, v in values)
        # Each step is the rate times the reporting interval.
        for (t0, c0), (t1, c1), (_, rate) in zip(
            values[5:], values[6:], rates[series][6:], strict=False
        ):
            assert c1 - c0 == pytest.approx(rate * (t1 - t0) / 1000, rel=0.01, abs=2)
        assert values[-1][1] > 0
        if "task_name=Source:" in series or "|Source:" in series:
            assert {v for _, v in counts_in[series]} == {0}  # no network input
        else:
            assert counts_in[series][-1][1] > values[-1][1] * 0.9


def test_sources_show_no_network_input_and_downstream_tasks_do(fleet) -> None:
    spec, records = fleet
    rates = samples(spec, records, "flink_taskmanager_job_task_numRecordsInPerSecond")
    assert len(rates) == spec.jobs * spec.tms_per_job * 3
    for series, values in rates.items():
        if "task_name=Source:" in series:
            assert set(values) == {0.0}
        else:
            assert min(values) > 0


# --- checkpoint statistics ----------------------------------------------------------------


def test_last_checkpoint_metrics_read_minus_one_then_the_last_completion() -> None:
    spec = FleetSpec(jobs=1, metric_interval_s=2)
    records = run(spec, 300)
    completions = [
        (r.time_ms, int(m[2]), int(m[1]))
        for r, m in messages(
            [r for r in records if r.stream == "log"], r"\((\d+) bytes in (\d+) ms\)\.$"
        )
    ]
    seen = []
    for r in records:
        if r.stream == "metric" and b"lastCheckpoint" in r.value:
            m = json.loads(r.value)
            done = [c for c in completions if c[0] <= m["timestamp"]]
            duration, size = (done[-1][1], done[-1][2]) if done else (-1, -1)
            expected = duration if m["name"].endswith("Duration") else size
            assert m["value"] == expected, m
            seen.append(m["value"])
    assert -1 in seen and len(set(seen)) > 10


def test_checkpoint_expiry_freezes_last_checkpoint_duration(fleet) -> None:
    spec, records = fleet
    onset_ms = START_MS + 200_000
    job_metrics = [
        json.loads(r.value)
        for r in by_job(spec, records, "metric")[2]
        if b"flink_jobmanager_job_" in r.value
    ]

    def values(name: str, after_ms: int) -> list[int]:
        return [
            m["fields"]["gauge"]
            for m in job_metrics
            if m["name"] == name and m["timestamp"] * 1000 >= after_ms
        ]

    frozen = values("flink_jobmanager_job_lastCheckpointDuration", onset_ms + 15_000)
    assert len(frozen) > 20 and len(set(frozen)) == 1
    failed = values("flink_jobmanager_job_numberOfFailedCheckpoints", onset_ms)
    assert failed == sorted(failed) and failed[-1] >= 8


def test_checkpoint_creep_moves_the_last_checkpoint_metrics() -> None:
    spec = FleetSpec(jobs=1, metric_interval_s=5, incidents=(Incident("checkpoint_creep", 0, 60),))
    records = run(spec, 1800)
    logs = [r for r in records if r.stream == "log"]
    completions = [(r.time_ms, int(m[3]), int(m[2])) for r, m in messages(logs, COMPLETED)]
    durations = points(records, "flink_jobmanager_job_lastCheckpointDuration")["|"]
    sizes = points(records, "flink_jobmanager_job_lastCheckpointSize")["|"]
    for (t, duration), (_, size) in zip(durations, sizes, strict=True):
        done = [c for c in completions if c[0] <= t]
        assert (duration, size) == ((done[-1][1], done[-1][2]) if done else (-1, -1))
    assert durations[-1][1] > 8 * durations[len(durations) // 20][1]


# --- idle_heap_leak -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def leak() -> tuple[FleetSpec, list[SimRecord]]:
    """Job 0 (1.11, YARN) goes idle at 5 min and leaks at the default rate, for 45 minutes."""
    spec = FleetSpec(jobs=4, incidents=(Incident("idle_heap_leak", 0, 300.0),))
    return spec, run(spec, 2700)


def test_idle_heap_leak_raises_the_heap_floor_of_one_taskmanager(leak) -> None:
    spec, records = leak
    onset_ms = START_MS + 300_000
    used = points(records, "flink_taskmanager_Status_JVM_Memory_Heap_Used")
    leaking = used[f"{tm_id(spec, 0, 0)}|"]  # a YARN container id: no label filtering
    f = floors(leaking, onset_ms, START_MS + 2_700_000)
    rises = [b - a for a, b in zip(f, f[1:], strict=False)]
    # 600 MiB/h is 50 MiB per window; each window's floor is above the one before.
    assert all(10 * 2**20 < d < 90 * 2**20 for d in rises), [d / 2**20 for d in rises]
    assert f[-1] - f[0] == pytest.approx(len(rises) * 50 * 2**20, rel=0.2)
    # The GC sawtooth goes on on top of it.
    window = [v for t, v in leaking if t >= START_MS + 2_400_000]
    assert any(b < 0.9 * a for a, b in zip(window, window[1:], strict=False))
    # Its sibling idles too, but keeps a flat floor.
    sibling = used[f"{tm_id(spec, 0, 1)}|"]
    g = floors(sibling, onset_ms, START_MS + 2_700_000)
    assert (max(g) - min(g)) < 0.02 * max(g)


def test_idle_heap_leak_stops_all_throughput_of_the_job(leak) -> None:
    spec, records = leak
    onset_ms = START_MS + 300_000
    keys = {tm_id(spec, 0, k).encode() for k in range(spec.tms_per_job)}
    job_records = [r for r in records if r.key in keys]
    for name in ("numRecordsInPerSecond", "numRecordsOutPerSecond"):
        rates = points(job_records, f"flink_taskmanager_job_task_{name}")
        assert len(rates) == 3 * spec.tms_per_job
        for values in rates.values():
            assert {v for t, v in values if t >= onset_ms} == {0.0}
    busy_before = points(job_records, "flink_taskmanager_job_task_numRecordsOutPerSecond")
    assert all(any(v > 0 for t, v in vs if t < onset_ms) for vs in busy_before.values())
    for name in ("numRecordsIn", "numRecordsOut"):
        for values in points(job_records, f"flink_taskmanager_job_task_{name}").values():
            assert len({v for t, v in values if t >= onset_ms}) == 1  # counters stand still
    # Checkpoints still complete, quickly and tiny.
    logs = by_job(spec, records, "log")[0]
    after = [
        (int(m[2]), int(m[3]))
        for r, m in messages(logs, COMPLETED)
        if r.time_ms > onset_ms + 15_000
    ]
    assert len(after) > 100
    assert all(size < 100_000 for size, _ in after)
    assert not messages(logs, "expired before completing|PHYSICAL")  # not killed within 45 min
