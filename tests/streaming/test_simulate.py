"""The fleet simulator: determinism, layouts, wording per version, metrics, incidents."""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter, defaultdict
from datetime import UTC, datetime
from typing import get_args

import pytest

from detectors import AlertStatus, Event
from detectors.checkpoint_state_growth import CheckpointStateGrowth, CheckpointStateGrowthParams
from lab import fleet as sim
from lab.fleet import FleetSpec, Incident, SimRecord, generate, job_id, tm_id
from lab.fleet import producer as fleet_producer
from lab.fleet.job import _Job
from lab.fleet.metrics import _label
from tests.detectors.timeline import drive

START_MS = 1_717_000_000_000  # 2024-05-29 16:26:40 UTC

# FLINK_FORMATS.md §10, as published (both log4j generations) ...
DEFAULT_LAYOUT = re.compile(
    r"^(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3}) "
    r"(?P<level>TRACE|DEBUG|INFO |WARN |ERROR|FATAL) ?"
    r"(?P<logger>\S+)\s+(?:\[[^\]]*\] )?- (?P<msg>.*)$"
)
# ... and strictly: `%-5p %-60c %x - `, where log4j 2 renders the empty NDC as `[]`.
LOG4J2 = re.compile(r"^.{23} (?:INFO |WARN |ERROR) (?P<logger>\S+ *) \[\] - ")
LOG4J1 = re.compile(r"^.{23} (?:INFO |WARN |ERROR) (?P<logger>\S+ *)  - ")
# Lines after the first: stack frames, causes, exception headers.
CONTINUATION = re.compile(r"^(?:\tat |Caused by: |\t\.\.\. \d+ more$|[\w$]+(?:\.[\w$]+)+: )")
LABEL_VALUE = re.compile(r"^[a-zA-Z0-9:_]*$")
JOB_LABELS = {"host", "job_id", "job_name"}
TM_LABELS = {"host", "tm_id"}
TASK_LABELS = (
    TM_LABELS
    | JOB_LABELS
    | {
        "task_id",
        "task_name",
        "task_attempt_id",
        "task_attempt_num",
        "subtask_index",
    }
)


def run(spec: FleetSpec, duration_s: float = 300) -> list[SimRecord]:
    return list(generate(spec, START_MS, duration_s))


def job_of(spec: FleetSpec, rec: SimRecord) -> int:
    """Which job a record belongs to, from its Kafka key (job id or TaskManager id).

    Replacement TaskManagers and a job resubmitted under a new id count as their job's.
    """
    for i in range(spec.jobs):
        if rec.key in {job_id(spec, i).encode(), job_id(spec, i, 1).encode()}:
            return i
        if rec.key in {tm_id(spec, i, k).encode() for k in range(spec.tms_per_job + 16)}:
            return i
    raise AssertionError(f"record key {rec.key!r} names no job")


def by_job(spec: FleetSpec, records: list[SimRecord], stream: str) -> dict[int, list[SimRecord]]:
    out: dict[int, list[SimRecord]] = defaultdict(list)
    for r in records:
        if r.stream == stream:
            out[job_of(spec, r)].append(r)
    return out


