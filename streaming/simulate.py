"""A simulated Flink fleet: healthy jobs plus injected incidents, as Kafka records.

:func:`generate` is a pure, seeded generator: the same :class:`FleetSpec` and start
time give the same records, byte for byte, and it never reads the clock.
:func:`produce` sends records to Kafka with kafka-python, optionally paced in real
time.

Wording follows ``FLINK_FORMATS.md`` (per Flink version) and metric names and
labels follow ``FLINK_METRICS.md``. What the fleet looks like, for job ``i``:

* **Version** ``flink_versions[i % len(flink_versions)]``: decides the wording and
  the log4j generation (1.x ≤ 1.10: log4j 1, ``<logger>  - msg``; ≥ 1.11: log4j 2,
  ``<logger> [] - msg``).
* **Log layout** by ``i % 4``: 0 and 2 Flink's default pattern layout; 1 the JSON
  pattern layout of seed 000 (a stack trace follows the JSON object as plain lines,
  exactly as log4j prints a throwable after a pattern layout); 3 the default layout
  wrapped in a Fluent Bit envelope.
* **Deployment** by ``i % 4``: 0 and 1 on YARN (TaskManager ids are container ids),
  2 and 3 on Kubernetes (TaskManager ids are pod names).
* **Metric format** by ``i % 4``: 2 sends Telegraf JSON, the others canonical JSON.
* **Graph**: two Kafka sources and a keyed co-process into a Kafka sink. Parallelism
  is ``tms_per_job``; subtask ``k`` of every vertex runs on TaskManager ``k``.

* **Metrics** every ``metric_interval_s``: per TaskManager heap used/max (a GC
  sawtooth over a flat floor while busy) and G1 young-generation count/time; per
  subtask ``numRecordsIn``/``numRecordsOut`` and their ``PerSecond`` rates; per job
  the last checkpoint's duration and size and the completed/failed counts.

Every job starts at ``start_ms`` plus a few seconds (its tasks are deployed and
switch to RUNNING), then checkpoints every ``checkpoint_interval_s``. The fleet is
assumed to tolerate checkpoint failures (``tolerable-failed-checkpoints`` high), so
an incident keeps going instead of failing the job over (only a lost TaskManager
does). Incidents (see :class:`Incident`) change a job from their onset only: its
records before the onset are the same as without them.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import random
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from operator import attrgetter
from typing import Literal

from kafka import KafkaProducer

__all__ = [
    "INCIDENT_KINDS",
    "FleetSpec",
    "Incident",
    "IncidentKind",
    "ProduceError",
    "SimRecord",
    "generate",
    "job_id",
    "job_name",
    "produce",
    "tm_id",
]

IncidentKind = Literal["checkpoint_expiry", "checkpoint_creep", "idle_heap_leak", "late_acks_skew"]

#: Incident kinds :func:`generate` knows how to inject.
INCIDENT_KINDS: frozenset[str] = frozenset(
    {"checkpoint_expiry", "checkpoint_creep", "idle_heap_leak", "late_acks_skew"}
)


@dataclass(frozen=True, slots=True)
class SimRecord:
    """One Kafka record of the simulated fleet.

    Attributes:
        stream: Which topic it goes to: ``"log"`` or ``"metric"``.
        time_ms: Event time, epoch milliseconds UTC (also used as the Kafka timestamp).
        key: Kafka key: the job id for JobManager records, the TaskManager id for
            TaskManager records, so one entity's records stay in one partition, in order.
        value: The payload (UTF-8).

    """

    stream: Literal["log", "metric"]
    time_ms: int
    key: bytes | None
    value: bytes


@dataclass(frozen=True, slots=True)
class Incident:
    """An incident injected into one job of the fleet.

    Attributes:
        kind: What goes wrong, from the onset on:

            * ``checkpoint_expiry``: the job's checkpoints stop completing and expire
              ``checkpoint_timeout_s`` after their trigger, each followed by 1-3 late
              acknowledgements from the tasks of one TaskManager.
            * ``checkpoint_creep``: each checkpoint takes ``creep_per_checkpoint`` (±20%)
              longer than the one before, starting from the job's usual duration, with
              the usual jitter, and the state grows too; once a checkpoint would take
              longer than ``checkpoint_timeout_s`` it expires (late acknowledgements then
              come from the stateful tasks of every TaskManager), and so do the ones after.
            * ``idle_heap_leak``: the job goes idle (seed 001, FLINK-33231): every task's
              records-in/out rates read 0 and its counters stop; checkpoints still
              complete, fast and tiny. On TaskManager 0 the post-GC heap floor rises by
              ``heap_leak_mb_per_h`` under a small GC sawtooth; when it reaches the heap
              maximum, YARN kills the container (JobManager log: the Hadoop
              ``beyond the 'PHYSICAL' memory limit`` diagnostics, as the job's version
              reports them), its metrics stop, and 40-50 s later the JobMaster's
              heartbeat to it times out and its tasks fail. The job's checkpointing
              ends there; the restart that would follow is not simulated.
            * ``late_acks_skew``: every second checkpoint expires (the first one at or
              after the onset does), each followed by 3-6 late acknowledgements, about
              80% of them from tasks on one TaskManager, the rest from the others
              (seed 002). Needs ``tms_per_job >= 2``.
        job_index: Which job of the fleet.
        onset_s: Seconds after the start of the simulation when it begins.

    """

    kind: IncidentKind
    job_index: int
    onset_s: float


@dataclass(frozen=True, slots=True)
class FleetSpec:
    """What to simulate.

    Attributes:
        jobs: Number of Flink jobs (each its own cluster, as in application mode).
        tms_per_job: TaskManagers per job; also the parallelism of every vertex.
        checkpoint_interval_s: Checkpoint interval.
        checkpoint_timeout_s: An expired checkpoint is logged this long after its trigger.
        metric_interval_s: Metric reporting interval, per TaskManager and per job.
        chatter_per_checkpoint: INFO lines from other classes per completed checkpoint
            per job, at most (only lines Flink really logs then: the source
            coordinators' and the transactional sink's commit lines).
        flink_versions: Job ``i`` runs version ``flink_versions[i % len]`` (``"1.5"`` or
            newer); controls wording and layout.
        seed: Seed of all randomness (ids, durations, sizes, noise).
        incidents: Incidents to inject.
        heap_leak_mb_per_h: How fast the post-GC heap floor of an ``idle_heap_leak``
            TaskManager rises, MiB per hour of event time.
        creep_per_checkpoint: How much longer each checkpoint of a ``checkpoint_creep``
            job takes than the one before (0.05: 5%).

    Example:
        >>> spec = FleetSpec(jobs=4, incidents=(Incident("checkpoint_expiry", 0, 120.0),))
        >>> records = list(generate(spec, start_ms=1_700_000_000_000, duration_s=600))

    """

    jobs: int = 3
    tms_per_job: int = 2
    checkpoint_interval_s: float = 10.0
    checkpoint_timeout_s: float = 60.0
    metric_interval_s: float = 15.0
    chatter_per_checkpoint: int = 2
    flink_versions: tuple[str, ...] = ("1.11", "1.14", "1.18", "2.0")
    seed: int = 7
    incidents: tuple[Incident, ...] = ()
    heap_leak_mb_per_h: float = 600.0
    creep_per_checkpoint: float = 0.05

    def __post_init__(self) -> None:
        if self.jobs < 0 or self.tms_per_job < 1 or self.chatter_per_checkpoint < 0:
            msg = (
                f"jobs={self.jobs}, tms_per_job={self.tms_per_job} and chatter_per_checkpoint="
                f"{self.chatter_per_checkpoint} must be >= 0, >= 1 and >= 0"
            )
            raise ValueError(msg)
        for name in (
            "checkpoint_interval_s",
            "checkpoint_timeout_s",
            "metric_interval_s",
            "heap_leak_mb_per_h",
            "creep_per_checkpoint",
        ):
            if not getattr(self, name) > 0:
                msg = f"{name} must be > 0, got {getattr(self, name)}"
                raise ValueError(msg)
        if not self.flink_versions:
            msg = "flink_versions must name at least one version"
            raise ValueError(msg)
        for v in self.flink_versions:
            _parse_version(v)
        for inc in self.incidents:
            if inc.kind not in INCIDENT_KINDS:
                msg = f"unknown incident kind {inc.kind!r}; known: {sorted(INCIDENT_KINDS)}"
                raise ValueError(msg)
            if not 0 <= inc.job_index < self.jobs:
                msg = f"incident job_index {inc.job_index} is not a job of a {self.jobs}-job fleet"
                raise ValueError(msg)
            if inc.onset_s < 0:
                msg = f"incident onset_s must be >= 0, got {inc.onset_s}"
                raise ValueError(msg)
            if inc.kind == "late_acks_skew" and self.tms_per_job < 2:
                msg = "late_acks_skew needs tms_per_job >= 2 (a skewed TaskManager and others)"
                raise ValueError(msg)


class ProduceError(RuntimeError):
    """Kafka did not accept a simulated record.

    Attributes:
        topic: The topic of the first record that failed.

    """

    def __init__(self, msg: str, topic: str) -> None:
        super().__init__(msg)
        self.topic = topic


# --- identities ------------------------------------------------------------------------

# (job name, main topic, side topic, output topic); job i uses entry i % len.
_JOB_TEMPLATES: tuple[tuple[str, str, str, str], ...] = (
    ("orders-enrichment", "orders", "customers", "orders-enriched"),
    ("payments-fraud-scoring", "payments", "fraud-rules", "payment-scores"),
    ("clickstream-sessionizer", "clicks", "page-catalog", "sessions"),
    ("inventory-sync", "inventory-cdc", "warehouses", "inventory-snapshots"),
    ("ad-impressions-rollup", "ad-impressions", "campaigns", "impression-rollups"),
    ("shipment-tracking", "shipment-events", "carriers", "shipment-status"),
)

Layout = Literal["default", "json", "envelope"]
_LAYOUT_BY_SLOT: tuple[Layout, ...] = ("default", "json", "default", "envelope")
_K8S_SLOTS = frozenset({2, 3})  # the envelope job must run on Kubernetes (Fluent Bit)
_TELEGRAF_SLOT = 2
# Kubernetes generates pod-name suffixes from this alphabet (no vowels, no 0/1/3).
_K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _digest(seed: int, *parts: object) -> bytes:
    raw = "|".join(["flinkwatch-sim", str(seed), *map(str, parts)]).encode()
    return hashlib.blake2b(raw, digest_size=16).digest()


def _hex32(seed: int, *parts: object) -> str:
    return _digest(seed, *parts).hex()


def _k8s_suffix(seed: int, n: int, *parts: object) -> str:
    return "".join(_K8S_ALPHABET[b % len(_K8S_ALPHABET)] for b in _digest(seed, *parts)[:n])


def job_id(spec: FleetSpec, index: int) -> str:
    """Return the job id (32 lowercase hex) of job ``index``; it depends on ``spec.seed`` only."""
    return _hex32(spec.seed, "job", index)


def job_name(spec: FleetSpec, index: int) -> str:
    """Return the name of job ``index``, e.g. ``"orders-enrichment-0"``."""
    return f"{_JOB_TEMPLATES[index % len(_JOB_TEMPLATES)][0]}-{index}"


def _on_k8s(index: int) -> bool:
    return index % 4 in _K8S_SLOTS


def tm_id(spec: FleetSpec, job_index: int, tm_index: int) -> str:
    """Return the resource id of TaskManager ``tm_index`` of job ``job_index``.

    A YARN container id (``container_e05_1699999999999_0042_01_000003``) for jobs on
    YARN, a pod name (``orders-enrichment-2-taskmanager-1-2``) for jobs on Kubernetes.
    """
    if not 0 <= tm_index < spec.tms_per_job:
        msg = f"tm_index {tm_index} is not one of the {spec.tms_per_job} TaskManagers of a job"
        raise ValueError(msg)
    if _on_k8s(job_index):
        return f"{job_name(spec, job_index)}-taskmanager-1-{tm_index + 1}"
    # One YARN cluster for the fleet; each job is an application on it. Container 1 is the
    # ApplicationMaster (the JobManager), TaskManagers come after.
    # The ResourceManager started some time in 2020-2022, before any simulated event.
    cluster_ts = 1_600_000_000_000 + int.from_bytes(_digest(spec.seed, "rm")[:6]) % 63_072_000_000
    return f"container_e05_{cluster_ts}_{40 + job_index:04d}_01_{tm_index + 2:06d}"


# --- versions and wording --------------------------------------------------------------


def _parse_version(v: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", v)
    if m is None:
        msg = f"flink version {v!r} is not MAJOR.MINOR"
        raise ValueError(msg)
    ver = (int(m.group(1)), int(m.group(2)))
    if ver < (1, 5):
        msg = f"flink version {v!r} is not supported; 1.5 is the oldest with job ids in its lines"
        raise ValueError(msg)
    return ver


# The patch release whose jar names appear in stack frames.
_RELEASES = {
    (1, 11): "1.11.6",
    (1, 12): "1.12.7",
    (1, 13): "1.13.6",
    (1, 14): "1.14.6",
    (1, 15): "1.15.4",
    (1, 16): "1.16.3",
    (1, 17): "1.17.2",
    (1, 18): "1.18.1",
    (1, 19): "1.19.1",
    (1, 20): "1.20.0",
    (2, 0): "2.0.0",
}

_CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
_CFM = "org.apache.flink.runtime.checkpoint.CheckpointFailureManager"
_EG = "org.apache.flink.runtime.executiongraph.ExecutionGraph"
_SC = "org.apache.flink.runtime.source.coordinator.SourceCoordinator"
_TPC = "org.apache.flink.streaming.api.functions.sink.TwoPhaseCommitSinkFunction"
_KSR = "org.apache.flink.connector.kafka.source.reader.KafkaSourceReader"
_FKCB = "org.apache.flink.streaming.connectors.kafka.FlinkKafkaConsumerBase"
_ARM = "org.apache.flink.runtime.resourcemanager.active.ActiveResourceManager"
_JM = "org.apache.flink.runtime.jobmaster.JobMaster"

# Where each message is logged from: (logger, file, line) for the JSON layout's "file" and
# "line" fields. Loggers are as FLINK_FORMATS.md §10 says (Execution logs via ExecutionGraph's
# logger); line numbers are illustrative, they move between releases.
_SITES: dict[str, tuple[str, str, str]] = {
    "trigger": (_CC, "CheckpointCoordinator.java", "791"),
    "complete": (_CC, "CheckpointCoordinator.java", "1300"),
    "expire": (_CC, "CheckpointCoordinator.java", "2143"),
    "late": (_CC, "CheckpointCoordinator.java", "1181"),
    "failure": (_CFM, "CheckpointFailureManager.java", "154"),
    "job_state": (_EG, "ExecutionGraph.java", "1324"),
    "task_state": (_EG, "Execution.java", "1493"),
    "source_done": (_SC, "SourceCoordinator.java", "377"),
    "txn_commit": (_TPC, "TwoPhaseCommitSinkFunction.java", "325"),
    "commit_failed_reader": (_KSR, "KafkaSourceReader.java", "148"),
    "commit_failed_legacy": (_FKCB, "FlinkKafkaConsumerBase.java", "780"),
    # 1.12+: a YARN container that completed; 1.5-1.11 log "Closing TaskExecutor connection"
    # from ResourceManager.java under YarnResourceManager's logger instead (see _Job).
    "worker_terminated": (_ARM, "ActiveResourceManager.java", "263"),
    "tm_heartbeat_timeout": (_JM, "JobMaster.java", "1406"),
    "tm_disconnect": (_JM, "JobMaster.java", "870"),
}

# CheckpointCoordinator$CheckpointCanceller.run line per release (illustrative).
_CANCELLER_LINES = {(1, 15): 2143, (1, 16): 2155, (1, 17): 2183, (1, 18): 2216, (1, 19): 2242}

_JDK_FRAMES = (
    "\tat java.util.concurrent.Executors$RunnableAdapter.call(Executors.java:515) [?:?]\n"
    "\tat java.util.concurrent.FutureTask.run(FutureTask.java:264) [?:?]\n"
    "\tat java.util.concurrent.ScheduledThreadPoolExecutor$ScheduledFutureTask.run("
    "ScheduledThreadPoolExecutor.java:304) [?:?]\n"
    "\tat java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1128) [?:?]\n"
    "\tat java.util.concurrent.ThreadPoolExecutor$Worker.run(ThreadPoolExecutor.java:628) [?:?]\n"
    "\tat java.lang.Thread.run(Thread.java:829) [?:?]"
)

# Kafka's ApiExceptions carry no stack trace (they override fillInStackTrace), so an async
# offset-commit failure prints as two lines and no frames.
_COMMIT_FAILURE_TRACE = (
    "org.apache.kafka.clients.consumer.RetriableCommitFailedException: Offset commit failed "
    "with a retriable exception. You should retry committing the latest consumed offsets.\n"
    "Caused by: org.apache.kafka.common.errors.CoordinatorNotAvailableException: "
    "The coordinator is not available."
)


@dataclass(frozen=True, slots=True)
class _Wording:
    """Version-dependent text of one job, fixed once so the hot loop only formats."""

    log4j2: bool
    trigger_type: str | None  # None: no "(type=...)" before 1.11
    completed_new: bool  # 1.14+: checkpointDuration/finalizationTime
    late_with_location: bool  # 1.9+: "from task X of job Y at <location>"
    failure_manager_warn: bool  # 1.15+: WARN "Failed to trigger or complete checkpoint ..."
    initializing: bool  # 1.13+: tasks pass DEPLOYING -> INITIALIZING -> RUNNING
    new_attempt_ids: bool  # 1.16+: <graph id>_<vertex id>_<subtask>_<attempt>
    kafka_source: bool  # FLIP-27 KafkaSource (source coordinators log each completion)
    legacy_sink: bool  # FlinkKafkaProducer (TwoPhaseCommitSinkFunction logs each commit)
    attempt_suffix: bool  # 1.12+: TaskManager-side task names end in "#<attempt>"
    pekko: bool  # 1.18+: Pekko instead of Akka (thread names)
    io_thread: str  # JobManager I/O executor threads
    frame_jar: str  # packaging suffix of Flink frames
    expire_line: int  # CheckpointCanceller frame line

    @staticmethod
    def of(ver: tuple[int, int]) -> _Wording:
        release = _RELEASES.get(ver, f"{ver[0]}.{ver[1]}.0")
        jar = f"flink-dist-{release}.jar" if ver >= (1, 15) else f"flink-dist_2.12-{release}.jar"
        if ver < (1, 11):
            trigger_type = None
        elif ver < (1, 15):
            trigger_type = "CHECKPOINT"
        else:
            trigger_type = (
                "CheckpointType{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}"
            )
        return _Wording(
            log4j2=ver >= (1, 11),
            trigger_type=trigger_type,
            completed_new=ver >= (1, 14),
            late_with_location=ver >= (1, 9),
            failure_manager_warn=ver >= (1, 15),
            initializing=ver >= (1, 13),
            new_attempt_ids=ver >= (1, 16),
            kafka_source=ver >= (1, 14),
            legacy_sink=ver < (1, 15),
            attempt_suffix=ver >= (1, 12),
            pekko=ver >= (1, 18),
            io_thread="jobmanager-io-thread" if ver >= (1, 15) else "jobmanager-future-thread",
            frame_jar=f" [{jar}:{release}]",
            expire_line=_CANCELLER_LINES.get(ver, 2216),
        )


# --- rendering -------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _second_text(sec: int) -> str:
    return datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _log4j_ts(ms: int) -> str:
    # %d{yyyy-MM-dd HH:mm:ss,SSS}; most records share a second with the one before.
    sec, milli = divmod(ms, 1000)
    return f"{_second_text(sec)},{milli:03d}"


def _iso_ts(ms: int) -> str:
    # Container runtimes stamp with nanoseconds; the digits below the millisecond are noise.
    sec, milli = divmod(ms, 1000)
    return f"{_second_text(sec).replace(' ', 'T')}.{milli:03d}{(ms * 7919) % 1_000_000:06d}Z"


def _hadoop_ts(ms: int) -> str:
    # Hadoop 3 prefixes each container diagnostic with [yyyy-MM-dd HH:mm:ss.SSS].
    sec, milli = divmod(ms, 1000)
    return f"[{_second_text(sec)}.{milli:03d}]"


def _hadoop_size(n: int) -> str:
    """Bytes as Hadoop's ``TraditionalBinaryPrefix.long2String(n, "B", 1)`` prints them.

    Exact multiples print whole (``3 GB``), anything else with one decimal (``3.0 GB``).
    """
    for shift, symbol in ((40, "T"), (30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift:
            if n & ((1 << shift) - 1) == 0:
                return f"{n >> shift} {symbol}B"
            return f"{n / (1 << shift):.1f} {symbol}B"
    return f"{n} B"


_UNALLOWED = re.compile(r"[^a-zA-Z0-9:_]")


def _label(value: str) -> str:
    """Filter a label value as Flink's Prometheus reporter does (FLINK_METRICS.md §1)."""
    return _UNALLOWED.sub("_", value)


