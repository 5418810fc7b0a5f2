"""The fleet simulator: determinism, layouts, wording per version, metrics, incidents."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import UTC, datetime

import pytest

from streaming import simulate as sim
from streaming.simulate import FleetSpec, Incident, SimRecord, generate, job_id, tm_id

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
    """Which job a record belongs to, from its Kafka key (job id or TaskManager id)."""
    for i in range(spec.jobs):
        if rec.key == job_id(spec, i).encode():
            return i
        if rec.key in {tm_id(spec, i, k).encode() for k in range(spec.tms_per_job)}:
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
    if first.startswith("{"):
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
    ],
    ids=["job-out-of-range", "unknown-kind", "too-old", "not-a-version", "zero-interval", "no-tms"],
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
    monkeypatch.setattr(sim, "KafkaProducer", FakeProducer)
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
    monkeypatch.setattr(sim, "time", clock)
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