def log4j_ms(ts: str) -> int:
    dt = datetime.strptime(ts, "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
    return round(dt.timestamp() * 1000)


def message(rec: SimRecord) -> str:
    """The log message (first line) of a record in any of the three layouts."""
    first = rec.value.decode().split("\n", 1)[0]
    if first.startswith('{"log"'):
        first = json.loads(rec.value)["log"].split("\n", 1)[0]
    elif first.startswith("{"):
        return json.loads(first)["message"]
    m = DEFAULT_LAYOUT.match(first)
    assert m, first
    return m["msg"]


def level(rec: SimRecord) -> str:
    first = rec.value.decode().split("\n", 1)[0]
    if first.startswith('{"log"'):
        first = json.loads(rec.value)["log"].split("\n", 1)[0]
    elif first.startswith("{"):
        return json.loads(first)["level"]
    m = DEFAULT_LAYOUT.match(first)
    assert m, first
    return m["level"].strip()


def messages(records: list[SimRecord], pattern: str) -> list[tuple[SimRecord, re.Match[str]]]:
    rx = re.compile(pattern)
    out = []
    for r in records:
        m = rx.search(message(r))
        if m:
            out.append((r, m))
    return out


@pytest.fixture(scope="module")
def fleet() -> tuple[FleetSpec, list[SimRecord]]:
    """Four jobs (every layout, versions 1.11/1.14/1.18/2.0), job 2 with expiring checkpoints."""
    spec = FleetSpec(jobs=4, incidents=(Incident("checkpoint_expiry", 2, 200.0),))
    return spec, run(spec, 900)


# --- determinism and order ----------------------------------------------------------------


def test_same_spec_and_start_give_the_same_bytes() -> None:
    spec = FleetSpec(jobs=4, incidents=(Incident("checkpoint_expiry", 1, 30.0),))
    assert run(spec, 120) == run(spec, 120)


def test_another_seed_gives_another_fleet() -> None:
    a, b = FleetSpec(seed=1), FleetSpec(seed=2)
    assert job_id(a, 0) != job_id(b, 0)
    assert [r.value for r in run(a, 60)] != [r.value for r in run(b, 60)]


def test_records_are_in_event_time_order_inside_the_window(fleet) -> None:
    _, records = fleet
    times = [r.time_ms for r in records]
    assert times == sorted(times)
    assert START_MS <= times[0] and times[-1] < START_MS + 900_000


def test_generation_is_lazy() -> None:
    # A day of a big fleet: only the first records are ever built.
    it = generate(FleetSpec(jobs=200), START_MS, 86_400)
    first = [next(it) for _ in range(100)]
    assert all(r.time_ms < START_MS + 60_000 for r in first)


# --- identities ----------------------------------------------------------------------------


def test_job_ids_are_distinct_32_hex() -> None:
    spec = FleetSpec(jobs=50)
    ids = [job_id(spec, i) for i in range(50)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == 50


def test_taskmanager_ids_are_yarn_containers_or_kubernetes_pods() -> None:
    spec = FleetSpec(jobs=4)
    assert re.fullmatch(r"container_e05_\d{13}_0040_01_000003", tm_id(spec, 0, 1))
    assert tm_id(spec, 2, 1) == "clickstream-sessionizer-2-taskmanager-1-2"
    assert sim.job_name(spec, 0) == "orders-enrichment-0"


# --- layouts ---------------------------------------------------------------------------


def assert_default_layout(value: str, time_ms: int, log4j2: bool) -> None:
    first, *rest = value.split("\n")
    m = DEFAULT_LAYOUT.match(first)
    assert m, first
    assert log4j_ms(m["ts"]) == time_ms  # UTC, and the same instant as the record's time
    strict = (LOG4J2 if log4j2 else LOG4J1).match(first)
    assert strict, first
    logger = strict["logger"]
    assert len(logger) == max(60, len(logger.rstrip())), f"logger not padded to 60: {first!r}"
    assert logger.startswith("org.apache.")
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


def test_jobs_start_with_their_tasks_switching_to_running(fleet) -> None:
    spec, records = fleet
    logs = by_job(spec, records, "log")
    for i, path in ((0, "DEPLOYING to RUNNING"), (2, "INITIALIZING to RUNNING")):
        job = messages(logs[i], r"switched from state CREATED to RUNNING\.$")
        assert len(job) == 1
        running = messages(
            logs[i], r"^(.+) \((\d)/2\) \(([0-9a-f_]+)\) switched from (\w+) to RUNNING\.$"
        )
        assert len(running) == 3 * spec.tms_per_job  # every subtask of the three vertices
        assert all(f"{m[4]} to RUNNING" == path for _, m in running)
        first_trigger = messages(logs[i], r"^Triggering checkpoint 1 ")[0][0]
        assert max(r.time_ms for r, _ in running) <= first_trigger.time_ms


def test_fleets_with_first_job_run_side_by_side() -> None:
    """Jobs 5-6 of a fleet that starts at 5 are jobs 5-6 of a bigger one: same ids, same records."""
    small = FleetSpec(jobs=2, first_job=5, incidents=(Incident("tm_memory_kill", 6, 60.0),))
    big = FleetSpec(jobs=7, incidents=(Incident("tm_memory_kill", 6, 60.0),))
    keys = {job_id(big, i).encode() for i in (5, 6)} | {
        tm_id(big, i, k).encode() for i in (5, 6) for k in range(2)
    }
    keys.add(tm_id(big, 6, 2).encode())  # job 6's replacement TaskManager
    records = run(small, 300)
    assert records == [r for r in run(big, 300) if r.key in keys]
    assert {r.key for r in records} == keys
    with pytest.raises(ValueError, match="not one of the fleet's jobs 5..6"):
        FleetSpec(jobs=2, first_job=5, incidents=(Incident("tm_heap_oom", 0, 1.0),))


# --- checkpoint wording per version -------------------------------------------------------

J = r"[0-9a-f]{32}"
WORDING = {
    "1.9": (
        rf"^Triggering checkpoint (\d+) @ (\d{{13}}) for job {J}\.$",
        rf"^Completed checkpoint (\d+) for job {J} \((\d+) bytes in (\d+) ms\)\.$",
    ),
    "1.11": (
        rf"^Triggering checkpoint (\d+) \(type=CHECKPOINT\) @ (\d{{13}}) for job {J}\.$",
        rf"^Completed checkpoint (\d+) for job {J} \((\d+) bytes in (\d+) ms\)\.$",
    ),
    "1.14": (
        rf"^Triggering checkpoint (\d+) \(type=CHECKPOINT\) @ (\d{{13}}) for job {J}\.$",
        rf"^Completed checkpoint (\d+) for job {J} \((\d+) bytes, checkpointDuration=(\d+) ms, "
        r"finalizationTime=\d+ ms\)\.$",
    ),
    "1.18": (
        r"^Triggering checkpoint (\d+) \(type=CheckpointType\{name='Checkpoint', "
        rf"sharingFilesStrategy=FORWARD_BACKWARD\}}\) @ (\d{{13}}) for job {J}\.$",
        rf"^Completed checkpoint (\d+) for job {J} \((\d+) bytes, checkpointDuration=(\d+) ms, "
        r"finalizationTime=\d+ ms\)\.$",
    ),
}
WORDING["2.0"] = WORDING["1.18"]


@pytest.mark.parametrize("version", sorted(WORDING))
def test_checkpoints_use_the_wording_of_the_jobs_version(version: str) -> None:
    spec = FleetSpec(jobs=1, flink_versions=(version,))
    logs = [r for r in run(spec, 300) if r.stream == "log"]
    trigger_rx, completed_rx = WORDING[version]
    triggers = messages(logs, r"^Triggering checkpoint")
    completed = messages(logs, r"^Completed checkpoint")
    assert len(triggers) >= 25 and len(completed) >= 25
    assert all(re.match(trigger_rx, m.string) for _, m in triggers), triggers[0][1].string
    assert all(re.match(completed_rx, m.string) for _, m in completed), completed[0][1].string
    for r, m in triggers:
        assert 0 <= r.time_ms - int(re.match(trigger_rx, m.string)[2]) < 10  # "@ <trigger ts>"
    ids = [int(re.match(completed_rx, m.string)[1]) for _, m in completed]
    assert ids == list(range(1, len(ids) + 1))


def test_healthy_checkpoints_jitter_and_never_expire() -> None:
    spec = FleetSpec(jobs=4, checkpoint_interval_s=5, checkpoint_timeout_s=10)
    logs = by_job(spec, run(spec, 1800), "log")
    for i in range(4):
        durations = [
            int(m[1]) for _, m in messages(logs[i], r"(?:bytes in |checkpointDuration=)(\d+) ms")
        ]
        assert len(set(durations)) > len(durations) // 2  # jittery, not constant
        assert max(durations) < 10_000
        assert not messages(logs[i], "expired before completing")


def test_healthy_checkpoint_sizes_hold_their_level_for_an_hour() -> None:
    """A healthy job's state wobbles around a level; it neither wanders nor looks like growth.

    A bounded random walk wanders 20 % from its start within the hour on most jobs, and on
    one job in 500 climbs fast enough to page
    checkpoint_state_growth at the bench's 5-minute window.
    """
    spec = FleetSpec(jobs=40)
    completed = re.compile(r"Completed checkpoint (\d+) for job (\w+) \((\d+) bytes")
    events: dict[str, list[Event]] = defaultdict(list)
    for r in generate(spec, START_MS, 3600):
        if r.stream == "log" and (m := completed.search(message(r))):
            events[m[2]].append(
                Event(
                    kind="checkpoint_completed",
                    time_ms=r.time_ms,
                    job_id=m[2],
                    checkpoint_id=int(m[1]),
                    size_bytes=int(m[3]),
                    duration_ms=500,
                )
            )
    assert len(events) == 40
    det = CheckpointStateGrowth(CheckpointStateGrowthParams(window_s=300))
    for job, evs in events.items():
        sizes = [e.size_bytes or 0 for e in evs]
        assert len(sizes) > 300
        assert 0.85 < min(sizes) / sizes[0] and max(sizes) / sizes[0] < 1.15, job
        _, alerts = drive(det, evs)
        assert not [a for a in alerts if a.status == AlertStatus.FIRING], job


def test_completed_checkpoints_are_followed_by_real_chatter(fleet) -> None:
    spec, records = fleet
    logs = by_job(spec, records, "log")
    # 1.11: the legacy transactional Kafka sink commits on every completed checkpoint.
    commits = messages(
        logs[0],
        r"^FlinkKafkaProducer (\d)/2 - checkpoint (\d+) complete, committing transaction "
        r"TransactionHolder\{handle=KafkaTransactionState \[transactionalId=.+, producerId=\d+, "
        r"epoch=\d+\], transactionStartTime=\d{13}\} from checkpoint \2$",
    )
    assert len(commits) >= 2 * 80
    # 1.18: both Kafka sources' coordinators mark each completed checkpoint.
    completed = {m[1] for _, m in messages(logs[2], r"^Completed checkpoint (\d+)")}
    marked = messages(logs[2], r"^Marking checkpoint (\d+) as completed for source Source: kafka-")
    assert {m[1] for _, m in marked} == completed
    assert len(marked) == 2 * len(completed)


# --- metrics ---------------------------------------------------------------------------


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


def samples(spec: FleetSpec, records: list[SimRecord], name: str) -> dict[str, list[float]]:
    """Values of one metric per series (its label values joined), in time order."""
    out: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.stream != "metric":
            continue
        m = json.loads(r.value)
        if m["name"] == name:
            labels = m.get("labels") or m["tags"]
            value = m["value"] if "value" in m else next(iter(m["fields"].values()))
            out["|".join(f"{k}={v}" for k, v in sorted(labels.items()))].append(value)
    return out


def points(
    records: list[SimRecord], name: str, key: bytes | None = None
) -> dict[str, list[tuple[int, float]]]:
    """(time ms, value) of one metric per series, keyed by tm_id (or task too), in time order."""
    out: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for r in records:
        if r.stream != "metric" or (key is not None and r.key != key):
            continue
        m = json.loads(r.value)
        if m["name"] != name:
            continue
        labels = m.get("labels") or m["tags"]
        value = m["value"] if "value" in m else next(iter(m["fields"].values()))
        series = labels.get("tm_id", "") + "|" + labels.get("task_name", "")
        out[series].append((r.time_ms, value))
    return out


def floors(series: list[tuple[int, float]], from_ms: int, to_ms: int) -> list[float]:
    """The lowest heap sample of each whole 5-minute window in [from_ms, to_ms)."""
    out = []
    for lo in range(from_ms, to_ms - 300_000 + 1, 300_000):
        window = [v for t, v in series if lo <= t < lo + 300_000]
        assert window, f"no sample in the window at {lo}"
        out.append(min(window))
    return out


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


# --- checkpoint_expiry -------------------------------------------------------------------


@pytest.mark.parametrize("job", [0, 2], ids=["1.11", "1.18"])
def test_checkpoint_expiry_expires_checkpoints_from_the_onset_only(job: int) -> None:
    onset_s = 200.0
    spec = FleetSpec(jobs=4, incidents=(Incident("checkpoint_expiry", job, onset_s),))
    records = run(spec, 900)
    logs = by_job(spec, records, "log")
    onset_ms = START_MS + onset_s * 1000
    jid = job_id(spec, job)

    expired = messages(logs[job], rf"^Checkpoint (\d+) of job {jid} expired before completing\.$")
    assert len(expired) >= 8
    assert all(r.time_ms >= onset_ms for r, _ in expired)
    assert all(r.time_ms < onset_ms for r, _ in messages(logs[job], r"^Completed checkpoint"))
    for other in set(range(spec.jobs)) - {job}:
        assert not messages(logs[other], "expired before completing")

    # Each expiry comes checkpoint_timeout_s after its trigger, and triggering goes on.
    triggers = {
        int(m[1]): r.time_ms for r, m in messages(logs[job], r"^Triggering checkpoint (\d+) ")
    }
    for r, m in expired:
        assert r.time_ms - triggers[int(m[1])] == spec.checkpoint_timeout_s * 1000
    assert max(triggers) > max(int(m[1]) for _, m in expired)


@pytest.mark.parametrize("job", [0, 2], ids=["1.11", "1.18"])
def test_checkpoint_expiry_brings_late_acks_from_one_taskmanager(job: int) -> None:
    spec = FleetSpec(jobs=4, incidents=(Incident("checkpoint_expiry", job, 60.0),))
    logs = by_job(spec, run(spec, 900), "log")[job]
    expired_at = {int(m[1]): r.time_ms for r, m in messages(logs, r"^Checkpoint (\d+) of job")}
    late = messages(
        logs,
        r"^Received late message for now expired checkpoint attempt (\d+) from task ([0-9a-f_]+) "
        rf"of job {job_id(spec, job)} at (\S+) @ (\S+) \(dataPort=\d+\)\.$",
    )
    per_checkpoint: dict[int, int] = defaultdict(int)
    for r, m in late:
        n = int(m[1])
        assert 0 < r.time_ms - expired_at[n] <= 10_000  # within seconds of the expiry
        per_checkpoint[n] += 1
    end_ms = START_MS + 900_000
    assert {n for n, t in expired_at.items() if t + 10_000 < end_ms} <= set(per_checkpoint)
    assert all(1 <= k <= 3 for k in per_checkpoint.values())
    # Concentrated on one TaskManager of this job (seed 002's skew).
    assert len({m[3] for _, m in late}) == 1
    assert {m[3] for _, m in late} < {tm_id(spec, job, k) for k in range(spec.tms_per_job)}
    assert all(level(r) == "WARN" for r, _ in late)


def test_checkpoint_expiry_on_115_and_later_adds_the_failure_manager_warning(fleet) -> None:
    spec, records = fleet
    logs = by_job(spec, records, "log")[2]
    expired = [int(m[1]) for _, m in messages(logs, r"^Checkpoint (\d+) of job")]
    warns = [
        r
        for r in logs
        if "CheckpointFailureManager [] - Failed to trigger or complete checkpoint"
        in r.value.decode()
    ]
    assert len(warns) == len(expired)
    for k, (r, n) in enumerate(zip(warns, expired, strict=True)):
        first, cause, frame, *_ = r.value.decode().split("\n")
        assert first.endswith(
            f"Failed to trigger or complete checkpoint {n} for job {job_id(spec, 2)}. "
            f"({k} consecutive failed attempts so far)"
        )
        assert cause == (
            "org.apache.flink.runtime.checkpoint.CheckpointException: "
            "Checkpoint expired before completing."
        )
        assert frame.startswith("\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator")
        assert "$CheckpointCanceller.run(CheckpointCoordinator.java:" in frame


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


# --- every incident ----------------------------------------------------------------------


def test_incident_kinds_are_the_literal_ones() -> None:
    assert (
        set(get_args(sim.IncidentKind))
        == sim.INCIDENT_KINDS
        == {
            "checkpoint_expiry",
            "checkpoint_creep",
            "idle_heap_leak",
            "late_acks_skew",
            "checkpoint_declines",
            "state_growth",
            "tm_memory_kill",
            "tm_heap_oom",
            "tm_direct_oom",
            "tm_metaspace_oom",
            "k8s_watch_crash",
            "k8s_watch_crash_no_ha",
            "restart_storm",
        }
    )


# Versions where job 3 (Kubernetes, envelope) runs 1.11, so that the watch crash applies.
K8S_111 = ("1.11", "1.14", "1.18", "1.11")


def sick_spec(kind: str, onset_s: float = 200.0, **kwargs: object) -> tuple[FleetSpec, int]:
    """A four-job fleet with ``kind`` on a job it applies to (the watch crash: job 3, 1.11)."""
    job = 3 if kind.startswith("k8s_watch_crash") else 1
    versions = K8S_111 if kind.startswith("k8s_watch_crash") else FleetSpec().flink_versions
    spec = FleetSpec(
        jobs=4,
        flink_versions=versions,
        incidents=(Incident(kind, job, onset_s),),  # type: ignore[arg-type]
        **kwargs,  # type: ignore[arg-type]
    )
    return spec, job


@pytest.mark.parametrize("kind", sorted(sim.INCIDENT_KINDS))
def test_incidents_leave_everything_before_their_onset_untouched(kind: str) -> None:
    """Deterministic, in order, only the sick job changes, only after the onset, in its layout."""
    spec, job = sick_spec(kind, state_growth_fill_s=300)
    healthy = run(FleetSpec(jobs=4, flink_versions=spec.flink_versions), 600)
    sick = run(spec, 600)
    assert sick == run(spec, 600)
    assert [r.time_ms for r in sick] == sorted(r.time_ms for r in sick)
    onset_ms = START_MS + 200_000
    assert [r for r in sick if r.time_ms < onset_ms] == [r for r in healthy if r.time_ms < onset_ms]
    assert [r for r in sick if r.time_ms >= onset_ms] != [
        r for r in healthy if r.time_ms >= onset_ms
    ]
    # Other jobs are not affected at all.
    others = {job_id(spec, i).encode() for i in range(4) if i != job} | {
        tm_id(spec, i, k).encode() for i in range(4) if i != job for k in range(spec.tms_per_job)
    }
    assert [r for r in sick if r.key in others] == [r for r in healthy if r.key in others]
    # What the incident logs is in the job's layout, with the record's own time.
    layout = ("default", "json", "default", "envelope")[job % 4]
    for r in by_job(spec, sick, "log")[job]:
        text = r.value.decode()
        if layout == "json":
            first = text.split("\n", 1)[0]
            assert log4j_ms(json.loads(first)["timestamp"]) == r.time_ms
            continue
        if layout == "envelope":
            text = json.loads(text)["log"]
        first = text.split("\n", 1)[0]
        m = DEFAULT_LAYOUT.match(first)
        assert m and log4j_ms(m["ts"]) == r.time_ms, first
        assert LOG4J2.match(first), first  # these fleets run 1.11 and later


def test_a_job_takes_one_incident_that_fails_it_over() -> None:
    with pytest.raises(ValueError, match="more than one incident that fails it over"):
        FleetSpec(
            jobs=2, incidents=(Incident("tm_heap_oom", 1, 10.0), Incident("restart_storm", 1, 90.0))
        )
    # Checkpoint incidents combine with one that fails the job over.
    FleetSpec(
        jobs=2,
        incidents=(Incident("checkpoint_declines", 1, 10.0), Incident("restart_storm", 1, 90.0)),
    )


# --- checkpoint_creep ------------------------------------------------------------------------

COMPLETED = (
    r"^Completed checkpoint (\d+) for job \w+ \((\d+) bytes(?: in |, checkpointDuration=)(\d+) ms"
)


@pytest.mark.parametrize("job", [0, 2], ids=["1.11", "1.18"])
def test_checkpoint_creep_grows_durations_and_sizes_until_checkpoints_expire(job: int) -> None:
    onset_s = 300.0
    spec = FleetSpec(jobs=4, incidents=(Incident("checkpoint_creep", job, onset_s),))
    logs = by_job(spec, run(spec, 3600), "log")[job]
    onset_ms = START_MS + onset_s * 1000
    triggers = {int(m[1]): r.time_ms for r, m in messages(logs, r"^Triggering checkpoint (\d+) ")}
    completed = [(triggers[int(m[1])], int(m[2]), int(m[3])) for _, m in messages(logs, COMPLETED)]
    before = [c for c in completed if c[0] < onset_ms]
    after = [c for c in completed if c[0] >= onset_ms]
    assert len(before) >= 20 and len(after) >= 40
    # Durations climb steadily from the job's usual ones (jitter aside): medians of
    # consecutive quarters of the post-onset checkpoints rise, by an order of magnitude.
    q = len(after) // 4
    medians = [statistics.median(d for _, _, d in after[i * q : (i + 1) * q]) for i in range(4)]
    assert medians == sorted(medians), medians
    usual = statistics.median(d for _, _, d in before)
    assert medians[0] < 3 * usual and medians[-1] > 8 * usual
    assert after[-1][1] > 2 * max(size for _, size, _ in before)  # the state grows too
    assert all(d < spec.checkpoint_timeout_s * 1000 for _, _, d in after)

    # It ends in expiries, each one timeout after its trigger: first the unlucky ones (the
    # jitter is +-25%), then all of them.
    expired = messages(logs, r"^Checkpoint (\d+) of job \w+ expired before completing\.$")
    assert len(expired) >= 10
    assert expired[0][0].time_ms > onset_ms + 600_000  # a creep, not a cliff
    for r, m in expired:
        assert r.time_ms - triggers[int(m[1])] == spec.checkpoint_timeout_s * 1000
    last_ten = sorted(triggers)[-11:-1]  # the last one may still be running at the end
    assert {int(m[1]) for _, m in expired} >= set(last_ten)
    # Late acks come from the stateful (co-process) tasks of every TaskManager, not one.
    stateful = {
        m[1] for _, m in messages(logs, r"^KeyedCoProcess .* \(\d/2\) \((\S+)\) switched from")
    }
    late = messages(logs, r"^Received late message .* from task (\S+) of job \w+ at (\S+) @")
    assert late and {m[1] for _, m in late} == stateful
    assert {m[2] for _, m in late} == {tm_id(spec, job, k) for k in range(spec.tms_per_job)}


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


# --- idle_heap_leak -------------------------------------------------------------------------


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


LEAK_FAST = 20_000.0  # MiB/h: the heap fills in minutes


def full(rec: SimRecord) -> str:
    """The whole log message of a record (first line and the lines after), in any layout."""
    text = rec.value.decode()
    if text.startswith('{"log"'):
        text = json.loads(text)["log"]
    elif text.startswith("{"):
        first, _, rest = text.partition("\n")
        return json.loads(first)["message"] + ("\n" + rest if rest else "")
    first, _, rest = text.partition("\n")
    m = DEFAULT_LAYOUT.match(first)
    assert m, first
    return m["msg"] + ("\n" + rest if rest else "")


JOB_STATE = r"^Job \S+ \((\w+)\) switched from state (\w+) to (\w+)\.$"
RESTORED = (
    r"^Restoring job (\w+) from (?:latest valid checkpoint: )?Checkpoint (\d+) @ (\d+) for (\w+)"
    r"(?: located at \S+/chk-(\d+))?\.$"
)
TASK_STATE = r"^(.+) \((\d)/(\d)\) \(([0-9a-f_]+)\) switched from (\w+) to (\w+)"


def restart_after(logs: list[SimRecord], failed_ms: int) -> tuple[int, int]:
    """(restarted at, every task RUNNING again at) for the failover at ``failed_ms``.

    1.10+ go RUNNING -> RESTARTING -> RUNNING; the legacy scheduler RUNNING -> FAILING ->
    RESTARTING -> CREATED -> RUNNING.
    """
    states = [(r.time_ms, m[2], m[3]) for r, m in messages(logs, JOB_STATE)]
    restarting = [t for t, a, b in states if b == "RESTARTING" and t >= failed_ms]
    running = [t for t, a, b in states if b == "RUNNING" and t > failed_ms]
    assert restarting and running, states
    assert restarting[0] - failed_ms < 100
    back = running[0]
    redeployed = [
        r.time_ms for r, m in messages(logs, TASK_STATE) if m[6] == "RUNNING" and r.time_ms > back
    ]
    return back, max(redeployed[:6])


@pytest.mark.parametrize(
    "job", [0, 1, 2, 3], ids=["1.11-yarn", "1.14-yarn-json", "1.18-k8s", "2.0-k8s-envelope"]
)
def test_idle_heap_leak_ends_with_the_container_killed_and_the_job_restarted(job: int) -> None:
    spec = FleetSpec(
        jobs=4,
        heap_leak_mb_per_h=LEAK_FAST,
        incidents=(Incident("idle_heap_leak", job, 60.0),),
    )
    records = run(spec, 1800)
    tm = tm_id(spec, job, 0)
    heap = points(records, "flink_taskmanager_Status_JVM_Memory_Heap_Used", tm.encode())
    (leaking,) = heap.values()
    heap_max = points(records, "flink_taskmanager_Status_JVM_Memory_Heap_Max", tm.encode())
    (maximum,) = {v for vs in heap_max.values() for _, v in vs}
    last_ms = leaking[-1][0]
    assert leaking[-1][1] > 0.97 * maximum  # full when it died
    assert last_ms < START_MS + 1_000_000  # ... and it fell silent
    gone_ms = last_ms + spec.metric_interval_s * 1000
    assert not [r for r in records if r.key == tm.encode() and r.time_ms > gone_ms]

    logs = by_job(spec, records, "log")[job]
    kills = [
        r
        for r in logs
        if r.key == job_id(spec, job).encode()
        and ("beyond the 'PHYSICAL' memory limit" in r.value.decode() or "OOMKilled" in full(r))
    ]
    kill = kills[0]
    text = full(kill)
    assert tm in text and 0 < kill.time_ms - last_ms < spec.metric_interval_s * 1000 + 5_000
    if job >= 2:  # Kubernetes: the watch reports the OOM-killed pod
        assert text == (
            f"Worker {tm} is terminated. Diagnostics: Pod terminated, container termination "
            "statuses: [flink-main-container(exitCode=137, reason=OOMKilled, message=null)], "
            "pod status: Failed(reason=null, message=null)"
        )
    else:
        assert re.search(
            rf"Container \[pid=\d+,containerID={tm}\] is running \d+B beyond the 'PHYSICAL' memory "
            r"limit\. Current usage: \d\.0 GB of \d GB physical memory used; [\d.]+ GB of [\d.]+ GB "
            r"virtual memory used\. Killing container\.\n",
            text,
        )
        assert re.search(r"\n\[[\d :.-]+\]Container killed on request\. Exit code is 143\n", text)
        if job == 0:  # 1.11: YarnResourceManager passes the raw diagnostics on
            assert text.startswith(f"Closing TaskExecutor connection {tm} because: [20")
        else:
            assert text.startswith(
                f"Worker {tm} is terminated. Diagnostics: Container {tm} marked as failed.\n"
                " Exit code:-104.\n Diagnostics:["
            )
        # YARN stops a container with SIGTERM first; the TaskManager's handler logs it.
        (sigterm,) = [r for r in logs if r.key == tm.encode() and b"SIGTERM" in r.value]
        assert 0 <= sigterm.time_ms - last_ms < spec.metric_interval_s * 1000
        assert message(sigterm) == "RECEIVED SIGNAL 15: SIGTERM. Shutting down as requested."

    # The JobMaster's heartbeat times out heartbeat.timeout after the last heartbeat and
    # fails the TaskManager's three subtasks (the timeout itself is logged from 1.14).
    failed = [(r, m) for r, m in messages(logs, TASK_STATE) if m[6] == "FAILED" and tm in full(r)]
    assert len(failed) == 3
    failed_at = failed[0][0].time_ms
    assert 35_000 < failed_at - kill.time_ms < 51_000
    assert all(
        f"TimeoutException: Heartbeat of TaskManager with id {tm}" in full(r) for r, _ in failed
    )
    timeouts = messages(logs, rf"^Heartbeat of TaskManager with id {re.escape(tm)}\S* timed out\.$")
    assert len(timeouts) == (0 if job == 0 else 1)

    # The job fails over and comes back: restored from its latest completed checkpoint, its
    # tasks redeployed (new attempt ids) with TaskManager 0's slot on a new TaskManager.
    back, running = restart_after(logs, failed_at)
    assert 9_900 <= back - failed_at < 11_000
    completed = [(r.time_ms, int(m[1])) for r, m in messages(logs, COMPLETED)]
    before = [n for t, n in completed if t < kill.time_ms]
    (restore,) = [(r, m) for r, m in messages(logs, RESTORED) if back <= r.time_ms < back + 100]
    assert int(restore[1][2]) == before[-1]
    old_attempts = {m[4] for _, m in failed}
    new_attempts = {
        m[4] for r, m in messages(logs, TASK_STATE) if m[6] == "RUNNING" and back < r.time_ms
    }
    assert len(new_attempts) >= 6 and not new_attempts & old_attempts
    after = [n for t, n in completed if t > running]
    assert after and after[0] > before[-1]  # ids go on from the restored one

    replacement = tm_id(spec, job, spec.tms_per_job)
    new_heap = points(
        records, "flink_taskmanager_Status_JVM_Memory_Heap_Used", replacement.encode()
    )
    (samples_new,) = new_heap.values()
    assert kill.time_ms < samples_new[0][0] < running
    # Still idle, so the new one leaks too: its floor rises from a fresh heap.
    assert samples_new[0][1] < 0.9 * maximum
    rates = points(
        records, "flink_taskmanager_job_task_numRecordsInPerSecond", replacement.encode()
    )
    assert rates and {v for vs in rates.values() for t, v in vs} == {0.0}
    # The sibling TaskManager lives on throughout.
    sibling = tm_id(spec, job, 1).encode()
    assert max(r.time_ms for r in records if r.key == sibling) > START_MS + 1_780_000


# --- failovers: tm_memory_kill and the restart every failover ends in ------------------------


@pytest.mark.parametrize(
    ("job", "version"), [(0, "1.11"), (1, "1.14"), (2, "1.18"), (3, "2.0")], ids=str
)
def test_a_lost_taskmanager_fails_the_job_over_and_it_restarts_from_its_checkpoint(
    job: int, version: str
) -> None:
    spec = FleetSpec(jobs=4, incidents=(Incident("tm_memory_kill", job, 300.0),))
    records = run(spec, 900)
    logs = by_job(spec, records, "log")[job]
    onset_ms = START_MS + 300_000
    tm, new_tm = tm_id(spec, job, 0), tm_id(spec, job, 2)
    failed = [(r, m) for r, m in messages(logs, TASK_STATE) if m[6] == "FAILED"]
    assert len(failed) == 3 and {m[2] for _, m in failed} == {"1"}  # subtask 1 of 3 vertices
    failed_at = failed[0][0].time_ms
    assert 40_000 <= failed_at - onset_ms < 51_000
    vertex = next(k for k in _Job(spec, job, START_MS, START_MS).tasks if k.subtask == 0)
    first_attempt = failed[0][1][4]
    # Region failover: every task restarts (the keyed exchanges make the graph one region).
    if version in ("1.11", "1.14"):
        region = messages(logs, r"^(Calculating tasks|6 tasks should be restarted) .*")
        assert [m.string for _, m in region] == [
            f"Calculating tasks to restart to recover the failed task {vertex.vertex_id}_0.",
            f"6 tasks should be restarted to recover the failed task {vertex.vertex_id}_0. ",
        ]
    else:
        (line,) = messages(logs, r"^6 tasks will be restarted to recover the failed task (\S+)\.$")
        assert line[1][1] == first_attempt and first_attempt.endswith("_0_0")
        assert b"org.apache.flink.runtime.jobmaster.JobMaster" in line[0].value
    cancelled = [
        m for _, m in messages(logs, TASK_STATE) if (m[5], m[6]) == ("RUNNING", "CANCELING")
    ]
    assert len(cancelled) == 3 and {m[2] for m in cancelled} == {"2"}
    back, running = restart_after(logs, failed_at)
    (restore,) = [m for r, m in messages(logs, RESTORED) if r.time_ms >= back]
    last_done = max(int(m[1]) for r, m in messages(logs, COMPLETED) if r.time_ms < onset_ms)
    assert int(restore[2]) == last_done and restore[1] == restore[4] == job_id(spec, job)
    if version == "1.11":
        assert restore.string.startswith(f"Restoring job {job_id(spec, job)} from latest valid")
    else:
        assert int(restore[5]) == last_done
    redeployed = [m for r, m in messages(logs, TASK_STATE) if r.time_ms > back]
    assert {m[6] for m in redeployed} >= {"SCHEDULED", "DEPLOYING", "RUNNING"}
    if version in ("1.18", "2.0"):  # attempt number 1 of the same execution vertex
        assert {m[4][-2:] for m in redeployed} == {"_1"}
    # Checkpointing resumes once every task runs; the new TaskManager reports metrics, the
    # lost one stopped at the kill.
    resumed = [int(m[1]) for r, m in messages(logs, COMPLETED) if r.time_ms > running]
    assert resumed and resumed[0] > last_done
    used = points(records, "flink_taskmanager_Status_JVM_Memory_Heap_Used")
    assert max(t for t, _ in used[f"{_label(tm)}|"]) < onset_ms
    assert min(t for t, _ in used[f"{_label(new_tm)}|"]) > onset_ms
    attempts = {
        json.loads(r.value).get("labels", json.loads(r.value).get("tags"))["task_attempt_num"]
        for r in records
        if r.key == new_tm.encode() and b'numRecordsOut"' in r.value
    }
    assert attempts == {"1"}
    failed_count = points(
        records, "flink_jobmanager_job_numberOfFailedCheckpoints", job_id(spec, job).encode()
    )
    (counts,) = failed_count.values()
    assert counts[-1][1] == 1  # the checkpoint in flight when it died


# --- state_growth --------------------------------------------------------------------------


@pytest.mark.parametrize("job", [0, 1], ids=["1.11", "1.14-json"])
def test_state_growth_fills_the_heap_until_gc_overhead_kills_a_taskmanager(job: int) -> None:
    spec = FleetSpec(
        jobs=4,
        checkpoint_timeout_s=120,
        state_growth_fill_s=1200,
        incidents=(Incident("state_growth", job, 300.0),),
    )
    records = run(spec, 2400)
    logs = by_job(spec, records, "log")[job]
    onset_ms, thrash_ms = START_MS + 300_000, START_MS + 1_500_000
    done = [(r.time_ms, int(m[2]), int(m[3])) for r, m in messages(logs, COMPLETED)]
    before = [c for c in done if c[0] < onset_ms]
    growing = [c for c in done if onset_ms + 30_000 < c[0] < thrash_ms]
    base = statistics.median(size for _, size, _ in before)
    # Linear growth: the same slope (bytes per second) in both halves, to many times the usual.
    mid = (onset_ms + thrash_ms) // 2

    def slope(cs: list[tuple[int, int, int]]) -> float:
        return statistics.linear_regression([c[0] for c in cs], [c[1] for c in cs]).slope

    ratio = slope([c for c in growing if c[0] >= mid]) / slope([c for c in growing if c[0] < mid])
    assert 0.7 < ratio < 1.4 and growing[-1][1] > 4 * base
    q = len(growing) // 4
    assert statistics.median(d for *_, d in growing[-q:]) > 3 * statistics.median(
        d for *_, d in before
    )
    # The fullest TaskManager's live set nears its maximum and GC takes ever longer.
    victim = (
        tm_id(spec, job, 0)
        if f"{tm_id(spec, job, 0)}"
        in full(next(r for r in logs if b"heartbeat of TaskManager" in r.value))
        else tm_id(spec, job, 1)
    )
    used = points(records, "flink_taskmanager_Status_JVM_Memory_Heap_Used")[f"{victim}|"]
    (heap_max,) = {
        v for _, v in points(records, "flink_taskmanager_Status_JVM_Memory_Heap_Max")[f"{victim}|"]
    }
    f = floors(used, onset_ms, thrash_ms)
    assert all(b > 0.98 * a for a, b in zip(f, f[1:], strict=False)), f
    assert f[-1] > 0.7 * heap_max > 2 * f[0]
    gc = points(records, "flink_taskmanager_Status_JVM_GarbageCollector_G1_Young_Generation_Time")
    gc_time = gc[f"{victim}|"]
    early = [v for t, v in gc_time if onset_ms <= t < onset_ms + 300_000]
    late = [v for t, v in gc_time if thrash_ms - 300_000 <= t < thrash_ms]
    assert late[-1] - late[0] > 5 * (early[-1] - early[0])
    assert max(t for t, _ in used) < thrash_ms  # it stops answering when it thrashes

    # Seed 000's order: the ResourceManager's heartbeat times out (before 1.14 its
    # exception, with two spaces, is what fails the tasks), the job fails over, and only
    # then does the TaskManager log its OutOfMemoryError and exit.
    (hb,) = messages(logs, r"^The heartbeat of TaskManager with id (\S+) timed out\.$")
    assert hb[1][1].startswith(victim) and 50_000 <= hb[0].time_ms - thrash_ms < 53_100
    failed = [(r, m) for r, m in messages(logs, TASK_STATE) if m[6] == "FAILED"]
    sep = "  " if job == 0 else " "
    head = "The heartbeat" if job == 0 else "Heartbeat"
    assert all(
        f"java.util.concurrent.TimeoutException: {head} of TaskManager with id {hb[1][1]}{sep}timed out."
        in full(r)
        for r, _ in failed
    )
    (fatal,) = [r for r in logs if b"FATAL: Thread" in r.value]
    assert fatal.key == victim.encode() and fatal.time_ms > failed[-1][0].time_ms
    first, cause = full(fatal).split("\n")[:2]
    assert re.fullmatch(
        r"FATAL: Thread 'flink-akka\.actor\.default-dispatcher-\d+' produced an uncaught "
        r"exception\. Stopping the process\.\.\.",
        first,
    )
    assert cause == "java.lang.OutOfMemoryError: GC overhead limit exceeded"
    logger = (
        "org.apache.flink.runtime.util.FatalExitExceptionHandler"
        if job == 0
        else "FatalExitExceptionHandler.java"
    )
    assert logger.encode() in fatal.value and level(fatal) == "ERROR"
    # Restored, the state shrinks back to its usual size.
    back, running = restart_after(logs, failed[0][0].time_ms)
    after = [s for t, s, _ in done if t > running]
    assert after[0] < growing[-1][1] and after[-1] < 1.2 * base


# --- checkpoint_declines -----------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.9", "1.11", "1.14", "1.18"])
def test_checkpoint_declines_use_the_versions_wording(version: str) -> None:
    spec = FleetSpec(
        jobs=3,
        flink_versions=(version,),
        incidents=(
            Incident("checkpoint_declines", 0, 120.0),
            Incident("checkpoint_declines", 2, 120.0),
        ),
    )
    records = run(spec, 600)
    for job in (0, 2):  # 0 on YARN (HDFS quota), 2 on Kubernetes (S3)
        logs = by_job(spec, records, "log")[job]
        jid = job_id(spec, job)
        triggers = {
            int(m[1]): r.time_ms for r, m in messages(logs, r"^Triggering checkpoint (\d+) ")
        }
        declines = messages(
            logs,
            rf"^Decline checkpoint (\d+) by task ([0-9a-f_]+) of job {jid}"
            r"(?: at (\S+) @ \S+ \(dataPort=\d+\))?\.$",
        )
        assert len(declines) >= 40
        onset_ms = START_MS + 120_000
        assert all(r.time_ms >= onset_ms for r, _ in declines)
        assert not [r for r, _ in messages(logs, COMPLETED) if r.time_ms > onset_ms + 10_000]
        for r, m in declines:
            assert 0 < r.time_ms - triggers[int(m[1])] < spec.checkpoint_timeout_s * 1000
            assert m[3] in {tm_id(spec, job, k) for k in range(2)}  # 1.9+ name the location
        texts = [full(r) for r, _ in declines]
        reason = (
            "DiskSpace quota of /flink/checkpoints is exceeded" if job == 0 else "Access Denied"
        )
        if version in ("1.9", "1.11"):
            assert all("\n" not in t for t in texts)  # the cause comes with the decline from 1.12
        else:
            for n, t in zip((int(m[1]) for _, m in declines), texts, strict=True):
                lines = t.split("\n")
                assert lines[1].startswith(
                    f"org.apache.flink.util.SerializedThrowable: Could not materialize checkpoint {n} "
                    "for operator KeyedCoProcess"
                )
                assert any(
                    line.startswith("Caused by: org.apache.flink.util.SerializedThrowable: ")
                    and reason in line
                    for line in lines
                )
        discards = messages(logs, rf"^Discarding checkpoint (\d+) of job {jid}\.$")
        warns = messages(logs, r"^Failed to trigger or complete checkpoint (\d+) for job")
        if version == "1.9":
            assert [m[1] for _, m in discards] == [m[1] for _, m in declines]
            assert "CheckpointException: Checkpoint was declined." in full(discards[0][0])
        else:
            assert not discards
        if version == "1.18":
            assert [m[1] for _, m in warns] == [m[1] for _, m in declines]
            assert full(warns[0][0]).split("\n")[1] == (
                "org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task "
                "checkpoint failed."
            )
        else:
            assert not warns
    failed = points(records, "flink_jobmanager_job_numberOfFailedCheckpoints")
    assert max(v for vs in failed.values() for _, v in vs) >= 40


# --- JVM fatal errors on a TaskManager ------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "job", "oom"),
    [
        ("tm_heap_oom", 3, "Java heap space"),
        ("tm_direct_oom", 1, "Direct buffer memory"),
        ("tm_heap_oom", 0, "Java heap space"),
    ],
    ids=["heap-2.0-k8s", "direct-1.14-yarn", "heap-1.11-yarn"],
)
def test_fatal_oom_stops_the_taskmanager_and_the_job_restarts(
    kind: str, job: int, oom: str
) -> None:
    spec = FleetSpec(jobs=4, incidents=(Incident(kind, job, 300.0),))  # type: ignore[arg-type]
    records = run(spec, 900)
    logs = by_job(spec, records, "log")[job]
    tm = tm_id(spec, job, 0)
    onset_ms = START_MS + 300_000
    tm_logs = [r for r in logs if r.key == tm.encode() and r.time_ms >= onset_ms]
    fatal = tm_logs[0]
    assert fatal.time_ms == onset_ms and level(fatal) == "ERROR"
    first, cause, frame, *_ = full(fatal).split("\n")
    assert re.fullmatch(
        r"FATAL: Thread '.+' produced an uncaught exception\. Stopping the process\.\.\.", first
    )
    assert cause == f"java.lang.OutOfMemoryError: {oom}" and frame.startswith("\tat ")
    dumps = [r for r in tm_logs if message(r) == "Thread dump: "]
    assert len(dumps) == (1 if job == 3 else 0)  # 1.17+ dump every thread (FLINK-30299)
    if job == 3:
        assert json.loads(fatal.value)["kubernetes"]["pod_name"] == tm  # the shipper says who
    # The ResourceManager sees the process exit with FatalExitExceptionHandler's -17.
    (exit_report,) = [
        r
        for r in logs
        if r.key == job_id(spec, job).encode()
        and re.search(r"[Ee]xit ?[Cc]ode[:=] ?239|exit code 239", full(r))
    ]
    assert 0 < exit_report.time_ms - onset_ms < 3_000
    exit_text = full(exit_report)
    if job == 3:
        assert "[flink-main-container(exitCode=239, reason=Error, message=null)]" in exit_text
    elif job == 1:
        assert exit_text.startswith(
            f"Worker {tm} is terminated. Diagnostics: Container {tm} marked as failed.\n Exit code:239."
        )
    else:
        assert exit_text.startswith(f"Closing TaskExecutor connection {tm} because: [")
    # The JobMaster finds out when its heartbeat times out; the job restarts.
    failed = [(r, m) for r, m in messages(logs, TASK_STATE) if m[6] == "FAILED"]
    assert len(failed) == 3 and all(
        "Heartbeat of TaskManager with id" in full(r) for r, _ in failed
    )
    assert 40_000 <= failed[0][0].time_ms - onset_ms < 51_000
    restart_after(logs, failed[0][0].time_ms)


@pytest.mark.parametrize(("job", "version"), [(0, "1.9"), (1, "1.14"), (2, "1.18")], ids=str)
def test_metaspace_oom_fails_a_task_and_shuts_its_taskmanager_down(job: int, version: str) -> None:
    spec = FleetSpec(
        jobs=4,
        flink_versions=("1.9", "1.14", "1.18", "2.0"),
        incidents=(Incident("tm_metaspace_oom", job, 300.0),),
    )
    records = run(spec, 900)
    logs = by_job(spec, records, "log")[job]
    tm = tm_id(spec, job, 0)
    onset_ms = START_MS + 300_000
    task_line, executor, runner = [
        r for r in logs if r.key == tm.encode() and r.time_ms >= onset_ms
    ][:3]
    text = full(task_line)
    enriched = version != "1.9"
    oom = "java.lang.OutOfMemoryError: Metaspace" + (
        ". The metaspace out-of-memory error has occurred." if enriched else ""
    )
    if version == "1.14":  # the cause is stringified into the message
        assert re.match(
            r"KeyedCoProcess .* \(1/2\)#0 \([0-9a-f]{32}\) switched from RUNNING to FAILED with "
            rf"failure cause: {re.escape(oom)}",
            text,
        )
    elif version == "1.18":
        first, cause = text.split("\n")[:2]
        assert first.endswith("switched from RUNNING to FAILED with failure cause:")
        assert cause.startswith(oom)
    else:
        first, cause = text.split("\n")[:2]
        assert re.fullmatch(
            r"KeyedCoProcess .* \(1/2\) \([0-9a-f]{32}\) switched from RUNNING to FAILED\.", first
        )
        assert cause == oom
    assert level(task_line) == ("INFO" if version == "1.9" else "WARN")
    assert message(executor).startswith("Fatal error occurred in TaskExecutor ")
    assert message(executor).endswith(
        "/user/taskmanager_0." if version == "1.9" else "/user/rpc/taskmanager_0."
    )
    assert (
        message(runner)
        == "Fatal error occurred while executing the TaskManager. Shutting it down..."
    )
    # The JobManager learns of the task failure at once (no heartbeat timeout): one task fails
    # with the error, the others are cancelled, the job restarts on a new TaskManager.
    failed = [(r, m) for r, m in messages(logs, TASK_STATE) if m[6] == "FAILED"]
    (first_failure,) = [(r, m) for r, m in failed if r.key == job_id(spec, job).encode()]
    assert first_failure[1][1].startswith("KeyedCoProcess")
    assert 0 < first_failure[0].time_ms - onset_ms < 100
    assert oom in full(first_failure[0])
    assert not messages(logs, r"Heartbeat of TaskManager")
    restart_after(logs, first_failure[0].time_ms)


# --- k8s_watch_crash -------------------------------------------------------------------------


@pytest.mark.parametrize("ha", [True, False], ids=["ha", "no-ha"])
def test_watch_crash_kills_the_jobmanager_and_it_comes_back(ha: bool) -> None:
    kind = "k8s_watch_crash" if ha else "k8s_watch_crash_no_ha"
    spec = FleetSpec(jobs=4, flink_versions=K8S_111, incidents=(Incident(kind, 3, 300.0),))  # type: ignore[arg-type]
    records = run(spec, 900)
    logs = by_job(spec, records, "log")[3]
    onset_ms = START_MS + 300_000
    old, new = job_id(spec, 3), job_id(spec, 3, 1)
    jm = [r for r in logs if r.key in (old.encode(), new.encode()) and r.time_ms >= onset_ms]
    rm, entry, blob = jm[:3]
    assert rm.time_ms == onset_ms and level(rm) == "ERROR"
    assert message(rm) == "Fatal error occurred in ResourceManager."
    assert "org.apache.flink.kubernetes.KubernetesResourceManager" in json.loads(rm.value)["log"]
    assert re.fullmatch(
        r"io\.fabric8\.kubernetes\.client\.KubernetesClientException: too old resource version: "
        r"(\d+) \((\d+)\)",
        full(rm).split("\n")[1],
    )
    assert message(entry) == "Fatal error occurred in the cluster entrypoint."
    assert full(entry).split("\n")[1] == full(rm).split("\n")[1]
    assert message(blob) == "Stopped BLOB server at 0.0.0.0:6124"
    # Kubernetes restarts the container: the entrypoint starts again, in the same pod.
    (start,) = messages(
        logs, r"^ Starting KubernetesApplicationClusterEntrypoint \(Version: 1\.11\.6, "
    )
    assert 10_000 <= start[0].time_ms - onset_ms < 30_100
    assert (
        json.loads(start[0].value)["kubernetes"]["pod_name"]
        == json.loads(rm.value)["kubernetes"]["pod_name"]
    )
    assert messages(logs, r"^Starting KubernetesApplicationClusterEntrypoint\.$")
    # No JobManager metrics while it is down.
    jm_metrics = [
        r.time_ms for r in records if r.stream == "metric" and r.key in (old.encode(), new.encode())
    ]
    gap = [t for t in jm_metrics if onset_ms < t < start[0].time_ms]
    assert not gap
    states = [(r.time_ms, m[1], m[2], m[3]) for r, m in messages(logs, JOB_STATE)]
    (created,) = [s for s in states if s[0] > onset_ms and s[2] == "CREATED"]
    completed_after = [
        (r.time_ms, int(m[1]), r.key)
        for r, m in messages(logs, COMPLETED)
        if r.time_ms > created[0]
    ]
    last_before = max(int(m[1]) for r, m in messages(logs, COMPLETED) if r.time_ms < onset_ms)
    if ha:
        (restore,) = [m for r, m in messages(logs, RESTORED) if r.time_ms > onset_ms]
        assert int(restore[2]) == last_before and created[1] == old
        assert completed_after[0][1] > last_before  # the ids go on (ZooKeeper's counter)
        lost = messages(
            logs, rf"^JobManager for job {old} with leader id [0-9a-f]{{32}} lost leadership\.$"
        )
        assert len(lost) == 2 and all(r.key != old.encode() for r, _ in lost)  # the TaskManagers
    else:
        assert created[1] == new != old
        (nothing,) = [
            r
            for r, m in messages(logs, r"^No checkpoint found during restore\.$")
            if r.time_ms > onset_ms
        ]
        assert nothing.key == new.encode()
        assert completed_after[0][1] == 1 and completed_after[0][2] == new.encode()
        assert not [r for r in records if r.key == old.encode() and r.time_ms > onset_ms + 1000]
        assert points(records, "flink_jobmanager_job_numberOfCompletedCheckpoints", new.encode())
        timeouts = messages(logs, r"^The heartbeat of JobManager with id [0-9a-f]{32} timed out\.$")
        assert len(timeouts) == 2


@pytest.mark.parametrize("versions", [("1.14",) * 4, ("1.11",) * 4], ids=["too-new", "on-yarn"])
def test_watch_crash_is_refused_where_flink_does_not_crash(versions: tuple[str, ...]) -> None:
    job = 3 if versions[0] == "1.14" else 1
    with pytest.raises(ValueError, match="needs a job on Kubernetes"):
        FleetSpec(
            jobs=4, flink_versions=versions, incidents=(Incident("k8s_watch_crash", job, 1.0),)
        )


# --- restart_storm -----------------------------------------------------------------------------


@pytest.mark.parametrize(("job", "version"), [(0, "1.11"), (2, "1.18")], ids=str)
def test_restart_storm_restarts_again_and_again_then_stays_down(job: int, version: str) -> None:
    spec = FleetSpec(jobs=4, incidents=(Incident("restart_storm", job, 300.0),))
    records = run(spec, 1500)
    logs = by_job(spec, records, "log")[job]
    onset_ms = START_MS + 300_000
    flapping = tm_id(spec, job, 1)
    states = [(r.time_ms, m[2], m[3]) for r, m in messages(logs, JOB_STATE) if r.time_ms > onset_ms]
    restarts = [t for t, a, b in states if b == "RESTARTING"]
    assert len(restarts) == 4 and restarts[-1] - restarts[0] < 150_000
    # Causes: the heartbeat first, then deployments to the flapping TaskManager timing out.
    failed = [(r, m) for r, m in messages(logs, TASK_STATE) if m[6] == "FAILED"]
    assert len(failed) == 12
    assert all("eartbeat of TaskManager with id" in full(r) for r, _ in failed[:3])
    for r, m in failed[3:]:
        assert m[5] == "DEPLOYING"
        text = full(r)
        assert re.search(
            rf"^java\.lang\.Exception: Cannot deploy task .+ \(2/2\) \({m[4]}\) - TaskManager "
            rf"\({re.escape(flapping)} @ \S+ \(dataPort=\d+\)\) not responding after a rpcTimeout "
            r"of 10000 ms$",
            text,
            re.M,
        )
        if version == "1.11":
            assert re.search(
                r"^Caused by: akka\.pattern\.AskTimeoutException: Ask timed out on "
                r"\[Actor\[akka\.tcp://flink@\S+:\d+/user/rpc/taskmanager_0#-?\d+\]\] after "
                r"\[10000 ms\]\. Message of type \[org\.apache\.flink\.runtime\.rpc\.messages\."
                r"RemoteRpcInvocation\]\. A typical reason",
                text,
                re.M,
            )
        else:
            assert (
                "Caused by: java.util.concurrent.TimeoutException: Invocation of [RemoteRpcInvocation(TaskExecutorGateway.submitTask("
                in text
            )
            assert "increase pekko.ask.timeout." in text
            assert (
                "Caused by: org.apache.pekko.pattern.AskTimeoutException: Ask timed out on [Actor[pekko.tcp://"
                in text
            )
    # Exponential backoff: 10, 20, 40 s between a failure and the next restart.
    running_again = [t for t, a, b in states if (a, b) == ("RESTARTING", "RUNNING")]
    gaps = [round((b - a) / 1000) for a, b in zip(restarts, running_again, strict=False)]
    assert gaps == [10, 20, 40]
    # Then leadership is lost: the job is suspended, the other TaskManager hears of it.
    suspended = [t for t, a, b in states if b == "SUSPENDED"]
    assert len(suspended) == 1 and 20_000 < suspended[0] - restarts[-1] < 41_000
    lost = messages(
        logs, rf"^JobManager for job {job_id(spec, job)} with leader id \w+ lost leadership\.$"
    )
    assert [r.key for r, _ in lost] == [tm_id(spec, job, 0).encode()]
    revoked = messages(logs, r"revoked leadership")
    assert len(revoked) == 1
    if version == "1.11":
        assert "at akka.tcp://flink@" in revoked[0][1].string
    else:
        assert revoked[0][1].string.startswith(
            f"JobMasterServiceLeadershipRunner for job {job_id(spec, job)}"
        )
    # The flapping TaskManager dies of its registration timeout five minutes after the RM lost it.
    (regto,) = [
        r
        for r in logs
        if b"RegistrationTimeoutException" in r.value
        and b"Fatal error occurred in TaskExecutor" in r.value
    ]
    assert regto.key == flapping.encode()
    limit = "300000 ms" if version == "1.11" else "PT5M"
    assert f"maximum registration duration {limit}. This indicates" in full(regto)
    assert 300_000 <= regto.time_ms - restarts[0] < 302_100
    # Not RUNNING for over five minutes, then restored on a new TaskManager.
    (created,) = [t for t, a, b in states if a == "CREATED"]
    back = [t for t, a, b in states if (a, b) == ("CREATED", "RUNNING")]
    assert back and back[0] - restarts[-1] > 300_000
    (restore,) = [m for r, m in messages(logs, RESTORED) if r.time_ms > suspended[0]]
    assert restore[1] == job_id(spec, job) and created - 100 < back[0]
    new_tm = tm_id(spec, job, 2)
    assert [r for r in records if r.key == new_tm.encode()]
    assert [r for r, m in messages(logs, COMPLETED) if r.time_ms > back[0]]


# --- late_acks_skew -------------------------------------------------------------------------


@pytest.mark.parametrize(("job", "tms"), [(0, 2), (2, 3)], ids=["1.11-2tms", "1.18-3tms"])
def test_late_acks_skew_expires_every_second_checkpoint_with_acks_from_one_host(
    job: int, tms: int
) -> None:
    onset_s = 120.0
    spec = FleetSpec(jobs=4, tms_per_job=tms, incidents=(Incident("late_acks_skew", job, onset_s),))
    logs = by_job(spec, run(spec, 3600), "log")[job]
    onset_ms = START_MS + onset_s * 1000
    jid = job_id(spec, job)
    outcome = {int(m[1]): "ok" for _, m in messages(logs, COMPLETED)}
    expired_at = {}
    for r, m in messages(logs, rf"^Checkpoint (\d+) of job {jid} expired before completing\.$"):
        outcome[int(m[1])] = "expired"
        expired_at[int(m[1])] = r.time_ms
    assert len(expired_at) >= 20 and min(expired_at.values()) >= onset_ms
    first = min(expired_at)
    assert all(outcome[n] == "ok" for n in range(1, first))
    # From the onset, expired and completed alternate.
    after = [outcome[n] for n in range(first, max(outcome) + 1)]
    assert after[::2] == ["expired"] * len(after[::2])
    assert set(after[1::2]) <= {"ok"} and len(after[1::2]) >= len(after[::2]) - 1

    late = messages(
        logs,
        r"^Received late message for now expired checkpoint attempt (\d+) from task (\S+) "
        rf"of job {jid} at (\S+) @ (\S+) \(dataPort=\d+\)\.$",
    )
    per_checkpoint = Counter(int(m[1]) for _, m in late)
    end_ms = START_MS + 3_600_000
    assert set(per_checkpoint) == {n for n, t in expired_at.items() if t + 10_000 < end_ms}
    assert all(3 <= k <= 6 for k in per_checkpoint.values())
    for r, m in late:
        assert 0 < r.time_ms - expired_at[int(m[1])] <= 10_000
    # Concentrated: >= 70% from one TaskManager (and its host), the rest from the others.
    hosts = Counter(m[4] for _, m in late)
    tm_hosts = Counter(m[3] for _, m in late)
    (top, n_top), *rest = tm_hosts.most_common()
    assert n_top >= 0.7 * len(late) and rest
    assert hosts.most_common(1)[0][1] >= 0.7 * len(late)
    assert {m[3] for _, m in late} <= {tm_id(spec, job, k) for k in range(tms)}


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"incidents": (Incident("checkpoint_expiry", 3, 10.0),)},  # job 3 of a 3-job fleet
        {"incidents": (Incident("disk_full", 0, 10.0),)},  # type: ignore[arg-type]
        {"flink_versions": ("1.4",)},
        {"flink_versions": ("latest",)},
        {"checkpoint_interval_s": 0},
        {"tms_per_job": 0},
        {"tms_per_job": 1, "incidents": (Incident("late_acks_skew", 0, 10.0),)},
        {"heap_leak_mb_per_h": 0},
        {"creep_per_checkpoint": -0.05},
    ],
    ids=[
        "job-out-of-range",
        "unknown-kind",
        "too-old",
        "not-a-version",
        "zero-interval",
        "no-tms",
        "skew-without-other-tms",
        "no-leak",
        "negative-creep",
    ],
)
def test_bad_specs_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        FleetSpec(**kwargs)