@dataclass(frozen=True, slots=True)
class _Series:
    """One metric series with its JSON prefix and suffix rendered once."""

    key: bytes
    head: str
    tail: str
    telegraf: bool

    @staticmethod
    def of(name: str, labels: dict[str, str], key: str, telegraf: bool, url: str) -> _Series:
        if telegraf:
            # Telegraf's JSON serializer (Go maps: keys sorted, no spaces). The prometheus
            # input with metric_version=1 names the field after the sample type, and Flink
            # exposes every metric as a gauge.
            tags = json.dumps({**labels, "url": url}, sort_keys=True, separators=(",", ":"))
            head = '{"fields":{"gauge":'
            tail = f'}},"name":{json.dumps(name)},"tags":{tags},"timestamp":'
        else:
            head = f'{{"name": {json.dumps(name)}, "value": '
            tail = f', "labels": {json.dumps(labels)}}}'
        return _Series(key.encode(), head, tail, telegraf)

    def record(self, t_ms: int, value: str) -> SimRecord:
        if self.telegraf:
            text = f"{self.head}{value}{self.tail}{t_ms // 1000}}}"
        else:
            text = f'{self.head}{value}, "timestamp": {t_ms}{self.tail}'
        return SimRecord("metric", t_ms, self.key, text.encode())