# --- produce -------------------------------------------------------------------------------


class FakeFuture:
    def __init__(self, error: Exception | None) -> None:
        self.error = error

    def add_errback(self, fn) -> None:
        if self.error is not None:
            fn(self.error)


class FakeProducer:
    instances: list[FakeProducer] = []

    def __init__(self, **config: object) -> None:
        self.config = config
        self.sent: list[tuple[str, bytes | None, bytes, int]] = []
        self.flushed = self.closed = False
        self.fail_topic: str | None = None
        FakeProducer.instances.append(self)

    def send(self, topic: str, value: bytes, key: bytes | None, timestamp_ms: int) -> FakeFuture:
        assert not self.flushed
        self.sent.append((topic, key, value, timestamp_ms))
        return FakeFuture(RuntimeError("broker says no") if topic == self.fail_topic else None)

    def flush(self) -> None:
        self.flushed = True

    def close(self) -> None:
        self.closed = True


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> type[FakeProducer]:
    FakeProducer.instances = []
    monkeypatch.setattr(fleet_producer, "KafkaProducer", FakeProducer)
    return FakeProducer


def test_produce_routes_streams_to_topics_with_keys_and_event_times(producer) -> None:
    spec = FleetSpec(jobs=2)
    records = run(spec, 60)
    counts: list[int] = []
    n = sim.produce(
        iter(records), "localhost:9092", "flink.logs", "flink.metrics", progress=counts.append
    )
    (p,) = producer.instances
    assert n == len(records) == len(p.sent)
    assert p.config["bootstrap_servers"] == "localhost:9092"
    for rec, (topic, key, value, ts) in zip(records, p.sent, strict=True):
        assert topic == ("flink.logs" if rec.stream == "log" else "flink.metrics")
        assert (key, value, ts) == (rec.key, rec.value, rec.time_ms)
    assert p.flushed and p.closed
    assert counts[-1] == n


def test_produce_in_real_time_paces_by_event_time(producer, monkeypatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(fleet_producer, "time", clock)
    records = [SimRecord("log", START_MS + offset, None, b"x") for offset in (0, 0, 1500, 4000)]
    sim.produce(records, "k:9092", "l", "m", realtime=True)
    assert clock.now == pytest.approx(104.0)
    assert clock.sleeps == pytest.approx([1.5, 2.5])


def test_produce_raises_when_kafka_rejects_records(producer, monkeypatch) -> None:
    original = FakeProducer.__init__

    def failing(self, **config: object) -> None:
        original(self, **config)
        self.fail_topic = "m"

    monkeypatch.setattr(FakeProducer, "__init__", failing)
    with pytest.raises(sim.ProduceError) as err:
        sim.produce(run(FleetSpec(jobs=1), 30), "k:9092", "l", "m")
    assert err.value.topic == "m"
    assert producer.instances[0].closed