# --- the fleet -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _TaskManager:
    index: int
    tm_id: str
    host: str  # the FQDN in TaskManagerLocation and the "host" metric label (unfiltered)
    data_port: int
    node: str  # Kubernetes node (the envelope's "host"); empty on YARN

    @property
    def location(self) -> str:
        return f"{self.tm_id} @ {self.host} (dataPort={self.data_port})"


@dataclass(frozen=True, slots=True)
class _Task:
    vertex: int
    subtask: int
    name: str  # vertex name, e.g. "Source: kafka-orders -> Map"
    vertex_id: str
    attempt_id: str
    is_source: bool


@dataclass(slots=True)
class _TaskSeries:
    """One subtask's throughput series and the counters behind them."""

    task: _Task
    s_rate_in: _Series
    s_rate_out: _Series
    s_count_in: _Series
    s_count_out: _Series
    count_in: float = 0.0
    count_out: float = 0.0


_NEVER = 2**62  # a time after every simulation's end


@dataclass(slots=True)
class _TmState:
    """What one TaskManager's metrics remember between samples."""

    next_ms: int
    used: float
    floor: float  # the post-GC heap (live set) of the busy TaskManager
    ceiling: float
    growth: float  # heap bytes allocated per second
    heap_max: int
    gc_count: int
    gc_time: int
    phase: float  # of the throughput wave
    s_used: _Series
    s_max: _Series
    s_gc_count: _Series
    s_gc_time: _Series
    tasks: tuple[_TaskSeries, ...]
    last_ms: int  # of the previous sample (counters add rate x elapsed time)
    rng: random.Random  # noise of its samples
    # idle_heap_leak: from idle_ms the tasks process nothing and the heap cycles in a
    # smaller band, more slowly; from leak_ms the floor rises by leak_per_ms.
    idle_ms: int = _NEVER
    idle_band: float = 0.0
    idle_growth: float = 0.0
    leak_ms: int = _NEVER
    leak_per_ms: float = 0.0
    dead_ms: int = _NEVER  # killed: no samples from here on
    tasks_until_ms: int = _NEVER  # its tasks failed or were cancelled: no task samples


class _Job:
    """One simulated job: its constants, its state and the records it produces.

    Records are pushed onto a heap as whole checkpoint cycles are simulated, and handed
    out in event-time order once no later push can precede them: everything a cycle
    logs happens at or after its trigger, so all records before the next trigger are
    final.
    """

    def __init__(self, spec: FleetSpec, index: int, start_ms: int, end_ms: int) -> None:
        self.spec = spec
        self.index = index
        self.end_ms = end_ms
        seed = spec.seed
        version = spec.flink_versions[index % len(spec.flink_versions)]
        ver = _parse_version(version)
        self.ver = ver
        self.w = _Wording.of(ver)
        self.sites = dict(_SITES)
        if ver >= (1, 13):
            # The job's state is logged by DefaultExecutionGraph, under ExecutionGraph's logger.
            self.sites["job_state"] = (_EG, "DefaultExecutionGraph.java", "1114")
        if ver < (1, 12):
            self.sites["worker_terminated"] = (
                "org.apache.flink.yarn.YarnResourceManager",
                "ResourceManager.java",
                "1087",
            )
        self.layout = _LAYOUT_BY_SLOT[index % 4]
        self.k8s = _on_k8s(index)
        self.telegraf = index % 4 == _TELEGRAF_SLOT
        self.job_id = job_id(spec, index)
        self.name = job_name(spec, index)
        self.key = self.job_id.encode()
        _, main_topic, side_topic, out_topic = _JOB_TEMPLATES[index % len(_JOB_TEMPLATES)]
        self.rng = random.Random(f"{seed}/job/{index}")
        rng = self.rng

        # Hosts: EMR-style FQDNs on YARN; pod IPs (no reverse DNS) on Kubernetes.
        def place(*parts: object) -> tuple[str, str]:
            d = _digest(seed, "place", index, *parts)
            if self.k8s:
                node = 1 + d[0] % 6
                return f"10.244.{node}.{2 + d[1] % 250}", f"node-{node}"
            return f"ip-10-0-{1 + d[0] % 4}-{10 + d[1] % 240}.ec2.internal", ""

        self.jm_host, jm_node = place("jm")
        self.jm_pod = (
            f"{self.name}-{_k8s_suffix(seed, 10, 'rs', index)}-{_k8s_suffix(seed, 5, 'pod', index)}"
        )
        tms = []
        for k in range(spec.tms_per_job):
            host, node = place("tm", k)
            tid = tm_id(spec, index, k)
            port = (
                6121
                if self.k8s
                else 32768 + int.from_bytes(_digest(seed, "port", index, k)[:2]) % 28000
            )
            tms.append(_TaskManager(k, tid, host, port, node))
        self.tms: tuple[_TaskManager, ...] = tuple(tms)
        self.kube_jm = self._kube(self.jm_pod, jm_node)
        self.kube_tm = tuple(self._kube(tm.tm_id, tm.node) for tm in self.tms)

        # The graph. Sink naming follows the API in use: the legacy SinkFunction is
        # "Sink: <name>", a Sink V2 writes "<name>: Writer" and "<name>: Committer".
        n = spec.tms_per_job
        self.main_source = f"Source: kafka-{main_topic}"
        self.side_source = f"Source: kafka-{side_topic}"
        if self.w.legacy_sink:
            sink = f"KeyedCoProcess -> Sink: kafka-{out_topic}"
        else:
            sink = f"KeyedCoProcess -> kafka-{out_topic}: Writer -> kafka-{out_topic}: Committer"
        vertex_names = (f"{self.main_source} -> Map", self.side_source, sink)
        graph_id = _hex32(seed, "graph", index)
        tasks = []
        for v, vname in enumerate(vertex_names):
            vid = _hex32(seed, "vertex", index, v)
            for k in range(n):
                if self.w.new_attempt_ids:
                    attempt = f"{graph_id}_{vid}_{k}_0"
                else:
                    attempt = _hex32(seed, "attempt", index, v, k)
                tasks.append(_Task(v, k, vname, vid, attempt, v < 2))
        self.tasks: tuple[_Task, ...] = tuple(tasks)
        self.sink_uid = _hex32(seed, "sink-uid", index)
        self.producer_id_base = 1000 + int.from_bytes(_digest(seed, "pid", index)[:2]) % 60000

        # Checkpoint behaviour: a per-job base duration (log-uniform 200..3000 ms) with
        # jitter and rare spikes, and a state size that drifts slowly.
        self.base_duration_ms = math.exp(rng.uniform(math.log(200), math.log(3000)))
        self.size_bytes = float(int(math.exp(rng.uniform(math.log(2e6), math.log(8e8)))))
        self.base_size = self.size_bytes
        self.interval_ms = round(spec.checkpoint_interval_s * 1000)
        self.timeout_ms = round(spec.checkpoint_timeout_s * 1000)
        self.max_healthy_ms = max(1, int(self.timeout_ms * 0.8))
        self.records_per_s = rng.uniform(200, 5000)  # per main-source subtask
        self.side_per_s = rng.uniform(0.5, 40)

        # Earliest onset per incident kind. A new kind adds itself to IncidentKind and
        # INCIDENT_KINDS and acts where it bites: _cycle for checkpoint outcomes, _tm_sample
        # for TaskManager metrics, or a scheduled log sequence of its own.
        self.onset_ms: dict[str, int] = {}
        for inc in spec.incidents:
            if inc.job_index == index:
                t = start_ms + round(inc.onset_s * 1000)
                self.onset_ms[inc.kind] = min(t, self.onset_ms.get(inc.kind, t))
        # The TaskManager whose tasks acknowledge late (all of them, as in seed 002).
        self.skewed_tm = rng.randrange(n)
        # Incidents draw from their own generator, so that a job's records before an onset
        # are the same as without the incident.
        self.irng = random.Random(f"{seed}/incident/{index}")
        self.creep = 1.0  # checkpoint_creep: duration factor over the job's base
        self.skew_seen = 0  # late_acks_skew: checkpoints since the onset
        # idle_heap_leak: when TaskManager 0 is killed and when the JobMaster notices (its
        # heartbeat times out and the job fails over: no checkpoints after that).
        self.kill_ms: int | None = None
        self.stop_ms = end_ms

        # Job lifecycle and state as the JobManager's metrics see it.
        self.start_ms = start_ms + rng.randrange(0, 4000)
        self.running_ms = self.start_ms + rng.randrange(1500, 3000)
        self.last_duration = -1
        self.last_size = -1
        self.completed = 0
        self.failed = 0
        self.consecutive_failed = 0
        self.changes: deque[tuple[int, int, int, int, int]] = deque()  # (t, dur, size, ok, fail)

        self.heap: list[tuple[int, int, SimRecord]] = []
        self.seq = 0
        self._init_metrics(start_ms)

    # -- records -----------------------------------------------------------------------

    @staticmethod
    def _kube(pod: str, node: str) -> str:
        return json.dumps({"pod_name": pod, "namespace_name": "flink", "host": node})

    def _push(self, rec: SimRecord) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (rec.time_ms, self.seq, rec))

    def _log(
        self,
        t: int,
        site: str,
        level: str,
        msg: str,
        thread: str,
        trace: str = "",
        tm: int | None = None,
    ) -> None:
        """Render one log record in the job's layout and queue it."""
        logger, file, line = self.sites[site]
        ts = _log4j_ts(t)
        if self.layout == "json":
            text = (
                f'{{"level":"{level}","timestamp":"{ts}","thread":{json.dumps(thread)},'
                f'"file":"{file}","line":"{line}","message":{json.dumps(msg)}}}'
            )
            if trace:
                text = f"{text}\n{trace}"
        else:
            # %d %-5p %-60c %x - %m: log4j 2 renders the empty NDC as "[]", log4j 1 as ""
            # (hence two spaces before the dash).
            ndc = "[] " if self.w.log4j2 else " "
            text = f"{ts} {level:<5} {logger:<60} {ndc}- {msg}"
            if trace:
                text = f"{text}\n{trace}"
            if self.layout == "envelope":
                kube = self.kube_jm if tm is None else self.kube_tm[tm]
                text = (
                    f'{{"log": {json.dumps(text)}, "stream": "stdout", "time": "{_iso_ts(t)}", '
                    f'"kubernetes": {kube}}}'
                )
        key = self.key if tm is None else self.tms[tm].tm_id.encode()
        self._push(SimRecord("log", t, key, text.encode()))

    def _dispatcher(self) -> str:
        rpc = "pekko" if self.w.pekko else "akka"
        return f"flink-{rpc}.actor.default-dispatcher-{self.rng.randrange(2, 40)}"

    def _io_thread(self) -> str:
        return f"{self.w.io_thread}-{self.rng.randrange(1, 9)}"

    def records(self) -> Iterator[SimRecord]:
        """All records of this job before ``end_ms``, in event-time order."""
        self._startup()
        if self.kill_ms is not None:
            self._container_killed(self.kill_ms, self.stop_ms)
        rng = self.rng
        trigger = self.running_ms + rng.randrange(0, self.interval_ms + 1)
        checkpoint = 1
        while trigger < self.end_ms:
            self._metrics_until(trigger)
            yield from self._ready(trigger)
            if trigger >= self.stop_ms:
                # Failed over and not restarted: metrics go on, checkpoints do not.
                trigger += self.interval_ms
                continue
            done = self._cycle(checkpoint, trigger)
            checkpoint += 1
            # Fixed-rate trigger with a few ms of scheduling jitter; with one concurrent
            # checkpoint allowed, a checkpoint still pending delays the next one until it
            # completes or expires.
            trigger = max(trigger + self.interval_ms, done + rng.randrange(1, 12))
            trigger += rng.randrange(0, 4)
        self._metrics_until(self.end_ms)
        yield from self._ready(self.end_ms)

    def _ready(self, horizon: int) -> Iterator[SimRecord]:
        heap = self.heap
        while heap and heap[0][0] < horizon:
            yield heapq.heappop(heap)[2]

    # -- logs --------------------------------------------------------------------------

    def _startup(self) -> None:
        """Log the JobManager's view of the job going to RUNNING (ExecutionGraph lines)."""
        rng, t0, n = self.rng, self.start_ms, self.spec.tms_per_job
        self._log(
            t0,
            "job_state",
            "INFO",
            f"Job {self.name} ({self.job_id}) switched from state CREATED to RUNNING.",
            self._dispatcher(),
        )
        # (state, share of the start-up span after which a task reaches it): scheduling is
        # immediate, slot allocation and deployment take most of the time.
        steps = [("SCHEDULED", 0.0), ("DEPLOYING", 0.3), ("INITIALIZING", 0.6), ("RUNNING", 0.95)]
        if not self.w.initializing:
            del steps[2]
        span = self.running_ms - t0
        for task in self.tasks:
            prev = "CREATED"
            for state, share in steps:
                t = t0 + 1 + task.vertex + int(span * share) + rng.randrange(0, span // 20)
                t = min(t, self.running_ms)
                self._log(
                    t,
                    "task_state",
                    "INFO",
                    f"{task.name} ({task.subtask + 1}/{n}) ({task.attempt_id}) switched from "
                    f"{prev} to {state}.",
                    self._dispatcher(),
                )
                prev = state

    def _cycle(self, n: int, trigger: int) -> int:
        """Log checkpoint ``n`` triggered at ``trigger``; return when it completed or expired."""
        rng, w, jid = self.rng, self.w, self.job_id
        at = trigger - rng.randrange(0, 3)  # the trigger timestamp precedes the log line
        if w.trigger_type is None:
            text = f"Triggering checkpoint {n} @ {at} for job {jid}."
        else:
            text = f"Triggering checkpoint {n} (type={w.trigger_type}) @ {at} for job {jid}."
        self._log(trigger, "trigger", "INFO", text, "Checkpoint Timer")

        spike = 3.0 if rng.random() < 0.02 else 1.0
        jitter = rng.lognormvariate(0, 0.25)
        duration = int(self.base_duration_ms * jitter * spike)
        duration = min(max(duration, 5), self.max_healthy_ms)
        onsets = self.onset_ms
        # From the onset no checkpoint completes, including one already in flight.
        onset = onsets.get("checkpoint_expiry")
        if onset is not None and trigger + duration >= onset:
            return self._expire(n, trigger)
        onset = onsets.get("late_acks_skew")
        if onset is not None and trigger + duration >= onset:
            self.skew_seen += 1
            if self.skew_seen % 2 == 1:
                return self._expire(n, trigger, late="skewed")
        if self.kill_ms is not None and trigger + duration >= self.kill_ms:
            return self._lost(n, trigger)
        onset = onsets.get("checkpoint_creep")
        creeping = onset is not None and trigger >= onset
        if creeping:
            step = self.spec.creep_per_checkpoint * self.irng.uniform(0.8, 1.2)
            self.creep = min(self.creep * (1 + step), 1e6)
            duration = max(int(self.base_duration_ms * self.creep * jitter * spike), 5)
            if duration >= self.timeout_ms:
                return self._expire(n, trigger, late="stateful", would_take=duration)
        onset = onsets.get("idle_heap_leak")
        idle = onset is not None and trigger >= onset
        if idle:
            # Nothing to process: barriers pass at once and there is hardly any new state.
            duration = max(int(duration * 0.3), 5)

        self.size_bytes *= 1 + rng.gauss(0, 0.01)
        if creeping:
            self.size_bytes *= 1 + step * self.irng.uniform(0.5, 0.9)
        else:
            self.size_bytes = min(max(self.size_bytes, self.base_size * 0.5), self.base_size * 2)
        size = int(self.irng.uniform(2_000, 40_000)) if idle else int(self.size_bytes)
        if w.completed_new:
            finalization = rng.randrange(0, 6)
            done = trigger + duration + finalization
            text = (
                f"Completed checkpoint {n} for job {jid} ({size} bytes, "
                f"checkpointDuration={duration} ms, finalizationTime={finalization} ms)."
            )
        else:
            done = trigger + duration
            text = f"Completed checkpoint {n} for job {jid} ({size} bytes in {duration} ms)."
        self._log(done, "complete", "INFO", text, self._io_thread())
        self.changes.append((done, duration, size, 1, 0))
        self.consecutive_failed = 0
        self._chatter(n, trigger, done)
        return done

    def _expire(
        self,
        n: int,
        trigger: int,
        late: Literal["one_tm", "skewed", "stateful", "none"] = "one_tm",
        would_take: int = 0,
    ) -> int:
        """Checkpoint ``n`` never completes: expiry, the 1.15+ WARN, late acknowledgements.

        ``late`` says who acknowledges after the expiry: ``one_tm`` 1-3 tasks of the
        skewed TaskManager; ``skewed`` 3-6 tasks, ~80% of them on the skewed TaskManager;
        ``stateful`` the co-process subtasks still busy when the checkpoint would have
        completed (``would_take`` ms after the trigger); ``none`` nobody.
        """
        rng, w, jid = self.rng, self.w, self.job_id
        expired = trigger + self.timeout_ms
        self._log(
            expired,
            "expire",
            "INFO",
            f"Checkpoint {n} of job {jid} expired before completing.",
            "Checkpoint Timer",
        )
        last = expired
        if w.failure_manager_warn:
            last = expired + rng.randrange(0, 3)
            trace = (
                "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired "
                "before completing.\n\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator"
                f"$CheckpointCanceller.run(CheckpointCoordinator.java:{w.expire_line}){w.frame_jar}\n"
                f"{_JDK_FRAMES}"
            )
            self._log(
                last,
                "failure",
                "WARN",
                f"Failed to trigger or complete checkpoint {n} for job {jid}. "
                f"({self.consecutive_failed} consecutive failed attempts so far)",
                "Checkpoint Timer",
                trace,
            )
        self.consecutive_failed += 1
        self.changes.append((expired, 0, 0, 0, 1))

        acks: list[tuple[int, _Task]] = []
        skewed = self.skewed_tm
        if late == "one_tm":
            # All from the skewed TaskManager: its co-process task (the one behind on
            # barrier alignment) first, then its sources.
            on_tm = [t for t in self.tasks if t.subtask == skewed]
            on_tm.sort(key=lambda t: t.is_source)
            tasks = on_tm[: rng.randint(1, 3)]
            times = sorted(last + rng.randrange(300, 6000) for _ in tasks)
            acks = list(zip(times, tasks, strict=True))
        elif late == "skewed":
            # The skewed TaskManager's tasks (a subtask acknowledges once, so it sends at
            # most one per task), and per each of them one more from another TaskManager
            # with probability 1/4: 80% from the skewed one on average, 3-6 in all with
            # one slot per TaskManager. The others were only a little late; the skewed
            # ones straggle further behind.
            on_tm = [t for t in self.tasks if t.subtask == skewed]
            others = [t for t in self.tasks if t.subtask != skewed]
            n_skewed = min(rng.randint(3, 6), len(on_tm))
            n_other = min(sum(rng.random() < 0.25 for _ in range(n_skewed)), len(others))
            acks = [(last + rng.randrange(200, 2500), t) for t in rng.sample(others, n_other)]
            acks += [(last + rng.randrange(800, 6000), t) for t in rng.sample(on_tm, n_skewed)]
        elif late == "stateful":
            # Slow state uploads: the co-process subtasks (the ones with keyed state) finish
            # their snapshots at about the time the whole checkpoint would have taken (or,
            # far into the creep, give up on it when the next checkpoint's barrier comes).
            span = min(would_take, self.timeout_ms * 3 // 2)
            for task in self.tasks:
                if task.vertex == 2:
                    t = trigger + int(span * rng.uniform(0.85, 1.0))
                    if t > expired:
                        acks.append((max(t, last + 1), task))
        acks.sort(key=lambda a: a[0])
        for t, task in acks:
            if w.late_with_location:
                text = (
                    f"Received late message for now expired checkpoint attempt {n} from task "
                    f"{task.attempt_id} of job {jid} at {self.tms[task.subtask].location}."
                )
            else:
                text = (
                    f"Received late message for now expired checkpoint attempt {n} from "
                    f"{task.attempt_id} of job {jid}."
                )
            self._log(t, "late", "WARN", text, self._io_thread())
        return expired

    def _container_killed(self, kill: int, failover: int) -> None:
        """Log TaskManager 0's end (idle_heap_leak): YARN kills it, the JobMaster gives up.

        The JobManager log gets the ResourceManager's report of the completed container
        with Hadoop 3's diagnostics (YARN jobs only: no Kubernetes wording is verified),
        then, at ``failover``, the JobMaster's heartbeat timeout (logged from 1.14; before,
        only the exception of the task failures shows it) and its tasks' failures.
        """
        irng, w, ver = self.irng, self.w, self.ver
        tm = self.tms[0]
        st = self.tm_states[0]
        rpc = "pekko" if w.pekko else "akka"

        def dispatcher() -> str:
            return f"flink-{rpc}.actor.default-dispatcher-{irng.randrange(2, 40)}"

        # The ResourceID with metadata (1.12+, YARN: the NodeManager address).
        rid = f"{tm.tm_id}({tm.host}:8041)" if ver >= (1, 12) and not self.k8s else tm.tm_id
        if not self.k8s:
            gib = 2**30
            # A TaskManager process is about twice its heap plus managed and network memory.
            limit = (2 * max(1, round(st.heap_max / gib)) + 1) * gib
            vlimit = int(limit * 2.1)  # yarn.nodemanager.vmem-pmem-ratio
            # Killed as soon as it is over (the check runs every 3 s): "3.0 GB of 3 GB".
            over = irng.randrange(2**20, 40 * 2**20)
            vused = int(vlimit * irng.uniform(0.93, 0.99))
            pid = irng.randrange(10_000, 60_000)
            app = "application_" + "_".join(tm.tm_id.split("_")[2:4])
            java = (
                f"/usr/lib/jvm/java-openjdk/bin/java -Xmx{st.heap_max} -Xms{st.heap_max} "
                "-XX:MaxMetaspaceSize=268435456 "
                f"-Dlog.file=/var/log/hadoop-yarn/containers/{app}/{tm.tm_id}/taskmanager.log "
                "-Dlog4j.configuration=file:./log4j.properties "
                "-Dlog4j.configurationFile=file:./log4j.properties "
                "org.apache.flink.yarn.YarnTaskExecutorRunner --configDir ."
            )
            diagnostics = (
                f"{_hadoop_ts(kill)}Container [pid={pid},containerID={tm.tm_id}] is running "
                f"{over}B beyond the 'PHYSICAL' memory limit. Current usage: "
                f"{_hadoop_size(limit + over)} of {_hadoop_size(limit)} physical memory used; "
                f"{_hadoop_size(vused)} of {_hadoop_size(vlimit)} virtual memory used. "
                f"Killing container.\nDump of the process-tree for {tm.tm_id} :\n"
                "\t|- PID PPID PGRPID SESSID CMD_NAME USER_MODE_TIME(MILLIS) SYSTEM_TIME(MILLIS) "
                "VMEM_USAGE(BYTES) RSSMEM_USAGE(PAGES) FULL_CMD_LINE\n"
                f"\t|- {pid} {pid - 2} {pid} {pid} (java) {irng.randrange(10**5, 10**7)} "
                f"{irng.randrange(10**4, 10**6)} {vused} {(limit + over) // 4096} {java}\n"
                f"{_hadoop_ts(kill + 14)}Container killed on request. Exit code is 143\n"
                f"{_hadoop_ts(kill + 21)}Container exited with a non-zero exit code 143. "
            )
            if ver < (1, 12):
                text = f"Closing TaskExecutor connection {tm.tm_id} because: {diagnostics}"
            elif ver < (1, 14):
                text = f"Worker {tm.tm_id} is terminated. Diagnostics: {diagnostics}"
            else:
                text = (
                    f"Worker {tm.tm_id} is terminated. Diagnostics: Container {tm.tm_id} "
                    f"marked as failed.\n Exit code:-104.\n Diagnostics:{diagnostics}"
                )
            # YARN reports completed containers on the next allocate heartbeat (every 5 s).
            reported = kill + irng.randrange(300, 5000)
            self._log(reported, "worker_terminated", "INFO", text, dispatcher())

        timeout = f"Heartbeat of TaskManager with id {rid} timed out."
        t = failover
        if ver >= (1, 14):
            self._log(t, "tm_heartbeat_timeout", "INFO", timeout, dispatcher())
        if ver >= (1, 16):
            t += 1
            self._log(
                t,
                "tm_disconnect",
                "INFO",
                f"Disconnect TaskExecutor {rid} because: {timeout}",
                dispatcher(),
            )
        jar = w.frame_jar if w.log4j2 else ""
        jdk = " [?:?]" if w.log4j2 else ""
        jm_line = 1149 if ver < (1, 10) else 1299 if ver < (1, 14) else 1641
        monitor = (
            "HeartbeatMonitorImpl.run(HeartbeatMonitorImpl.java:109)"
            if ver < (1, 14)
            else "DefaultHeartbeatMonitor.run(DefaultHeartbeatMonitor.java:158)"
        )
        actor = "pekko.PekkoRpcActor" if w.pekko else "akka.AkkaRpcActor"
        trace = (
            f"java.util.concurrent.TimeoutException: {timeout}\n"
            "\tat org.apache.flink.runtime.jobmaster.JobMaster$TaskManagerHeartbeatListener."
            f"notifyHeartbeatTimeout(JobMaster.java:{jm_line}){jar}\n"
            f"\tat org.apache.flink.runtime.heartbeat.{monitor}{jar}\n"
            f"\tat java.util.concurrent.Executors$RunnableAdapter.call(Executors.java:515){jdk}\n"
            f"\tat java.util.concurrent.FutureTask.run(FutureTask.java:264){jdk}\n"
            f"\tat org.apache.flink.runtime.rpc.{actor}.handleRunAsync("
            f"{actor.split('.')[1]}.java:440){jar}"
        )
        n = self.spec.tms_per_job
        for task in self.tasks:
            if task.subtask != tm.index:
                continue
            t += irng.randrange(1, 10)
            head = (
                f"{task.name} ({task.subtask + 1}/{n}) ({task.attempt_id}) switched from RUNNING "
                "to FAILED"
            )
            if ver < (1, 11):
                text = f"{head}."
            elif ver < (1, 12):
                slot = f"{irng.getrandbits(31):x}"
                slot = f"org.apache.flink.runtime.jobmaster.slotpool.SingleLogicalSlot@{slot}"
                text = f"{head} on {slot}."
            else:
                text = f"{head} on {tm.location}."
            self._log(t, "task_state", "INFO", text, dispatcher(), trace)

    def _lost(self, n: int, trigger: int) -> int:
        """Checkpoint ``n`` needs a TaskManager that was killed: it cannot complete.

        It expires if the timeout comes first, else it is aborted (silently, counted as
        failed) when the heartbeat timeout fails the job over.
        """
        if trigger + self.timeout_ms < self.stop_ms:
            return self._expire(n, trigger, late="none")
        self.changes.append((self.stop_ms, 0, 0, 0, 1))
        return self.stop_ms

    def _chatter(self, n: int, trigger: int, done: int) -> None:
        """INFO lines other classes log when a checkpoint completes, plus a rare WARN."""
        rng, w, tasks_per_vertex = self.rng, self.w, self.spec.tms_per_job
        budget = self.spec.chatter_per_checkpoint
        if w.kafka_source:
            for source in (self.main_source, self.side_source)[:budget]:
                self._log(
                    done + rng.randrange(1, 8),
                    "source_done",
                    "INFO",
                    f"Marking checkpoint {n} as completed for source {source}.",
                    f"SourceCoordinator-{source}",
                )
                budget -= 1
        if w.legacy_sink and budget > 0:
            # Every sink subtask commits its transaction; rotate which ones are shown.
            sinks = [t for t in self.tasks if t.vertex == 2]
            for j in range(min(budget, len(sinks))):
                task = sinks[(n + j) % len(sinks)]
                k = task.subtask
                # FlinkKafkaProducer cycles through a pool of 5 transactional ids per subtask,
                # and each reuse re-initialises the producer, which bumps its epoch.
                txn = k * 5 + n % 5
                tid = f"{task.name}-{self.sink_uid}-{txn}"
                # The transaction began when the previous checkpoint's snapshot was taken.
                txn_start = max(trigger - self.interval_ms, self.running_ms) + rng.randrange(1, 40)
                holder = (
                    f"TransactionHolder{{handle=KafkaTransactionState [transactionalId={tid}, "
                    f"producerId={self.producer_id_base + txn}, epoch={n // 5}], "
                    f"transactionStartTime={txn_start}}}"
                )
                thread = f"{task.name} ({k + 1}/{tasks_per_vertex})" + (
                    "#0" if w.attempt_suffix else ""
                )
                self._log(
                    done + rng.randrange(5, 60),
                    "txn_commit",
                    "INFO",
                    f"FlinkKafkaProducer {k + 1}/{tasks_per_vertex} - checkpoint {n} complete, "
                    f"committing transaction {holder} from checkpoint {n}",
                    thread,
                    tm=k,
                )
        if rng.random() < 0.01:
            # The Kafka group coordinator moved: one source subtask's async offset commit fails.
            k = rng.randrange(tasks_per_vertex)
            suffix = "#0" if w.attempt_suffix else ""
            if w.kafka_source:
                site, text = (
                    "commit_failed_reader",
                    f"Failed to commit consumer offsets for checkpoint {n}",
                )
                thread = f"{self.main_source} -> Map ({k + 1}/{tasks_per_vertex}){suffix}"
            else:
                site, text = (
                    "commit_failed_legacy",
                    f"Consumer subtask {k} failed async Kafka commit.",
                )
                thread = f"Kafka Fetcher for {self.main_source} -> Map ({k + 1}/{tasks_per_vertex})"
            t = done + rng.randrange(20, 400)
            self._log(t, site, "WARN", text, thread, _COMMIT_FAILURE_TRACE, tm=k)

    # -- metrics -----------------------------------------------------------------------

    def _init_metrics(self, start_ms: int) -> None:
        # Metric noise has its own generators (this one for the setup, one per TaskManager
        # for its samples) so injecting an incident (which changes how much randomness the
        # log side, or one TaskManager, draws) does not reshuffle every other metric value.
        self.mrng = rng = random.Random(f"{self.spec.seed}/metrics/{self.index}")
        self.metric_ms = round(self.spec.metric_interval_s * 1000)
        jm_labels = {
            "host": _label(self.jm_host),
            "job_id": self.job_id,
            "job_name": _label(self.name),
        }
        jm_url = f"http://{self.jm_host}:9249/metrics"

        def job_series(name: str) -> _Series:
            return _Series.of(
                f"flink_jobmanager_job_{name}", jm_labels, self.job_id, self.telegraf, jm_url
            )

        self.s_duration = job_series("lastCheckpointDuration")
        self.s_size = job_series("lastCheckpointSize")
        self.s_completed = job_series("numberOfCompletedCheckpoints")
        self.s_failed = job_series("numberOfFailedCheckpoints")
        self.next_job_tick = self.running_ms + rng.randrange(0, self.metric_ms)

        gib = 1024 * 1024 * 1024
        heap_max = int(rng.choice((1, 2, 4)) * gib * rng.uniform(0.9, 0.97)) // 2**20 * 2**20
        self.tm_states = [
            self._tm_state(tm, heap_max, start_ms + rng.randrange(1000, 3000)) for tm in self.tms
        ]
        onset = self.onset_ms.get("idle_heap_leak")
        if onset is not None:
            self._plan_leak(onset)

    def _plan_leak(self, onset: int) -> None:
        """Make the job idle from ``onset`` and TaskManager 0 leak until it is killed."""
        irng = self.irng
        for st in self.tm_states:
            st.idle_ms = onset
            # An idle TaskManager still allocates (timers, heartbeats, metrics, empty
            # polls), only less: a smaller, slower sawtooth, each cycle 1-2 minutes.
            st.idle_band = (st.ceiling - st.floor) * irng.uniform(0.3, 0.5)
            st.idle_growth = st.idle_band / irng.uniform(60, 120)
        leaking = self.tm_states[0]
        leaking.leak_ms = onset
        leaking.leak_per_ms = self.spec.heap_leak_mb_per_h * 2**20 / 3_600_000
        # Killed when the floor reaches the maximum: no collection frees anything anymore.
        kill = onset + math.ceil((leaking.heap_max - leaking.floor) / leaking.leak_per_ms)
        # The JobMaster heard from it last up to one heartbeat interval (10 s) before the
        # kill, and gives up heartbeat.timeout (50 s) after that.
        failover = kill + irng.randrange(40_000, 50_000)
        self.kill_ms, self.stop_ms = kill, failover
        leaking.dead_ms = kill
        for st in self.tm_states:
            st.tasks_until_ms = failover

    def _tm_state(self, tm: _TaskManager, heap_max: int, first_ms: int) -> _TmState:
        rng = self.mrng
        labels = {"host": _label(tm.host), "tm_id": _label(tm.tm_id)}
        url = f"http://{tm.host}:9249/metrics"

        def series(name: str, labels: dict[str, str] = labels) -> _Series:
            return _Series.of(f"flink_taskmanager_{name}", labels, tm.tm_id, self.telegraf, url)

        tasks = []
        for task in self.tasks:
            if task.subtask == tm.index:
                task_labels = {
                    **labels,
                    "job_id": self.job_id,
                    "job_name": _label(self.name),
                    "task_id": task.vertex_id,
                    "task_name": _label(task.name),
                    "task_attempt_id": task.attempt_id,
                    "task_attempt_num": "0",
                    "subtask_index": str(task.subtask),
                }
                tasks.append(
                    _TaskSeries(
                        task,
                        series("job_task_numRecordsInPerSecond", task_labels),
                        series("job_task_numRecordsOutPerSecond", task_labels),
                        series("job_task_numRecordsIn", task_labels),
                        series("job_task_numRecordsOut", task_labels),
                    )
                )
        floor = heap_max * rng.uniform(0.12, 0.3)
        ceiling = heap_max * rng.uniform(0.6, 0.85)
        gc_count = rng.randrange(0, 50)
        return _TmState(
            next_ms=first_ms + rng.randrange(0, self.metric_ms),
            used=rng.uniform(floor, ceiling),
            floor=floor,
            ceiling=ceiling,
            # One collection every 40-150 s: several in any 5-minute window, so the floor
            # (the lowest sample of a window) is always a post-GC value.
            growth=(ceiling - floor) / rng.uniform(40, 150),
            heap_max=heap_max,
            gc_count=gc_count,
            gc_time=gc_count * rng.randrange(8, 25),
            phase=rng.uniform(0, 2 * math.pi),
            s_used=series("Status_JVM_Memory_Heap_Used"),
            s_max=series("Status_JVM_Memory_Heap_Max"),
            s_gc_count=series("Status_JVM_GarbageCollector_G1_Young_Generation_Count"),
            s_gc_time=series("Status_JVM_GarbageCollector_G1_Young_Generation_Time"),
            tasks=tuple(tasks),
            last_ms=self.running_ms,
            rng=random.Random(f"{self.spec.seed}/metrics/{self.index}/tm/{tm.index}"),
        )

    def _metrics_until(self, horizon: int) -> None:
        """Queue every metric sample before ``horizon``."""
        step, end = self.metric_ms, self.end_ms
        while self.next_job_tick < horizon and self.next_job_tick < end:
            t = self.next_job_tick
            changes = self.changes
            while changes and changes[0][0] <= t:
                _, dur, size, ok, fail = changes.popleft()
                if ok:
                    self.last_duration, self.last_size = dur, size
                self.completed += ok
                self.failed += fail
            self._push(self.s_duration.record(t, str(self.last_duration)))
            self._push(self.s_size.record(t, str(self.last_size)))
            self._push(self.s_completed.record(t, str(self.completed)))
            self._push(self.s_failed.record(t, str(self.failed)))
            self.next_job_tick += step
        for st in self.tm_states:
            stop = min(horizon, end, st.dead_ms)
            while st.next_ms < stop:
                self._tm_sample(st, st.next_ms)
                st.next_ms += step

    def _tm_sample(self, st: _TmState, t: int) -> None:
        rng = st.rng
        busy = t < st.idle_ms
        if busy:
            # Heap: allocation grows it steadily; a GC drops it back near the floor (sawtooth).
            used = st.used + st.growth * (self.metric_ms / 1000) * rng.uniform(0.7, 1.3)
            if used > st.ceiling:
                used = st.floor * rng.uniform(0.95, 1.1) + (used - st.ceiling) * 0.2
                st.gc_count += 1
                st.gc_time += rng.randrange(5, 60)
        else:
            used = self._idle_heap(st, t)
        st.used = used
        self._push(st.s_used.record(t, str(int(used))))
        self._push(st.s_max.record(t, str(st.heap_max)))
        self._push(st.s_gc_count.record(t, str(st.gc_count)))
        self._push(st.s_gc_time.record(t, str(st.gc_time)))
        if t >= st.tasks_until_ms:
            return
        elapsed_s = max(t - st.last_ms, 0) / 1000
        st.last_ms = max(st.last_ms, t)
        if not busy:
            # Idle: meters read 0 and counters stand still.
            for ts in st.tasks:
                self._push(ts.s_rate_in.record(t, "0.0"))
                self._push(ts.s_rate_out.record(t, "0.0"))
                self._push(ts.s_count_in.record(t, str(int(ts.count_in))))
                self._push(ts.s_count_out.record(t, str(int(ts.count_out))))
            return
        # Throughput: a slow hourly wave plus noise. A source task has no network input, so
        # its task-level numRecordsIn stays 0 (FLINK_METRICS.md §2); its output is the rate.
        wave = 1 + 0.2 * math.sin(st.phase + t / 3_600_000 * 2 * math.pi)
        main = self.records_per_s * wave * rng.uniform(0.93, 1.07)
        side = self.side_per_s * rng.uniform(0.5, 1.5)
        for ts in st.tasks:
            vertex = ts.task.vertex
            if vertex == 0:
                rate_in, rate_out = 0.0, main
            elif vertex == 1:
                rate_in, rate_out = 0.0, side
            else:
                rate_in = main + side
                rate_out = main * rng.uniform(0.97, 1.0)
            ts.count_in += rate_in * elapsed_s
            ts.count_out += rate_out * elapsed_s
            self._push(ts.s_rate_in.record(t, f"{rate_in:.1f}"))
            self._push(ts.s_rate_out.record(t, f"{rate_out:.1f}"))
            self._push(ts.s_count_in.record(t, str(int(ts.count_in))))
            self._push(ts.s_count_out.record(t, str(int(ts.count_out))))

    def _idle_heap(self, st: _TmState, t: int) -> float:
        """Heap used of an idle TaskManager at ``t`` (its floor rising if it leaks)."""
        rng = st.rng
        floor = st.floor + st.leak_per_ms * max(t - st.leak_ms, 0)
        ceiling = min(floor + st.idle_band, st.heap_max)
        alloc = st.idle_growth * (self.metric_ms / 1000) * rng.uniform(0.7, 1.3)
        # What leaked since the last sample is live: it adds to the heap and stays.
        used = max(st.used + alloc + st.leak_per_ms * self.metric_ms, floor)
        if used > ceiling:
            # The floor is what survives a collection, so it comes back within 1%. The less
            # room above it, the more collections it takes to make room for the same
            # allocation, and the longer each one (a heap nearly full of live objects).
            room = max(ceiling - floor, 2**20)
            collections = min(max(1, int(alloc / room)), 1000)
            slow = 1 + 20 * max(floor / st.heap_max - 0.8, 0)
            st.gc_count += collections
            st.gc_time += int(collections * rng.randrange(5, 60) * slow)
            used = floor * rng.uniform(1.0, 1.01) + min(used - ceiling, alloc) * 0.05
        return min(used, st.heap_max)


def generate(spec: FleetSpec, start_ms: int, duration_s: float) -> Iterator[SimRecord]:
    """All records of the fleet from ``start_ms`` for ``duration_s``, in event-time order.

    Deterministic: the same spec and start give the same records. Lazy: records are
    produced as they are consumed, with memory bounded by about one checkpoint cycle
    per job. Records with equal times keep a stable order.

    Args:
        spec: The fleet and its incidents.
        start_ms: Event time of the start, epoch milliseconds UTC.
        duration_s: Simulated seconds; records at or after ``start_ms + duration`` are cut.

    Returns:
        An iterator of :class:`SimRecord`, ``time_ms`` non-decreasing.

    Raises:
        ValueError: ``duration_s`` is negative.

    """
    if duration_s < 0:
        msg = f"duration_s must be >= 0, got {duration_s}"
        raise ValueError(msg)
    end_ms = start_ms + round(duration_s * 1000)
    jobs = [_Job(spec, i, start_ms, end_ms) for i in range(spec.jobs)]
    return heapq.merge(*(j.records() for j in jobs), key=attrgetter("time_ms"))


# --- producer --------------------------------------------------------------------------

_PROGRESS_EVERY = 1000


def produce(
    records: Iterable[SimRecord],
    bootstrap: str,
    logs_topic: str,
    metrics_topic: str,
    realtime: bool = False,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Send records to Kafka; log records to ``logs_topic``, metrics to ``metrics_topic``.

    The Kafka timestamp of each record is its event time. The producer is idempotent
    (kafka-python's default), so a key's records stay in order across retries.

    Args:
        records: What to send, usually :func:`generate`'s output.
        bootstrap: Kafka bootstrap servers, ``host:port[,host:port]``.
        logs_topic: Topic of ``stream == "log"`` records.
        metrics_topic: Topic of ``stream == "metric"`` records.
        realtime: Pace the records: each is sent at the wall-clock start plus its offset
            from the first record's ``time_ms``.
        progress: Called with the number of records sent so far, every 1,000 records,
            after each pause when pacing, and once at the end.

    Returns:
        The number of records sent.

    Raises:
        ProduceError: Kafka rejected a record (raised after the flush).

    """
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=256 * 1024)
    failures: list[tuple[str, BaseException]] = []

    def on_error(topic: str) -> Callable[[BaseException], None]:
        def record(exc: BaseException) -> None:
            failures.append((topic, exc))

        return record

    on_log_error, on_metric_error = on_error(logs_topic), on_error(metrics_topic)
    sent = 0
    first_ms: int | None = None
    wall0 = 0.0
    try:
        for rec in records:
            if realtime:
                if first_ms is None:
                    first_ms, wall0 = rec.time_ms, time.monotonic()
                delay = wall0 + (rec.time_ms - first_ms) / 1000 - time.monotonic()
                if delay > 0.001:
                    time.sleep(delay)
                    if progress is not None:
                        progress(sent)
            is_log = rec.stream == "log"
            future = producer.send(
                logs_topic if is_log else metrics_topic,
                value=rec.value,
                key=rec.key,
                timestamp_ms=rec.time_ms,
            )
            future.add_errback(on_log_error if is_log else on_metric_error)
            sent += 1
            if progress is not None and sent % _PROGRESS_EVERY == 0:
                progress(sent)
        producer.flush()
    finally:
        producer.close()
    if failures:
        topic, exc = failures[0]
        msg = f"kafka rejected {len(failures)} of {sent} records; first to topic={topic}: {exc}"
        raise ProduceError(msg, topic) from exc
    if progress is not None:
        progress(sent)
    return sent
