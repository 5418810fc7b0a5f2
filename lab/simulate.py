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
a checkpoint incident keeps going instead of failing the job over. Incidents that
lose a process do fail it over, and the job recovers as Flink's does: region
failover (one region: the keyed exchanges connect every task), RUNNING -> RESTARTING
-> RUNNING after a 10 s fixed delay, the latest completed checkpoint restored, every
task redeployed with new attempt ids (a lost TaskManager replaced by the next
container or pod), checkpoint ids going on. Incidents (see :class:`Incident`) change a
job from their onset only: its records before the onset are the same as without them.
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
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache, partial
from operator import attrgetter
from typing import Any, Literal, get_args

from kafka import KafkaProducer

from conf.errors import FlinkwatchError

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

IncidentKind = Literal[
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
]

#: Incident kinds :func:`generate` knows how to inject.
INCIDENT_KINDS: frozenset[str] = frozenset(get_args(IncidentKind))

# Kinds that fail the job over. A job takes at most one of them: each plans its own
# failovers and restarts, and two plans would have to be merged.
_FAILOVER_KINDS = frozenset(
    {
        "idle_heap_leak",
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
              maximum, the container is killed (YARN: the Hadoop ``beyond the 'PHYSICAL'
              memory limit`` diagnostics with ``Container killed on request. Exit code is
              143``, as the job's version reports them; Kubernetes: the pod
              ``reason=OOMKilled``), its metrics stop, and 40-50 s later the JobMaster's
              heartbeat to it times out and the job fails over: its tasks fail, the job
              goes RUNNING -> RESTARTING -> RUNNING, is restored from its latest
              checkpoint and redeployed on a new TaskManager, which leaks in turn.
            * ``late_acks_skew``: every second checkpoint expires (the first one at or
              after the onset does), each followed by 3-6 late acknowledgements, about
              80% of them from tasks on one TaskManager, the rest from the others
              (seed 002). Needs ``tms_per_job >= 2``.
            * ``checkpoint_declines``: from the onset every checkpoint is declined by a
              stateful task whose snapshot cannot be written (YARN: the HDFS quota of the
              checkpoint directory is used up; Kubernetes: S3 refuses the upload): the
              ``Decline checkpoint`` line in the version's wording (location from 1.9,
              cause from 1.12), ``Discarding checkpoint`` (1.7-1.10) or the
              CheckpointFailureManager's WARN with ``Asynchronous task checkpoint failed.``
              (1.15+). The job keeps running.
            * ``state_growth`` (seed 000): state on a heap backend grows by the same
              amount every checkpoint; sizes and durations follow, and so do
              the TaskManagers' heap floors and GC times, until the fullest TaskManager
              thrashes ``state_growth_fill_s`` after the onset. It stops answering; 50 s
              later the ResourceManager's and JobMaster's heartbeats time out and the job
              fails over; then it logs ``OutOfMemoryError: GC overhead limit exceeded``
              under FatalExitExceptionHandler's FATAL line and exits. The job restarts on
              a new TaskManager from its latest checkpoint; the state then shrinks back.
            * ``tm_memory_kill``: at the onset TaskManager 0's container is killed for
              memory (off-heap, so its heap looks normal), with ``idle_heap_leak``'s
              kill, heartbeat timeout and restart, once.
            * ``tm_heap_oom``, ``tm_direct_oom``: TaskManager 0's JVM runs out of heap
              (``Java heap space``) or direct memory (``Direct buffer memory``) in an
              RPC thread: FATAL, exit code 239, the ResourceManager reports the exit,
              the JobMaster's heartbeat times out 40-50 s later, the job restarts.
            * ``tm_metaspace_oom``: a task on TaskManager 0 fails with
              ``OutOfMemoryError: Metaspace`` (Flink's enriched message from 1.11), the
              TaskManager shuts itself down (exit code 1), the job fails over at once
              and restarts on a new TaskManager.
            * ``k8s_watch_crash``, ``k8s_watch_crash_no_ha`` (seed 003): the JobManager's
              pods watch fails with ``too old resource version``, which Flink 1.10.2 to
              1.12.1 treat as fatal: ``Fatal error occurred in ResourceManager.``,
              ``Fatal error occurred in the cluster entrypoint.``, the process exits and
              Kubernetes restarts it (entrypoint start lines). With HA the job is
              recovered from its latest checkpoint; without, it is submitted again under
              a new job id (:func:`job_id` with ``run=1``) and starts from nothing
              (``No checkpoint found during restore.``). Needs a job on Kubernetes that
              runs 1.10 or 1.11.
            * ``restart_storm`` (seed 004): the last TaskManager's network flaps: its
              heartbeat times out, then every restart's deployment to it times out
              (``AskTimeoutException``): four failovers in about 2.5 minutes under an
              exponential-delay restart strategy; then the JobManager loses its
              ZooKeeper leadership (``lost leadership``), the job is suspended, the
              flapping TaskManager dies of a ``RegistrationTimeoutException``, and the
              job only runs again about 5.5 minutes later, restored on a new
              TaskManager.

            A job takes at most one of the kinds that fail it over (all but
            ``checkpoint_expiry``, ``checkpoint_creep``, ``late_acks_skew`` and
            ``checkpoint_declines``). Replacement TaskManagers are named by
            :func:`tm_id` with indexes from ``tms_per_job`` on.
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
        first_job: Index of the first job: the fleet's jobs are ``first_job`` to
            ``first_job + jobs - 1`` (indexes decide ids, names, layout, deployment and
            version), so fleets with different settings can run side by side.
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
        state_growth_fill_s: How long after a ``state_growth`` onset the fullest
            TaskManager's heap is full (its live set at 90% of the maximum).

    Example:
        >>> spec = FleetSpec(jobs=4, incidents=(Incident("checkpoint_expiry", 0, 120.0),))
        >>> records = list(generate(spec, start_ms=1_700_000_000_000, duration_s=600))

    """

    jobs: int = 3
    first_job: int = 0
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
    state_growth_fill_s: float = 1200.0

    def __post_init__(self) -> None:
        if self.first_job < 0:
            msg = f"first_job must be >= 0, got {self.first_job}"
            raise ValueError(msg)
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
            "state_growth_fill_s",
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
            if not self.first_job <= inc.job_index < self.first_job + self.jobs:
                msg = (
                    f"incident job_index {inc.job_index} is not one of the fleet's jobs "
                    f"{self.first_job}..{self.first_job + self.jobs - 1}"
                )
                raise ValueError(msg)
            if inc.onset_s < 0:
                msg = f"incident onset_s must be >= 0, got {inc.onset_s}"
                raise ValueError(msg)
            if inc.kind == "late_acks_skew" and self.tms_per_job < 2:
                msg = "late_acks_skew needs tms_per_job >= 2 (a skewed TaskManager and others)"
                raise ValueError(msg)
            if inc.kind.startswith("k8s_watch_crash"):
                ver = _parse_version(self.flink_versions[inc.job_index % len(self.flink_versions)])
                if not _on_k8s(inc.job_index) or not (1, 10) <= ver <= (1, 11):
                    msg = (
                        f"{inc.kind} needs a job on Kubernetes (index % 4 in 2, 3) running Flink "
                        f"1.10 or 1.11 (1.12.2+ re-creates the watch, FLINK-20417); job "
                        f"{inc.job_index} runs {ver[0]}.{ver[1]} on "
                        f"{'Kubernetes' if _on_k8s(inc.job_index) else 'YARN'}"
                    )
                    raise ValueError(msg)
        for i in {c.job_index for c in self.incidents}:
            kinds = sorted({c.kind for c in self.incidents if c.job_index == i} & _FAILOVER_KINDS)
            if len(kinds) > 1:
                msg = f"job {i} has more than one incident that fails it over: {kinds}"
                raise ValueError(msg)


class ProduceError(FlinkwatchError):
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


def job_id(spec: FleetSpec, index: int, run: int = 0) -> str:
    """Return the job id (32 lowercase hex) of job ``index``; it depends on ``spec.seed`` only.

    ``run`` counts submissions: a JobManager without high availability that restarts
    (``k8s_watch_crash_no_ha``) submits the job again under a new id, ``run=1``.
    """
    if run == 0:
        return _hex32(spec.seed, "job", index)
    return _hex32(spec.seed, "job", index, "run", run)


def job_name(spec: FleetSpec, index: int) -> str:
    """Return the name of job ``index``, e.g. ``"orders-enrichment-0"``."""
    return f"{_JOB_TEMPLATES[index % len(_JOB_TEMPLATES)][0]}-{index}"


def _on_k8s(index: int) -> bool:
    return index % 4 in _K8S_SLOTS


def tm_id(spec: FleetSpec, job_index: int, tm_index: int) -> str:
    """Return the resource id of TaskManager ``tm_index`` of job ``job_index``.

    A YARN container id (``container_e05_1699999999999_0042_01_000003``) for jobs on
    YARN, a pod name (``orders-enrichment-2-taskmanager-1-2``) for jobs on Kubernetes.
    Indexes from ``spec.tms_per_job`` on name the TaskManagers started to replace lost
    ones, in the order they were started (the next container or pod of the same
    ResourceManager).
    """
    if tm_index < 0:
        msg = f"tm_index must be >= 0, got {tm_index}"
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
    (1, 10): "1.10.3",
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
    "tm_signal": ("org.apache.flink.yarn.YarnTaskExecutorRunner", "SignalHandler.java", "58"),
    "region_failover": (
        "org.apache.flink.runtime.executiongraph.failover.flip1.RestartPipelinedRegionFailoverStrategy",
        "RestartPipelinedRegionFailoverStrategy.java",
        "95",
    ),
    "restart_tasks": (_JM, "DefaultScheduler.java", "397"),
    "restore": (_CC, "CheckpointCoordinator.java", "1654"),
    "decline": (_CC, "CheckpointCoordinator.java", "1011"),
    "discard": (_CC, "CheckpointCoordinator.java", "1345"),
    "task_executor": (
        "org.apache.flink.runtime.taskexecutor.TaskExecutor",
        "TaskExecutor.java",
        "2266",
    ),
    "tm_runner": (
        "org.apache.flink.runtime.taskexecutor.TaskManagerRunner",
        "TaskManagerRunner.java",
        "322",
    ),
    "tm_task": ("org.apache.flink.runtime.taskmanager.Task", "Task.java", "1074"),
    "entrypoint": (
        "org.apache.flink.runtime.entrypoint.ClusterEntrypoint",
        "ClusterEntrypoint.java",
        "112",
    ),
    "blob": ("org.apache.flink.runtime.blob.BlobServer", "BlobServer.java", "345"),
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


def _sites_of(ver: tuple[int, int], k8s: bool) -> dict[str, tuple[str, str, str]]:
    """:data:`_SITES` as a job of version ``ver`` on YARN or Kubernetes logs them."""
    sites = dict(_SITES)
    if ver >= (1, 13):
        # The job's state is logged by DefaultExecutionGraph, under ExecutionGraph's logger.
        sites["job_state"] = (_EG, "DefaultExecutionGraph.java", "1114")
    # ResourceManager lines carry the concrete class's logger (RpcEndpoint uses getClass()).
    if ver >= (1, 12):
        rm = _ARM
    elif k8s:
        rm = "org.apache.flink.kubernetes.KubernetesResourceManager"
    else:
        rm = "org.apache.flink.yarn.YarnResourceManager"
    if ver < (1, 12):
        # 1.5-1.11 log "Closing TaskExecutor connection" from ResourceManager.java.
        sites["worker_terminated"] = (rm, "ResourceManager.java", "1087")
    sites["rm_heartbeat"] = (rm, "ResourceManager.java", "1228")
    sites["rm_close"] = (rm, "ResourceManager.java", "1087")
    sites["rm_fatal"] = (rm, "ResourceManager.java", "1062")
    if ver >= (1, 14):
        feeh = "org.apache.flink.util.FatalExitExceptionHandler"
    else:
        feeh = "org.apache.flink.runtime.util.FatalExitExceptionHandler"
    sites["fatal_exit"] = (feeh, "FatalExitExceptionHandler.java", "51")
    if ver < (1, 11):
        leadership = (
            "org.apache.flink.runtime.jobmaster.JobManagerRunner",
            "JobManagerRunner.java",
        )
    elif ver < (1, 13):
        leadership = (
            "org.apache.flink.runtime.jobmaster.JobManagerRunnerImpl",
            "JobManagerRunnerImpl.java",
        )
    else:
        leadership = (
            "org.apache.flink.runtime.jobmaster.JobMasterServiceLeadershipRunner",
            "JobMasterServiceLeadershipRunner.java",
        )
    sites["jm_leadership"] = (*leadership, "288")
    return sites


_FLINK_EXC = "org.apache.flink.util.FlinkException"

# Flink 1.11+ rewrites a TaskManager's Metaspace OutOfMemoryError in place (FLINK-15989).
_ENRICHED_METASPACE = (
    "Metaspace. The metaspace out-of-memory error has occurred. This can mean two things: "
    "either the job requires a larger size of JVM metaspace to load classes or there is a "
    "class loading leak. In the first case 'taskmanager.memory.jvm-metaspace.size' "
    "configuration option should be increased. If the error persists (usually in cluster after "
    "several job (re-)submissions) then there is probably a class loading leak in user code or "
    "some of its dependencies which has to be investigated and fixed. The task executor has to "
    "be shutdown..."
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
    index: int  # the subtask it runs: TaskManager k runs subtask k of every vertex
    tm_id: str
    host: str  # the FQDN in TaskManagerLocation and the "host" metric label (unfiltered)
    data_port: int
    node: str  # Kubernetes node (the envelope's "host"); empty on YARN
    rpc_port: int  # of its RPC endpoint (akka.tcp://flink@host:port/user/rpc/taskmanager_0)

    @property
    def location(self) -> str:
        return f"{self.tm_id} @ {self.host} (dataPort={self.data_port})"


@dataclass(frozen=True, slots=True)
class _Task:
    vertex: int
    subtask: int
    name: str  # vertex name, e.g. "Source: kafka-orders -> Map"
    vertex_id: str
    attempt_id: str  # of the first deployment
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

    tm: _TaskManager
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
    last_ms: int  # of the previous sample (counters add rate x elapsed time)
    rng: random.Random  # noise of its samples
    # Its tasks' series, for one deployment of one job id (a restart deploys new attempts,
    # whose counters start from zero).
    tasks: tuple[_TaskSeries, ...] = ()
    tasks_of: tuple[int, str] = (-1, "")
    # idle_heap_leak: from idle_ms the tasks process nothing and the heap cycles in a
    # smaller band, more slowly; from leak_ms the floor rises by leak_per_ms.
    idle_ms: int = _NEVER
    idle_band: float = 0.0
    idle_growth: float = 0.0
    leak_ms: int = _NEVER
    leak_per_ms: float = 0.0
    dead_ms: int = _NEVER  # killed or unreachable: no samples from here on


@dataclass(frozen=True, slots=True)
class _Break:
    """A time the job stops running: checkpoints in flight cannot complete from ``stuck_ms``.

    They expire if their timeout comes first, else they are aborted (counted as failed,
    silently) at ``abort_ms``, when the job fails over.
    """

    stuck_ms: int
    abort_ms: int


# The simulated jobs restart with restart-strategy fixed-delay and a delay of 10 s (a value
# seen in production configurations; Flink's own default delay is 1 s).
_RESTART_DELAY_MS = 10_000
# heartbeat.interval and heartbeat.timeout, Flink's defaults.
_HEARTBEAT_INTERVAL_MS = 10_000
_HEARTBEAT_TIMEOUT_MS = 50_000
# The registration timeout of a TaskManager that lost its ResourceManager (Flink's default,
# taskmanager.registration.timeout) and the RPC timeout (akka.ask.timeout / pekko.ask.timeout).
_REGISTRATION_TIMEOUT_MS = 300_000
_ASK_TIMEOUT_MS = 10_000


class _Job:
    """One simulated job: its constants, its state and the records it produces.

    Records are pushed onto a heap as whole checkpoint cycles are simulated, and handed
    out in event-time order once no later push can precede them: everything a cycle
    logs happens at or after its trigger, so all records before the next trigger are
    final. Incidents that fail the job over are planned when the job is created (their
    times are fixed then) and logged by actions that run in event-time order between the
    cycles, each logging at or after its own time; the lines they write may name
    checkpoints, so they are written when the simulation reaches them.
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
        self.sites = _sites_of(ver, _on_k8s(index))
        self.layout = _LAYOUT_BY_SLOT[index % 4]
        self.k8s = _on_k8s(index)
        self.telegraf = index % 4 == _TELEGRAF_SLOT
        self.job_id = job_id(spec, index)
        self.jid = self.job_id  # a JobManager without HA resubmits the job under a new id
        self.name = job_name(spec, index)
        self.key = self.job_id.encode()
        _, main_topic, side_topic, out_topic = _JOB_TEMPLATES[index % len(_JOB_TEMPLATES)]
        self.rng = random.Random(f"{seed}/job/{index}")
        rng = self.rng

        self.jm_host, jm_node = self._place("jm")
        self.jm_pod = (
            f"{self.name}-{_k8s_suffix(seed, 10, 'rs', index)}-{_k8s_suffix(seed, 5, 'pod', index)}"
        )
        self.tms: tuple[_TaskManager, ...] = tuple(
            self._taskmanager(k, k) for k in range(spec.tms_per_job)
        )
        self.kube_jm = self._kube(self.jm_pod, jm_node)
        self.kube_tm: dict[str, str] = {tm.tm_id: self._kube(tm.tm_id, tm.node) for tm in self.tms}

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
        self.graph_id = _hex32(seed, "graph", index)
        tasks = []
        for v, vname in enumerate(vertex_names):
            vid = _hex32(seed, "vertex", index, v)
            for k in range(n):
                if self.w.new_attempt_ids:
                    attempt = f"{self.graph_id}_{vid}_{k}_0"
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
        # for TaskManager metrics, or a plan of its own (_plan_incidents).
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

        # What the job is doing now. Actions (incident sequences) change these at their time.
        self.job_state = "RUNNING"
        self.tasks_running = True
        self.jm_up = True  # the JobManager process runs (and reports the job's metrics)
        self.slots: list[_TaskManager] = list(self.tms)  # the TaskManager of each subtask
        self.tm_started = n  # TaskManagers started so far (the next one's number)
        self.deployment = 0  # deployments of the tasks so far (each has new attempt ids)
        self.attempt_no = 0  # the attempt number a deployment shows (0 with a new JobMaster)
        self.run = 0  # submissions of the job (a new id each, without HA)
        self.breaks: list[_Break] = []
        self.actions: list[tuple[int, int, Callable[[], None]]] = []
        # Completed checkpoints a restart may restore: (completed at, id, trigger timestamp).
        self.restorable: deque[tuple[int, int, int]] = deque(maxlen=4)
        self.trigger = _NEVER
        self.checkpoint = 1
        self.growth: _Growth | None = None  # state_growth

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
        self._plan_incidents()

    # -- identities --------------------------------------------------------------------

    def _place(self, *parts: object) -> tuple[str, str]:
        """Host and node: EMR-style FQDNs on YARN; pod IPs (no reverse DNS) on Kubernetes."""
        d = _digest(self.spec.seed, "place", self.index, *parts)
        if self.k8s:
            node = 1 + d[0] % 6
            return f"10.244.{node}.{2 + d[1] % 250}", f"node-{node}"
        return f"ip-10-0-{1 + d[0] % 4}-{10 + d[1] % 240}.ec2.internal", ""

    def _taskmanager(self, slot: int, number: int) -> _TaskManager:
        """TaskManager number ``number`` of the job (started in that order), running ``slot``."""
        seed, index = self.spec.seed, self.index
        host, node = self._place("tm", number)
        if self.k8s:
            port, rpc = 6121, 6122
        else:
            port = 32768 + int.from_bytes(_digest(seed, "port", index, number)[:2]) % 28000
            rpc = 32768 + int.from_bytes(_digest(seed, "rpc", index, number)[:2]) % 28000
        return _TaskManager(slot, tm_id(self.spec, index, number), host, port, node, rpc)

    def _attempt_id(self, task: _Task) -> str:
        """The execution attempt id of ``task`` in the current deployment."""
        if self.deployment == 0:
            return task.attempt_id
        if self.w.new_attempt_ids:
            return f"{self.graph_id}_{task.vertex_id}_{task.subtask}_{self.attempt_no}"
        return _hex32(
            self.spec.seed, "attempt", self.index, task.vertex, task.subtask, self.deployment
        )

    def _rpc_address(self, host: str, port: int, endpoint: str) -> str:
        """An RPC endpoint address: ``akka.tcp://flink@host:port/user/rpc/<endpoint>``."""
        scheme = "pekko" if self.w.pekko else "akka"
        path = "/user/rpc/" if self.ver >= (1, 11) else "/user/"
        return f"{scheme}.tcp://flink@{host}:{port}{path}{endpoint}"

    def _rid(self, tm: _TaskManager) -> str:
        """The ResourceID as heartbeat messages print it (1.12+ on YARN: with its NodeManager)."""
        if self.ver >= (1, 12) and not self.k8s:
            return f"{tm.tm_id}({tm.host}:8041)"
        return tm.tm_id

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
        tm: _TaskManager | None = None,
    ) -> None:
        """Render one log record in the job's layout and queue it (``tm``: a TaskManager's log)."""
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
                kube = self.kube_jm if tm is None else self.kube_tm[tm.tm_id]
                text = (
                    f'{{"log": {json.dumps(text)}, "stream": "stdout", "time": "{_iso_ts(t)}", '
                    f'"kubernetes": {kube}}}'
                )
        key = self.key if tm is None else tm.tm_id.encode()
        self._push(SimRecord("log", t, key, text.encode()))

    def _dispatcher(self) -> str:
        rpc = "pekko" if self.w.pekko else "akka"
        return f"flink-{rpc}.actor.default-dispatcher-{self.rng.randrange(2, 40)}"

    def _io_thread(self) -> str:
        return f"{self.w.io_thread}-{self.rng.randrange(1, 9)}"

    def _idispatcher(self) -> str:
        """A dispatcher thread name for incident lines (from the incident generator)."""
        rpc = "pekko" if self.w.pekko else "akka"
        return f"flink-{rpc}.actor.default-dispatcher-{self.irng.randrange(2, 40)}"

    def _at(self, t: int, action: Callable[[], None]) -> None:
        """Run ``action`` when the simulation reaches ``t`` (it logs at ``t`` or later)."""
        self.seq += 1
        heapq.heappush(self.actions, (t, self.seq, action))

    def records(self) -> Iterator[SimRecord]:
        """All records of this job before ``end_ms``, in event-time order."""
        self._startup()
        rng = self.rng
        self.trigger = self.running_ms + rng.randrange(0, self.interval_ms + 1)
        while True:
            action_ms = self.actions[0][0] if self.actions else _NEVER
            now = min(self.trigger, action_ms)
            if now >= self.end_ms:
                break
            self._metrics_until(now)
            yield from self._ready(now)
            if action_ms <= self.trigger:
                heapq.heappop(self.actions)[2]()
                continue
            trigger = self.trigger
            if not self.tasks_running:
                # Failed over: the restart triggers again once every task runs.
                self.trigger = _NEVER
                continue
            done = self._cycle(self.checkpoint, trigger)
            self.checkpoint += 1
            # Fixed-rate trigger with a few ms of scheduling jitter; with one concurrent
            # checkpoint allowed, a checkpoint still pending delays the next one until it
            # completes or expires.
            trigger = max(trigger + self.interval_ms, done + rng.randrange(1, 12))
            self.trigger = trigger + rng.randrange(0, 4)
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
            f"Job {self.name} ({self.jid}) switched from state CREATED to RUNNING.",
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
        rng, w, jid = self.rng, self.w, self.jid
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
        growth = self.growth
        if growth is not None and trigger >= growth.onset_ms:
            # A snapshot of heap state is written out at the storage's pace.
            extra = growth.size(trigger) - growth.base
            duration = max(duration + int(extra / growth.bytes_per_ms), 5)
        brk = next((b for b in self.breaks if b.abort_ms > trigger), None)
        if brk is not None and trigger + duration >= brk.stuck_ms:
            return self._lost(n, trigger, brk)
        onset = onsets.get("checkpoint_declines")
        if onset is not None and trigger + duration >= onset:
            return self._decline(n, trigger, duration)
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
        if growth is not None and trigger >= growth.onset_ms:
            size = int(size * growth.size(trigger) / growth.base)
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
        self.restorable.append((done, n, at))
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
        rng, w, jid = self.rng, self.w, self.jid
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
            aid = self._attempt_id(task)
            if w.late_with_location:
                text = (
                    f"Received late message for now expired checkpoint attempt {n} from task "
                    f"{aid} of job {jid} at {self.slots[task.subtask].location}."
                )
            else:
                text = (
                    f"Received late message for now expired checkpoint attempt {n} from "
                    f"{aid} of job {jid}."
                )
            self._log(t, "late", "WARN", text, self._io_thread())
        return expired

    def _lost(self, n: int, trigger: int, brk: _Break) -> int:
        """Checkpoint ``n`` cannot complete: the job stops running before it would.

        It expires if the timeout comes first, else it is aborted (silently, counted as
        failed) when the job fails over.
        """
        if trigger + self.timeout_ms < brk.abort_ms:
            return self._expire(n, trigger, late="none")
        self.changes.append((brk.abort_ms, 0, 0, 0, 1))
        return brk.abort_ms

    def _decline(self, n: int, trigger: int, duration: int) -> int:
        """checkpoint_declines: a stateful task's asynchronous snapshot fails; it declines ``n``.

        The JobManager logs the decline (with the task's location from 1.9 and the cause
        from 1.12), then the failure (1.7-1.10 "Discarding checkpoint", 1.15+ the
        CheckpointFailureManager's WARN); 1.11-1.14 log the decline only.
        """
        irng, w, ver, jid = self.irng, self.w, self.ver, self.jid
        t = trigger + max(int(duration * irng.uniform(0.3, 0.9)), 3)
        task = irng.choice([tk for tk in self.tasks if tk.vertex == 2])
        aid = self._attempt_id(task)
        if ver < (1, 9):
            text = f"Decline checkpoint {n} by task {aid} of job {jid}."
        else:
            text = (
                f"Decline checkpoint {n} by task {aid} of job {jid} at "
                f"{self.slots[task.subtask].location}."
            )
        materialize = self._materialize_failure(n, task)
        self._log(
            t, "decline", "INFO", text, self._idispatcher(), materialize if ver >= (1, 12) else ""
        )
        jar = w.frame_jar if w.log4j2 else ""
        if w.failure_manager_warn:
            t += irng.randrange(0, 3)
            trace = (
                "org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task "
                "checkpoint failed.\n\tat org.apache.flink.runtime.messages.checkpoint."
                f"SerializedCheckpointException.unwrap(SerializedCheckpointException.java:51){jar}\n"
                "\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator."
                f"receiveDeclineMessage(CheckpointCoordinator.java:1035){jar}\n"
                f"Caused by: {materialize}"
            )
            self._log(
                t,
                "failure",
                "WARN",
                f"Failed to trigger or complete checkpoint {n} for job {jid}. "
                f"({self.consecutive_failed} consecutive failed attempts so far)",
                self._io_thread_i(),
                trace,
            )
        elif (1, 7) <= ver < (1, 11):
            trace = (
                "org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint was "
                "declined.\n\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator."
                f"receiveDeclineMessage(CheckpointCoordinator.java:905){jar}\n"
                # Before 1.12 the cause is not wrapped for the RPC yet.
                "Caused by: "
                + materialize.replace(
                    "org.apache.flink.util.SerializedThrowable", "java.lang.Exception", 1
                )
            )
            self._log(
                t,
                "discard",
                "INFO",
                f"Discarding checkpoint {n} of job {jid}.",
                self._idispatcher(),
                trace,
            )
        self.consecutive_failed += 1
        self.changes.append((t, 0, 0, 0, 1))
        return t

    def _io_thread_i(self) -> str:
        return f"{self.w.io_thread}-{self.irng.randrange(1, 9)}"

    def _materialize_failure(self, n: int, task: _Task) -> str:
        """The cause a task declines checkpoint ``n`` with: its snapshot could not be written.

        On YARN the checkpoint directory's HDFS quota is used up; on Kubernetes the S3
        bucket refuses the upload (rotated credentials). Both last until someone acts, so
        every checkpoint from the onset fails the same way. Causes cross the RPC boundary
        as Flink's ``SerializedThrowable``, which prints the original's message.
        """
        w, k, par = self.w, task.subtask, self.spec.tms_per_job
        jar = w.frame_jar if w.log4j2 else ""
        jdk = " [?:?]" if w.log4j2 else ""
        suffix = f"#{self.attempt_no}" if w.attempt_suffix else ""
        if self.k8s:
            request = _hex32(self.spec.seed, "s3-request", self.index, n)[:16].upper()
            cause = (
                "Access Denied (Service: Amazon S3; Status Code: 403; Error Code: AccessDenied; "
                f"Request ID: {request}; Proxy: null)"
            )
            cause_frames = (
                "\tat com.amazonaws.http.AmazonHttpClient$RequestExecutor.handleErrorResponse("
                f"AmazonHttpClient.java:1879){jdk}\n"
                "\tat org.apache.hadoop.fs.s3a.S3AFileSystem.putObjectDirect("
                f"S3AFileSystem.java:2573){jdk}"
            )
        else:
            quota = 10 * 2**40
            used = quota + self.irng.randrange(2**20, 2**30)
            cause = (
                "The DiskSpace quota of /flink/checkpoints is exceeded: quota = "
                f"{quota} B = 10 TB but diskspace consumed = {used} B = {used / 2**40:.2f} TB"
            )
            cause_frames = (
                "\tat org.apache.hadoop.hdfs.server.namenode.DirectoryWithQuotaFeature."
                f"verifyDiskspaceQuota(DirectoryWithQuotaFeature.java:211){jdk}\n"
                "\tat org.apache.hadoop.hdfs.DFSOutputStream.addBlock(DFSOutputStream.java:1081)"
                f"{jdk}"
            )
        return (
            f"org.apache.flink.util.SerializedThrowable: Could not materialize checkpoint {n} "
            f"for operator {task.name} ({k + 1}/{par}){suffix}.\n"
            "\tat org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable."
            f"handleExecutionException(AsyncCheckpointRunnable.java:257){jar}\n"
            "\tat org.apache.flink.streaming.runtime.tasks.AsyncCheckpointRunnable.run("
            f"AsyncCheckpointRunnable.java:128){jar}\n"
            "\tat java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1128)"
            f"{jdk}\n"
            f"\tat java.lang.Thread.run(Thread.java:829){jdk}\n"
            f"Caused by: org.apache.flink.util.SerializedThrowable: {cause}\n{cause_frames}"
        )

    def _chatter(self, n: int, trigger: int, done: int) -> None:
        """INFO lines other classes log when a checkpoint completes, plus a rare WARN."""
        rng, w, tasks_per_vertex = self.rng, self.w, self.spec.tms_per_job
        budget = self.spec.chatter_per_checkpoint
        suffix = f"#{self.attempt_no}" if w.attempt_suffix else ""
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
                thread = f"{task.name} ({k + 1}/{tasks_per_vertex}){suffix}"
                self._log(
                    done + rng.randrange(5, 60),
                    "txn_commit",
                    "INFO",
                    f"FlinkKafkaProducer {k + 1}/{tasks_per_vertex} - checkpoint {n} complete, "
                    f"committing transaction {holder} from checkpoint {n}",
                    thread,
                    tm=self.slots[k],
                )
        if rng.random() < 0.01:
            # The Kafka group coordinator moved: one source subtask's async offset commit fails.
            k = rng.randrange(tasks_per_vertex)
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
            self._log(t, site, "WARN", text, thread, _COMMIT_FAILURE_TRACE, tm=self.slots[k])

    # -- incidents that fail the job over: plans -------------------------------------------

    def _plan_incidents(self) -> None:
        """Fix the times of the failovers the job's incidents cause, and queue their lines."""
        onsets = self.onset_ms
        if "idle_heap_leak" in onsets:
            self._plan_leak(onsets["idle_heap_leak"])
        if "tm_memory_kill" in onsets:
            t = onsets["tm_memory_kill"]
            self._plan_memory_kill(0, t, t + self.irng.randrange(40_000, 50_000))
        if "state_growth" in onsets:
            self._plan_state_growth(onsets["state_growth"])
        for kind in ("tm_heap_oom", "tm_direct_oom", "tm_metaspace_oom"):
            if kind in onsets:
                self._plan_jvm_fatal(kind, onsets[kind])
        if "k8s_watch_crash" in onsets:
            self._plan_watch_crash(onsets["k8s_watch_crash"], ha=True)
        if "k8s_watch_crash_no_ha" in onsets:
            self._plan_watch_crash(onsets["k8s_watch_crash_no_ha"], ha=False)
        if "restart_storm" in onsets:
            self._plan_storm(onsets["restart_storm"])

    def _plan_leak(self, onset: int) -> None:
        """Make the job idle from ``onset`` and TaskManager 0 leak until it is killed.

        Every replacement TaskManager runs the same leaking source reader and is killed
        in turn once its heap is full.
        """
        irng = self.irng
        for st in self.tm_states:
            st.idle_ms = onset
            # An idle TaskManager still allocates (timers, heartbeats, metrics, empty
            # polls), only less: a smaller, slower sawtooth, each cycle 1-2 minutes.
            st.idle_band = (st.ceiling - st.floor) * irng.uniform(0.3, 0.5)
            st.idle_growth = st.idle_band / irng.uniform(60, 120)
        leaking = self.tm_states[0]
        leak_per_ms = self.spec.heap_leak_mb_per_h * 2**20 / 3_600_000
        start = onset
        while True:
            leaking.leak_ms = start
            leaking.leak_per_ms = leak_per_ms
            # Killed when the floor reaches the maximum: no collection frees anything anymore.
            kill = start + math.ceil((leaking.heap_max - leaking.floor) / leak_per_ms)
            # The JobMaster heard from it last up to one heartbeat interval (10 s) before
            # the kill, and gives up heartbeat.timeout (50 s) after that.
            failover = kill + irng.randrange(40_000, 50_000)
            if kill >= self.end_ms:
                return
            replacement = self._plan_memory_kill(0, kill, failover)
            if replacement is None:
                return
            replacement.idle_ms = replacement.next_ms
            replacement.idle_band = leaking.idle_band
            replacement.idle_growth = leaking.idle_growth
            leaking, start = replacement, replacement.next_ms

    def _plan_memory_kill(self, slot: int, kill: int, failover: int) -> _TmState | None:
        """The TaskManager of ``slot`` is killed for memory at ``kill``; the job restarts.

        YARN kills a container over its physical memory limit, Kubernetes OOM-kills the
        pod; the ResourceManager reports it when it hears of it, the JobMaster's heartbeat
        times out at ``failover``, the job fails over and is restored from its latest
        checkpoint on a new TaskManager. Returns the new TaskManager's metric state, if it
        starts before the end.
        """
        irng = self.irng
        dead = self._tm_state_of(slot, kill)
        dead.dead_ms = kill
        # YARN reports completed containers on the next allocate heartbeat (every 5 s);
        # Kubernetes' watch reports the pod at once.
        reported = kill + (irng.randrange(300, 5000) if not self.k8s else irng.randrange(50, 900))
        tm = dead.tm
        self._at(kill, lambda: self._log_memory_kill(kill, reported, tm, dead))
        self.breaks.append(_Break(kill, failover))
        self._at(failover, lambda: self._heartbeat_failover(failover, tm, rm_side=False))
        # The ResourceManager asks for a new worker as soon as it knows the old one is gone.
        return self._plan_restart(failover, slot, reported + irng.randrange(8_000, 25_000))

    def _plan_restart(
        self, failover: int, slot: int | None, tm_ready: int | None = None
    ) -> _TmState | None:
        """After the failover at ``failover``: the restart delay, a restore, a redeploy.

        ``slot``'s TaskManager is replaced by a new one that registers at ``tm_ready``.
        Returns the new TaskManager's metric state, if it starts before the end.
        """
        irng = self.irng
        restart = failover + _RESTART_DELAY_MS + irng.randrange(0, 40)
        ready = restart if tm_ready is None else tm_ready
        deploy = max(restart, ready) + irng.randrange(20, 200)
        running = deploy + irng.randrange(1_500, 3_000)
        new: _TmState | None = None
        tm: _TaskManager | None = None
        if slot is not None:
            tm = self._taskmanager(slot, self.tm_started)
            self.tm_started += 1
            self.kube_tm[tm.tm_id] = self._kube(tm.tm_id, tm.node)
            if ready < self.end_ms:
                new = self._new_tm_state(tm, ready)
        self._at(restart, lambda: self._restart(restart, deploy, running, slot, tm))
        return new

    def _plan_state_growth(self, onset: int) -> None:
        """state_growth (seed 000): heap state grows until one TaskManager thrashes and dies.

        The checkpoint size grows by the same amount every checkpoint interval (keyed state
        of a key space that keeps growing, or windows keeping many copies of every record),
        so that the fullest TaskManager's live heap reaches 90% of its maximum
        ``state_growth_fill_s`` after the onset (heap state takes about 1.5 times its
        serialized size, spread over the TaskManagers). Then it spends its time in GC: it
        stops answering (no metrics, no heartbeats), the ResourceManager's and the
        JobMaster's heartbeats time out 50 s later and the job fails over; a few seconds
        after that the TaskManager gives up with ``OutOfMemoryError: GC overhead limit
        exceeded`` (the FATAL line of Flink's FatalExitExceptionHandler) and exits. The job
        is restored from its latest checkpoint on a new TaskManager; the growth is over by
        then (the key space stops growing), and the state shrinks back, halving its excess
        every checkpoint interval.
        """
        irng, n = self.irng, self.spec.tms_per_job
        victim = max(self.tm_states, key=lambda st: st.floor)
        target = self.base_size + n * (0.9 * victim.heap_max - victim.floor) / 1.5
        fill_ms = round(self.spec.state_growth_fill_s * 1000)
        thrash = onset + fill_ms
        failover = thrash + _HEARTBEAT_TIMEOUT_MS + irng.randrange(0, 3_000)
        fatal = failover + irng.randrange(2_000, 9_000)
        growth = _Growth(
            onset_ms=onset,
            base=self.base_size,
            slope=max(target - self.base_size, 0.0) / fill_ms,
            bytes_per_ms=irng.uniform(60_000, 150_000),  # 60-150 MB/s to the checkpoint storage
            peak_ms=thrash,
            resume_ms=_NEVER,
            tms=n,
            half_life_ms=self.interval_ms,
        )
        self.growth = growth
        if thrash >= self.end_ms:
            return
        victim.dead_ms = thrash
        tm = victim.tm
        self.breaks.append(_Break(thrash, failover))
        self._at(failover, lambda: self._heartbeat_failover(failover, tm, rm_side=True))
        self._at(fatal, lambda: self._log_jvm_fatal("gc_overhead", fatal, tm, exit_report=True))
        self._plan_restart(failover, tm.index, fatal + irng.randrange(10_000, 25_000))
        growth.resume_ms = failover + _RESTART_DELAY_MS

    def _plan_jvm_fatal(self, kind: str, onset: int) -> None:
        """tm_*_oom: TaskManager 0's JVM runs out of one kind of memory at ``onset`` and exits.

        ``tm_heap_oom`` and ``tm_direct_oom``: an RPC thread gets ``Java heap space`` or
        ``Direct buffer memory``; FatalExitExceptionHandler logs FATAL and halts the
        process, the ResourceManager sees the container or pod exit (239), and the
        JobMaster's heartbeat times out 40-50 s later. ``tm_metaspace_oom``: a task fails
        with ``Metaspace`` (enriched from 1.11), the JobManager fails the job over at once
        and the TaskManager shuts itself down (TaskExecutor and TaskManagerRunner ERROR
        lines, exit code 1). Either way the job is restored on a new TaskManager.
        """
        irng = self.irng
        st = self._tm_state_of(0, onset)
        tm = st.tm
        st.dead_ms = onset
        if kind == "tm_metaspace_oom":
            failover = onset + irng.randrange(5, 80)
            exited = onset + irng.randrange(1_000, 4_000)
            self._at(onset, lambda: self._log_jvm_fatal("metaspace", onset, tm, exit_report=True))
            self.breaks.append(_Break(onset, failover))
            self._at(failover, lambda: self._metaspace_failover(failover, tm))
            self._plan_restart(failover, 0, exited + irng.randrange(8_000, 25_000))
            return
        oom = "heap" if kind == "tm_heap_oom" else "direct"
        failover = onset + irng.randrange(40_000, 50_000)
        self._at(onset, lambda: self._log_jvm_fatal(oom, onset, tm, exit_report=True))
        self.breaks.append(_Break(onset, failover))
        self._at(failover, lambda: self._heartbeat_failover(failover, tm, rm_side=False))
        self._plan_restart(failover, 0, onset + irng.randrange(10_000, 25_000))

    def _plan_watch_crash(self, onset: int, ha: bool) -> None:
        """k8s_watch_crash (seed 003): the JobManager dies of a watch error and comes back.

        The TaskManager pods watch gets HTTP 410 (``too old resource version``), which
        Flink 1.10.2-1.12.1 treats as fatal: ``Fatal error occurred in ResourceManager.``,
        ``Fatal error occurred in the cluster entrypoint.``, the process exits. Kubernetes
        restarts the container 10-30 s later (entrypoint start lines); with HA the job is
        recovered from its latest checkpoint, without HA it is submitted again under a new
        job id, from nothing (``No checkpoint found during restore.``). The TaskManager pods
        survive and take the new deployment.
        """
        irng = self.irng
        crash = onset
        start = crash + irng.randrange(10_000, 30_000)
        submit = start + irng.randrange(3_000, 8_000)
        if ha:
            # ZooKeeper revokes the dead JobManager's leadership when its session expires;
            # only then can the new one be granted it.
            lost = crash + irng.randrange(40_000, 60_000)
            submit = max(submit, lost + irng.randrange(500, 3_000))
        else:
            # Without HA nothing tells the TaskManagers of a new leader: they notice the old
            # JobManager is gone when its heartbeat times out.
            lost = crash + _HEARTBEAT_TIMEOUT_MS + irng.randrange(0, _HEARTBEAT_INTERVAL_MS)
        deploy = submit + irng.randrange(2_000, 10_000)
        running = deploy + irng.randrange(1_500, 3_000)
        self.breaks.append(_Break(crash, crash))
        self._at(crash, lambda: self._log_watch_crash(crash))
        old_id = self.job_id
        self._at(lost, lambda: self._log_tms_lost_jobmanager(lost, old_id, heartbeat=not ha))
        self._at(start, lambda: self._log_entrypoint_start(start, ha))
        self._at(submit, lambda: self._jobmaster_start(submit, deploy, running, ha))

    def _plan_storm(self, onset: int) -> None:
        """restart_storm (seed 004): a flapping TaskManager, restarts, lost leadership.

        The last TaskManager's node starts dropping packets at the onset: it stops
        reporting, its heartbeat times out and the job fails over. It keeps re-registering
        its slots, so each restart deploys to it and the deployment times out
        (``Cannot deploy task ... not responding after a rpcTimeout of 10000 ms``, caused
        by an ``AskTimeoutException``): four failovers within about 2.5 minutes, with
        exponential-delay restarts (10, 20, 40 s). During the 80 s backoff after the
        fourth, the JobManager loses ZooKeeper and its leadership (TaskManagers log
        ``JobManager for job ... lost leadership.``) and the job is suspended; the flapping
        TaskManager, cut off from the ResourceManager, dies of a
        ``RegistrationTimeoutException`` 5 minutes after it lost it. Leadership comes back
        5 minutes after it was lost: a new JobMaster restores the latest checkpoint and
        deploys to a new TaskManager. The job is not RUNNING for about 5.5 minutes at the
        end, and barely ran in the 2.5 before.
        """
        irng, n = self.irng, self.spec.tms_per_job
        slot = n - 1
        st = self._tm_state_of(slot, onset)
        tm = st.tm
        st.dead_ms = onset
        fail = onset + irng.randrange(40_000, 50_000)
        self.breaks.append(_Break(onset, fail))
        first = fail
        self._at(fail, lambda: self._heartbeat_failover(first, tm, rm_side=True))
        delay = _RESTART_DELAY_MS
        for _ in range(3):
            restart = fail + delay + irng.randrange(0, 40)
            deploy = restart + irng.randrange(50, 400)
            fail = deploy + _ASK_TIMEOUT_MS + irng.randrange(5, 60)
            self._at(restart, partial(self._restart, restart, deploy, None, None, None))
            self._at(fail, partial(self._deploy_timeout, fail, deploy, tm))
            delay *= 2
        lost = fail + irng.randrange(20_000, 40_000)
        self._at(lost, lambda: self._leadership_lost(lost))
        regto = first + _REGISTRATION_TIMEOUT_MS + irng.randrange(0, 2_000)
        self._at(regto, lambda: self._log_registration_timeout(regto, tm))
        regained = lost + 300_000 + irng.randrange(0, 20_000)
        ready = regto + irng.randrange(15_000, 40_000)
        new_tm = self._taskmanager(slot, self.tm_started)
        self.tm_started += 1
        self.kube_tm[new_tm.tm_id] = self._kube(new_tm.tm_id, new_tm.node)
        if ready < self.end_ms:
            self._new_tm_state(new_tm, ready)
        deploy = max(regained, ready) + irng.randrange(200, 2_000)
        running = deploy + irng.randrange(1_500, 3_000)
        self._at(
            regained,
            lambda: self._jobmaster_start(regained, deploy, running, True, (slot, new_tm)),
        )

    # -- incidents that fail the job over: what they log ---------------------------------

    def _job_to(self, t: int, state: str, trace: str = "") -> None:
        """Log the job's switch from its current state to ``state`` (ExecutionGraph)."""
        self._log(
            t,
            "job_state",
            "INFO",
            f"Job {self.name} ({self.jid}) switched from state {self.job_state} to {state}.",
            self._idispatcher(),
            trace,
        )
        self.job_state = state

    def _frames(self, *frames: str) -> str:
        """Stack frames as log4j prints them (log4j 2 appends the jar of Flink's classes)."""
        jar = self.w.frame_jar if self.w.log4j2 else ""
        jdk = " [?:?]" if self.w.log4j2 else ""
        return "\n".join(
            f"\tat {f}{jar if f.startswith('org.apache.flink') else jdk}" for f in frames
        )

    def _heartbeat_trace(self, rid: str, rm_side: bool) -> str:
        """The TimeoutException a heartbeat timeout fails tasks with (JobMaster's, or the RM's)."""
        ver, w = self.ver, self.w
        actor = "pekko.PekkoRpcActor" if w.pekko else "akka.AkkaRpcActor"
        monitor = (
            "HeartbeatMonitorImpl.run(HeartbeatMonitorImpl.java:109)"
            if ver < (1, 14)
            else "DefaultHeartbeatMonitor.run(DefaultHeartbeatMonitor.java:158)"
        )
        if rm_side:
            # 1.10-1.13 put two spaces before "timed out" in the exception (not in the log line).
            sep = "  " if (1, 10) <= ver < (1, 14) else " "
            head = (
                "java.util.concurrent.TimeoutException: The heartbeat of TaskManager with id "
                f"{rid}{sep}timed out."
            )
            listener = (
                "org.apache.flink.runtime.resourcemanager.ResourceManager$"
                "TaskManagerHeartbeatListener.notifyHeartbeatTimeout(ResourceManager.java:1146)"
            )
        else:
            head = (
                "java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id "
                f"{rid} timed out."
            )
            line = 1149 if ver < (1, 10) else 1299 if ver < (1, 14) else 1641
            listener = (
                "org.apache.flink.runtime.jobmaster.JobMaster$TaskManagerHeartbeatListener."
                f"notifyHeartbeatTimeout(JobMaster.java:{line})"
            )
        frames = self._frames(
            listener,
            f"org.apache.flink.runtime.heartbeat.{monitor}",
            "java.util.concurrent.Executors$RunnableAdapter.call(Executors.java:515)",
            "java.util.concurrent.FutureTask.run(FutureTask.java:264)",
            f"org.apache.flink.runtime.rpc.{actor}.handleRunAsync({actor.split('.')[1]}.java:440)",
        )
        return f"{head}\n{frames}"

    def _heartbeat_failover(self, t: int, tm: _TaskManager, rm_side: bool) -> None:
        """Heartbeats to ``tm`` time out; the job fails over.

        ``rm_side``: the ResourceManager's heartbeat times out too (it had not heard the
        TaskManager was gone), and, before 1.14, its exception is what fails the tasks
        (seed 000); otherwise the JobMaster's (logged from 1.14, seed 001).
        """
        irng, ver = self.irng, self.ver
        rid = self._rid(tm)
        if rm_side:
            self._log(
                t,
                "rm_heartbeat",
                "INFO",
                f"The heartbeat of TaskManager with id {rid} timed out.",
                self._idispatcher(),
            )
            sep = "  " if (1, 10) <= ver < (1, 14) else " "
            self._log(
                t + 1,
                "rm_close",
                "INFO",
                f"Closing TaskExecutor connection {rid} because: The heartbeat of TaskManager "
                f"with id {rid}{sep}timed out.",
                self._idispatcher(),
            )
            t += 2 + irng.randrange(0, 30)
        timeout = f"Heartbeat of TaskManager with id {rid} timed out."
        if ver >= (1, 14):
            self._log(t, "tm_heartbeat_timeout", "INFO", timeout, self._idispatcher())
        if ver >= (1, 16):
            t += 1
            self._log(
                t,
                "tm_disconnect",
                "INFO",
                f"Disconnect TaskExecutor {rid} because: {timeout}",
                self._idispatcher(),
            )
        trace = self._heartbeat_trace(rid, rm_side=rm_side and ver < (1, 14))
        self._fail_job(t, tm.index, trace)

    def _fail_job(
        self,
        t: int,
        slot: int,
        trace: str | Callable[[_Task], str],
        from_state: str = "RUNNING",
        others_from: str = "RUNNING",
        only: _Task | None = None,
    ) -> None:
        """The tasks of ``slot`` (or ``only``) fail with ``trace``; every task restarts.

        The graph is one pipelined region (keyed exchanges), so a failed task restarts all
        of them: region failover lines (1.9+), the job RUNNING -> RESTARTING (1.10+;
        before, RUNNING -> FAILING -> RESTARTING), the other tasks cancelled.
        """
        irng, ver, n = self.irng, self.ver, self.spec.tms_per_job
        tm = self.slots[slot]
        self.tasks_running = False
        failed = [only] if only is not None else [k for k in self.tasks if k.subtask == slot]
        for task in failed:
            t += irng.randrange(1, 10)
            head = (
                f"{task.name} ({task.subtask + 1}/{n}) ({self._attempt_id(task)}) switched from "
                f"{from_state} to FAILED"
            )
            if ver < (1, 11):
                text = f"{head}."
            elif ver < (1, 12):
                slot_id = f"{irng.getrandbits(31):x}"
                logical = "org.apache.flink.runtime.jobmaster.slotpool.SingleLogicalSlot"
                text = f"{head} on {logical}@{slot_id}."
            else:
                text = f"{head} on {tm.location}."
            cause = trace if isinstance(trace, str) else trace(task)
            self._log(t, "task_state", "INFO", text, self._idispatcher(), cause)
        first = failed[0]
        t += 1
        if (1, 9) <= ver < (1, 16):
            vertex = f"{first.vertex_id}_{first.subtask}"
            self._log(
                t,
                "region_failover",
                "INFO",
                f"Calculating tasks to restart to recover the failed task {vertex}.",
                self._idispatcher(),
            )
            self._log(
                t,
                "region_failover",
                "INFO",
                # (sic: the trailing space is Flink's)
                f"{len(self.tasks)} tasks should be restarted to recover the failed task "
                f"{vertex}. ",
                self._idispatcher(),
            )
        elif ver >= (1, 16):
            self._log(
                t,
                "restart_tasks",
                "INFO",
                f"{len(self.tasks)} tasks will be restarted to recover the failed task "
                f"{self._attempt_id(first)}.",
                self._idispatcher(),
            )
        t += 1
        if ver >= (1, 10):
            self._job_to(t, "RESTARTING")
        else:
            self._job_to(t, "FAILING", trace if isinstance(trace, str) else trace(first))
            self._log(
                t + 1,
                "job_state",
                "INFO",
                f"Try to restart or fail the job {self.name} ({self.jid}) if no longer possible.",
                self._idispatcher(),
            )
            self._job_to(t + 2, "RESTARTING")
        for task in self.tasks:
            if task in failed:
                continue
            head = f"{task.name} ({task.subtask + 1}/{n}) ({self._attempt_id(task)}) switched from"
            tc = t + irng.randrange(1, 20)
            self._log(
                tc, "task_state", "INFO", f"{head} {others_from} to CANCELING.", self._idispatcher()
            )
            tc += irng.randrange(5, 400)
            self._log(
                tc, "task_state", "INFO", f"{head} CANCELING to CANCELED.", self._idispatcher()
            )

    def _restart(
        self,
        t: int,
        deploy: int,
        running: int | None,
        slot: int | None,
        tm: _TaskManager | None,
    ) -> None:
        """The restart delay is over: the job runs again, restored, its tasks redeployed.

        ``running``: when every task runs (None: the deployment to the last TaskManager
        never finishes; the caller fails it).
        """
        if slot is not None and tm is not None:
            self.slots[slot] = tm
        self.deployment += 1
        self.attempt_no += 1
        if self.ver >= (1, 10):
            self._job_to(t, "RUNNING")
        else:
            self._log(
                t,
                "job_state",
                "INFO",
                f"Restarting the job {self.name} ({self.jid}).",
                self._idispatcher(),
            )
            self._job_to(t, "CREATED")
            self._job_to(t + 1, "RUNNING")
        self._log(t + 2, "restore", "INFO", self._restore_text(t), self._idispatcher())
        self._deploy(t + 3, deploy, running)

    def _restore_text(self, t: int) -> str:
        """What the CheckpointCoordinator logs when it restores the job's state at ``t``."""
        done = [c for c in self.restorable if c[0] <= t]
        if not done:
            return "No checkpoint found during restore."
        _, cid, at = done[-1]
        jid = self.jid
        if self.ver < (1, 12):
            return (
                f"Restoring job {jid} from latest valid checkpoint: Checkpoint {cid} @ {at} "
                f"for {jid}."
            )
        if self.k8s:
            path = f"s3://flink-state/{self.name}/checkpoints/{jid}/chk-{cid}"
        else:
            path = f"hdfs://nameservice1/flink/checkpoints/{jid}/chk-{cid}"
        return f"Restoring job {jid} from Checkpoint {cid} @ {at} for {jid} located at {path}."

    def _deploy(self, t0: int, deploy: int, running: int | None) -> None:
        """Log a deployment of every task: CREATED -> SCHEDULED -> ... -> RUNNING.

        Scheduled from ``t0``, deployed from ``deploy``, all RUNNING by ``running``; then
        checkpoints resume. ``running`` None: the last TaskManager's tasks stay DEPLOYING
        (its RPCs time out), the others run.
        """
        irng, n = self.irng, self.spec.tms_per_job
        stuck = self.spec.tms_per_job - 1 if running is None else None
        end = deploy + irng.randrange(1_500, 3_000) if running is None else running
        steps = ["DEPLOYING", "INITIALIZING", "RUNNING"]
        if not self.w.initializing:
            steps.remove("INITIALIZING")
        for task in self.tasks:
            head = f"{task.name} ({task.subtask + 1}/{n}) ({self._attempt_id(task)}) switched from"
            t = t0 + task.vertex + irng.randrange(0, 20)
            self._log(t, "task_state", "INFO", f"{head} CREATED to SCHEDULED.", self._idispatcher())
            prev = "SCHEDULED"
            for i, state in enumerate(steps):
                if i == 0:
                    at = deploy + task.vertex + irng.randrange(0, 40)
                elif state == "RUNNING":
                    at = end - irng.randrange(0, 100)
                else:
                    at = deploy + (end - deploy) // 2 + irng.randrange(0, 100)
                t = min(max(at, t + 1), end)
                self._log(
                    t, "task_state", "INFO", f"{head} {prev} to {state}.", self._idispatcher()
                )
                prev = state
                if task.subtask == stuck:
                    break
        if running is not None:
            self._at(running, lambda: self._resume(running))

    def _resume(self, t: int) -> None:
        """Every task runs again: task metrics and checkpoints resume."""
        self.tasks_running = True
        for st in self.tm_states:
            st.last_ms = max(st.last_ms, t)
        # The checkpoint scheduler starts with a random initial delay of up to one interval.
        self.trigger = t + self.irng.randrange(500, self.interval_ms + 1)

    def _log_memory_kill(self, kill: int, reported: int, tm: _TaskManager, st: _TmState) -> None:
        """YARN or Kubernetes kills ``tm`` for memory; the ResourceManager reports it.

        YARN (Hadoop 3 wording) sends SIGTERM, which the TaskManager's signal handler
        logs, and the ResourceManager passes the container's diagnostics on as the job's
        version does. Kubernetes kills an OOMKilled container outright (exit code 137) and
        the watch reports the pod's termination.
        """
        irng, ver = self.irng, self.ver
        if self.k8s:
            diagnostics = self._pod_diagnostics(137, "OOMKilled")
            if ver < (1, 12):
                text = f"Closing TaskExecutor connection {tm.tm_id} because: {diagnostics}"
            else:
                text = f"Worker {tm.tm_id} is terminated. Diagnostics: {diagnostics}"
            self._log(reported, "worker_terminated", "INFO", text, self._idispatcher())
            return
        self._log(
            kill + irng.randrange(0, 20),
            "tm_signal",
            "ERROR",
            "RECEIVED SIGNAL 15: SIGTERM. Shutting down as requested.",
            "SIGTERM handler",
            tm=tm,
        )
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
        self._log_container_completed(reported, tm, diagnostics, exit_status=-104)

    def _log_container_completed(
        self, t: int, tm: _TaskManager, diagnostics: str, exit_status: int
    ) -> None:
        """The YARN ResourceManager's report of a completed TaskManager container."""
        if self.ver < (1, 12):
            # 1.5-1.11: YarnResourceManager passes the raw diagnostics on.
            text = f"Closing TaskExecutor connection {tm.tm_id} because: {diagnostics}"
        elif self.ver < (1, 14):
            text = f"Worker {tm.tm_id} is terminated. Diagnostics: {diagnostics}"
        else:
            text = (
                f"Worker {tm.tm_id} is terminated. Diagnostics: Container {tm.tm_id} "
                f"marked as failed.\n Exit code:{exit_status}.\n Diagnostics:{diagnostics}"
            )
        self._log(t, "worker_terminated", "INFO", text, self._idispatcher())

    def _pod_diagnostics(self, code: int, reason: str) -> str:
        """KubernetesPod.getTerminatedDiagnostics() of a TaskManager pod."""
        # The main container is "flink-main-container" since pod templates (1.13).
        container = "flink-main-container" if self.ver >= (1, 13) else "flink-task-manager"
        text = (
            "Pod terminated, container termination statuses: "
            f"[{container}(exitCode={code}, reason={reason}, message=null)]"
        )
        if self.ver >= (1, 13):
            text += ", pod status: Failed(reason=null, message=null)"
        return text

    def _log_exit(self, t: int, tm: _TaskManager, code: int, connected: bool) -> None:
        """The ResourceManager hears that ``tm``'s process exited with ``code``.

        Before 1.12 it logs that only while the TaskManager is still connected (closing the
        connection is what it logs); from 1.12 every terminated worker is logged.
        """
        if self.ver < (1, 12) and not connected:
            return
        if self.k8s:
            diagnostics = self._pod_diagnostics(code, "Error")
            if self.ver < (1, 12):
                text = f"Closing TaskExecutor connection {tm.tm_id} because: {diagnostics}"
            else:
                text = f"Worker {tm.tm_id} is terminated. Diagnostics: {diagnostics}"
            self._log(t, "worker_terminated", "INFO", text, self._idispatcher())
            return
        diagnostics = (
            f"{_hadoop_ts(t - 400)}Exception from container-launch.\nContainer id: {tm.tm_id}\n"
            f"Exit code: {code}\n\n{_hadoop_ts(t - 390)}Container exited with a non-zero exit "
            f"code {code}. "
        )
        self._log_container_completed(t, tm, diagnostics, exit_status=code)

    def _log_jvm_fatal(self, oom: str, t: int, tm: _TaskManager, exit_report: bool) -> None:
        """``tm``'s JVM fails for lack of memory; it logs why and exits.

        ``oom``: ``gc_overhead``, ``heap`` or ``direct`` (an uncaught error in a thread
        with Flink's FatalExitExceptionHandler: FATAL, exit code 239), or ``metaspace`` (a
        task fails and the TaskExecutor shuts the process down: exit code 1).
        """
        irng, ver, w, n = self.irng, self.ver, self.w, self.spec.tms_per_job
        rpc = "pekko" if w.pekko else "akka"
        if oom == "metaspace":
            message = "Metaspace"
            if ver >= (1, 11):
                message = _ENRICHED_METASPACE
            trace = f"java.lang.OutOfMemoryError: {message}\n" + self._frames(
                "java.lang.ClassLoader.defineClass1(Native Method)",
                "java.lang.ClassLoader.defineClass(ClassLoader.java:1017)",
                "java.net.URLClassLoader.defineClass(URLClassLoader.java:550)",
                "org.apache.flink.util.ChildFirstClassLoader.loadClassWithoutExceptionHandling("
                "ChildFirstClassLoader.java:71)",
                "org.apache.flink.util.FlinkUserCodeClassLoader.loadClass("
                "FlinkUserCodeClassLoader.java:48)",
            )
            task = next(k for k in self.tasks if k.vertex == 2 and k.subtask == tm.index)
            suffix = f"#{self.attempt_no}" if w.attempt_suffix else ""
            head = (
                f"{task.name} ({task.subtask + 1}/{n}){suffix} ({self._attempt_id(task)}) "
                "switched from RUNNING to FAILED"
            )
            if (1, 13) <= ver < (1, 17):
                # The cause is stringified into the message itself.
                text, extra = f"{head} with failure cause: {trace}", ""
            elif ver >= (1, 17):
                text, extra = f"{head} with failure cause:", trace
            else:
                text, extra = f"{head}.", trace
            level = "WARN" if ver >= (1, 11) else "INFO"
            thread = f"{task.name} ({task.subtask + 1}/{n}){suffix}"
            self._log(t, "tm_task", level, text, thread, extra, tm=tm)
            address = self._rpc_address(tm.host, tm.rpc_port, "taskmanager_0")
            self._log(
                t + irng.randrange(1, 5),
                "task_executor",
                "ERROR",
                f"Fatal error occurred in TaskExecutor {address}.",
                f"flink-{rpc}.actor.default-dispatcher-{irng.randrange(2, 40)}",
                trace,
                tm=tm,
            )
            self._log(
                t + irng.randrange(5, 12),
                "tm_runner",
                "ERROR",
                "Fatal error occurred while executing the TaskManager. Shutting it down...",
                f"flink-{rpc}.actor.default-dispatcher-{irng.randrange(2, 40)}",
                trace,
                tm=tm,
            )
            code = 1
        else:
            thread = f"flink-{rpc}.actor.default-dispatcher-{irng.randrange(2, 700)}"
            if oom == "gc_overhead":
                message = "GC overhead limit exceeded"
                frames = (
                    "java.util.HashMap.resize(HashMap.java:704)",
                    "java.util.HashMap.putVal(HashMap.java:663)",
                    "java.io.ObjectStreamClass.lookup(ObjectStreamClass.java:391)",
                    "java.io.ObjectInputStream.readObject(ObjectInputStream.java:422)",
                    "org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation$MethodInvocation."
                    "readObject(RemoteRpcInvocation.java:204)",
                )
            elif oom == "heap":
                message = "Java heap space"
                frames = (
                    "java.util.Arrays.copyOf(Arrays.java:3236)",
                    "java.io.ByteArrayOutputStream.grow(ByteArrayOutputStream.java:118)",
                    "java.io.ObjectOutputStream.writeObject(ObjectOutputStream.java:348)",
                    "org.apache.flink.util.InstantiationUtil.serializeObject("
                    "InstantiationUtil.java:624)",
                    "org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation.<init>("
                    "RemoteRpcInvocation.java:62)",
                )
            else:
                message = "Direct buffer memory"
                frames = (
                    "java.nio.Bits.reserveMemory(Bits.java:175)",
                    "java.nio.DirectByteBuffer.<init>(DirectByteBuffer.java:118)",
                    "java.nio.ByteBuffer.allocateDirect(ByteBuffer.java:317)",
                    "org.apache.flink.shaded.netty4.io.netty.buffer.UnpooledDirectByteBuf.<init>("
                    "UnpooledDirectByteBuf.java:64)",
                    "org.apache.flink.shaded.netty4.io.netty.buffer.PooledByteBufAllocator."
                    "newDirectBuffer(PooledByteBufAllocator.java:394)",
                )
            trace = f"java.lang.OutOfMemoryError: {message}\n{self._frames(*frames)}"
            self._log(
                t,
                "fatal_exit",
                "ERROR",
                f"FATAL: Thread '{thread}' produced an uncaught exception. Stopping the process...",
                thread,
                trace,
                tm=tm,
            )
            if ver >= (1, 17):
                # FLINK-30299: the handler dumps every thread before it halts the JVM.
                dump = (
                    '"main" Id=1 WAITING on java.util.concurrent.CompletableFuture$Signaller@'
                    f"{irng.getrandbits(31):x}\n\tat sun.misc.Unsafe.park(Native Method)\n"
                    f'"{thread}" Id={irng.randrange(40, 900)} RUNNABLE\n'
                    f"\tat {frames[0]}"
                )
                self._log(
                    t + irng.randrange(2, 9),
                    "fatal_exit",
                    "ERROR",
                    "Thread dump: ",
                    thread,
                    dump,
                    tm=tm,
                )
            code = 239  # FatalExitExceptionHandler halts with -17
        if exit_report:
            # A process exit reaches the ResourceManager within seconds; a heartbeat timeout
            # before it (gc_overhead) has closed the connection already.
            self._log_exit(t + irng.randrange(500, 3_000), tm, code, connected=oom != "gc_overhead")

    def _metaspace_failover(self, t: int, tm: _TaskManager) -> None:
        """The JobManager hears of the task that failed with a Metaspace error; fails over."""
        task = next(k for k in self.tasks if k.vertex == 2 and k.subtask == tm.index)
        message = _ENRICHED_METASPACE if self.ver >= (1, 11) else "Metaspace"
        trace = f"java.lang.OutOfMemoryError: {message}\n" + self._frames(
            "java.lang.ClassLoader.defineClass1(Native Method)",
            "java.lang.ClassLoader.defineClass(ClassLoader.java:1017)",
        )
        self._fail_job(t, tm.index, trace, only=task)

    def _log_watch_crash(self, t: int) -> None:
        """The pods watch gets HTTP 410; Flink 1.10.2-1.12.1 treat it as fatal (seed 003)."""
        irng = self.irng
        old = 5_000_000_000 + irng.randrange(0, 10**9)
        exc = (
            "io.fabric8.kubernetes.client.KubernetesClientException: too old resource version: "
            f"{old} ({old + irng.randrange(100_000, 900_000)})"
        )
        trace = f"{exc}\n" + self._frames(
            "io.fabric8.kubernetes.client.dsl.internal.WatchConnectionManager$1.onMessage("
            "WatchConnectionManager.java:259)",
            "org.apache.flink.kubernetes.shaded.okhttp3.internal.ws.RealWebSocket.onReadMessage("
            "RealWebSocket.java:323)",
            "org.apache.flink.kubernetes.shaded.okhttp3.internal.ws.WebSocketReader."
            "readMessageFrame(WebSocketReader.java:219)",
            "java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1149)",
            "java.lang.Thread.run(Thread.java:748)",
        )
        # The fabric8 frames are shaded into flink-dist too: every frame carries its jar.
        if self.w.log4j2:
            trace = trace.replace(" [?:?]", " [?:1.8.0_282]")
        thread = "OkHttp https://10.96.0.1/..."
        self._log(t, "rm_fatal", "ERROR", "Fatal error occurred in ResourceManager.", thread, trace)
        self._log(
            t + 1,
            "entrypoint",
            "ERROR",
            "Fatal error occurred in the cluster entrypoint.",
            thread,
            trace,
        )
        self._log(
            t + 11,
            "blob",
            "INFO",
            "Stopped BLOB server at 0.0.0.0:6124",
            "BlobServer shutdown hook",
        )
        self.jm_up = False
        self.tasks_running = False

    def _log_tms_lost_jobmanager(self, t: int, jid: str, heartbeat: bool) -> None:
        """Every TaskManager of the job drops its JobManager connection (TaskExecutor lines)."""
        irng = self.irng
        for tm in self.slots:
            at = t + irng.randrange(0, 400)
            if heartbeat:
                jm = _hex32(self.spec.seed, "jm-resource", self.index, self.run)
                text = f"The heartbeat of JobManager with id {jm} timed out."
            else:
                text = (
                    f"JobManager for job {jid} with leader id {self._leader_id()} lost leadership."
                )
            self._log(at, "task_executor", "INFO", text, self._idispatcher(), tm=tm)
            self._log(
                at + irng.randrange(1, 6),
                "task_executor",
                "INFO",
                f"Close JobManager connection for job {jid}.",
                self._idispatcher(),
                tm=tm,
            )

    def _leader_id(self) -> str:
        """The current JobMaster's leader id (a JobMasterId: 32 hex digits)."""
        return _hex32(
            self.spec.seed, "leader", self.index, self.run, self.attempt_no, self.deployment
        )

    def _log_entrypoint_start(self, t: int, ha: bool) -> None:
        """The restarted JobManager container's first lines (ClusterEntrypoint).

        Without HA the new process will run the job under a new id: its records are keyed
        by that one from the start.
        """
        irng = self.irng
        if not ha:
            self.key = job_id(self.spec, self.index, self.run + 1).encode()
        release = _RELEASES.get(self.ver, f"{self.ver[0]}.{self.ver[1]}.0")
        rev = _hex32(self.spec.seed, "rev", release)[:7]
        entry = "KubernetesApplicationClusterEntrypoint"
        rule = "-" * 80
        lines = (
            rule,
            f" Starting {entry} (Version: {release}, Scala: 2.12, Rev:{rev}, "
            "Date:2021-12-10T09:41:12+01:00)",
            " OS current user: flink",
            " JVM: OpenJDK 64-Bit Server VM - Oracle Corporation - 1.8/25.282-b08",
            f" Maximum heap size: {irng.choice((989, 1963, 3925))} MiBytes",
            rule,
            "Registered UNIX signal handlers for [TERM, HUP, INT]",
            f"Starting {entry}.",
        )
        for line in lines:
            self._log(t, "entrypoint", "INFO", line, "main")
            t += irng.randrange(1, 40)

    def _jobmaster_start(
        self,
        t: int,
        deploy: int,
        running: int,
        ha: bool,
        replace: tuple[int, _TaskManager] | None = None,
    ) -> None:
        """A new JobMaster runs the job: recovered from its latest checkpoint (HA) or anew.

        Without HA the job is submitted again under a new job id and starts from nothing.
        Checkpoint statistics start over either way (they are not kept across JobMasters).
        """
        if replace is not None:
            self.slots[replace[0]] = replace[1]
        if not ha:
            self.run += 1
            self.jid = job_id(self.spec, self.index, self.run)
            self.key = self.jid.encode()
            self.restorable.clear()
            self.checkpoint = 1
            self._job_series()
        self.jm_up = True
        while self.changes and self.changes[0][0] <= t:
            self.changes.popleft()
        self.last_duration = self.last_size = -1
        self.completed = self.failed = self.consecutive_failed = 0
        self.deployment += 1
        self.attempt_no = 0
        self._log(t, "restore", "INFO", self._restore_text(t), self._idispatcher())
        self.job_state = "CREATED"
        self._job_to(t + self.irng.randrange(5, 60), "RUNNING")
        self._deploy(t + 80, deploy, running)

    def _deploy_timeout(self, t: int, deploy: int, tm: _TaskManager) -> None:
        """The deployment to the flapping TaskManager times out (restart_storm)."""
        ver, w, n = self.ver, self.w, self.spec.tms_per_job
        rpc = "pekko" if w.pekko else "akka"
        uid = -int.from_bytes(_digest(self.spec.seed, "actor", tm.tm_id)[:4]) // 2
        actor = self._rpc_address(tm.host, tm.rpc_port, "taskmanager_0")
        ask = (
            f"Ask timed out on [Actor[{actor}#{uid}]] after [{_ASK_TIMEOUT_MS} ms]. Message of "
            "type [org.apache.flink.runtime.rpc.messages.RemoteRpcInvocation]."
        )
        if ver >= (1, 11):
            # Only newer Akka builds add this sentence (FLINK_FORMATS.md §7).
            ask += (
                " A typical reason for `AskTimeoutException` is that the recipient actor didn't "
                "send a reply."
            )
        pattern = "org.apache.pekko.pattern" if w.pekko else "akka.pattern"
        if ver < (1, 15):
            cause = f"Caused by: {pattern}.AskTimeoutException: {ask}"
        else:
            time_type = "Duration" if ver >= (2, 0) else "Time"
            system = "Pekko" if w.pekko else "Akka"
            cause = (
                "Caused by: java.util.concurrent.TimeoutException: Invocation of "
                "[RemoteRpcInvocation(TaskExecutorGateway.submitTask(TaskDeploymentDescriptor, "
                f"JobMasterId, {time_type}))] at recipient [{actor}] timed out. This is usually "
                f"caused by: 1) {system} failed sending the message silently, due to problems "
                "like oversized payload or serialization failures. In that case, you should "
                "find detailed error information in the logs. 2) The recipient needs more time "
                "for responding, due to problems like slow machines or network jitters. In that "
                f"case, you can try to increase {rpc}.ask.timeout.\n"
                + self._frames(
                    "org.apache.flink.runtime.jobmaster.RpcTaskManagerGateway.submitTask("
                    "RpcTaskManagerGateway.java:59)"
                )
                + f"\nCaused by: {pattern}.AskTimeoutException: {ask}"
            )

        def trace(task: _Task) -> str:
            name = f"{task.name} ({task.subtask + 1}/{n}) ({self._attempt_id(task)})"
            return (
                f"java.lang.Exception: Cannot deploy task {name} - TaskManager ({tm.location}) "
                f"not responding after a rpcTimeout of {_ASK_TIMEOUT_MS} ms\n"
                + self._frames(
                    "org.apache.flink.runtime.executiongraph.Execution.lambda$deploy$5("
                    "Execution.java:616)",
                    "java.util.concurrent.CompletableFuture.uniWhenComplete("
                    "CompletableFuture.java:859)",
                )
                + f"\n{cause}"
            )

        self._fail_job(t, tm.index, trace, from_state="DEPLOYING")

    def _leadership_lost(self, t: int) -> None:
        """The JobManager loses ZooKeeper and the job's leadership; the job is suspended."""
        irng, ver, jid = self.irng, self.ver, self.jid
        port = (
            6123
            if self.k8s
            else 30000 + int.from_bytes(_digest(self.spec.seed, "jm-rpc", self.index)[:2]) % 30000
        )
        address = self._rpc_address(self.jm_host, port, f"jobmanager_{1 + self.run}")
        if ver < (1, 11):
            text: str | None = (
                f"JobManager for job {self.name} ({jid}) was revoked leadership at {address}."
            )
        elif ver < (1, 13):
            text = f"JobManager for job {self.name} ({jid}) at {address} was revoked leadership."
        elif ver >= (1, 18):
            leader = self._leader_id()
            uuid = f"{leader[:8]}-{leader[8:12]}-{leader[12:16]}-{leader[16:20]}-{leader[20:]}"
            text = (
                f"JobMasterServiceLeadershipRunner for job {jid} was revoked leadership with "
                f"leader id {uuid}. Stopping current JobMasterServiceProcess."
            )
        else:
            text = None  # 1.13-1.17 log the revocation at DEBUG only
        if text is not None:
            self._log(t, "jm_leadership", "INFO", text, self._idispatcher())
        if ver < (1, 13):
            cause = f"{_FLINK_EXC}: JobManager is no longer the leader."
        elif ver < (1, 15):
            cause = f"{_FLINK_EXC}: Stopping JobMaster for job {self.name}({jid})."
        else:
            cause = f"{_FLINK_EXC}: Stopping JobMaster for job '{self.name}' ({jid})."
        trace = f"{cause}\n" + self._frames(
            "org.apache.flink.runtime.jobmaster.JobMaster.onStop(JobMaster.java:426)",
            "org.apache.flink.runtime.rpc.RpcEndpoint.internalCallOnStop(RpcEndpoint.java:214)",
        )
        self._job_to(t + irng.randrange(2, 30), "SUSPENDED", trace)
        # The TaskManagers still reachable hear it from ZooKeeper (seed 004).
        flapping = self.slots[-1]
        for tm in self.slots:
            if tm is flapping:
                continue
            at = t + irng.randrange(100, 2_000)
            self._log(
                at,
                "task_executor",
                "INFO",
                f"JobManager for job {jid} with leader id {self._leader_id()} lost leadership.",
                self._idispatcher(),
                tm=tm,
            )
            self._log(
                at + irng.randrange(1, 6),
                "task_executor",
                "INFO",
                f"Close JobManager connection for job {jid}.",
                self._idispatcher(),
                tm=tm,
            )

    def _log_registration_timeout(self, t: int, tm: _TaskManager) -> None:
        """The flapping TaskManager never got back to the ResourceManager: it gives up."""
        address = self._rpc_address(tm.host, tm.rpc_port, "taskmanager_0")
        limit = f"{_REGISTRATION_TIMEOUT_MS} ms" if self.ver < (1, 16) else "PT5M"
        trace = (
            "org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException: "
            f"Could not register at the ResourceManager within the specified maximum "
            f"registration duration {limit}. This indicates a problem with this instance. "
            "Terminating now.\n"
            + self._frames(
                "org.apache.flink.runtime.taskexecutor.TaskExecutor.registrationTimeout("
                "TaskExecutor.java:1494)",
                "org.apache.flink.runtime.taskexecutor.TaskExecutor.lambda$startRegistrationTimeout"
                "$17(TaskExecutor.java:1479)",
            )
        )
        thread = self._idispatcher()
        self._log(
            t,
            "task_executor",
            "ERROR",
            f"Fatal error occurred in TaskExecutor {address}.",
            thread,
            trace,
            tm=tm,
        )
        self._log(
            t + self.irng.randrange(2, 20),
            "tm_runner",
            "ERROR",
            "Fatal error occurred while executing the TaskManager. Shutting it down...",
            thread,
            trace,
            tm=tm,
        )

    # -- metrics -----------------------------------------------------------------------

    def _init_metrics(self, start_ms: int) -> None:
        # Metric noise has its own generators (this one for the setup, one per TaskManager
        # for its samples) so injecting an incident (which changes how much randomness the
        # log side, or one TaskManager, draws) does not reshuffle every other metric value.
        self.mrng = rng = random.Random(f"{self.spec.seed}/metrics/{self.index}")
        self.metric_ms = round(self.spec.metric_interval_s * 1000)
        self._job_series()
        self.next_job_tick = self.running_ms + rng.randrange(0, self.metric_ms)

        gib = 1024 * 1024 * 1024
        heap_max = int(rng.choice((1, 2, 4)) * gib * rng.uniform(0.9, 0.97)) // 2**20 * 2**20
        self.heap_max = heap_max
        self.tm_states = [
            self._tm_state(tm, start_ms + rng.randrange(1000, 3000), rng, f"tm/{tm.index}")
            for tm in self.tms
        ]

    def _job_series(self) -> None:
        """The job's JobManager series, for its current job id."""
        jm_labels = {
            "host": _label(self.jm_host),
            "job_id": self.jid,
            "job_name": _label(self.name),
        }
        jm_url = f"http://{self.jm_host}:9249/metrics"

        def job_series(name: str) -> _Series:
            return _Series.of(
                f"flink_jobmanager_job_{name}", jm_labels, self.jid, self.telegraf, jm_url
            )

        self.s_duration = job_series("lastCheckpointDuration")
        self.s_size = job_series("lastCheckpointSize")
        self.s_completed = job_series("numberOfCompletedCheckpoints")
        self.s_failed = job_series("numberOfFailedCheckpoints")

    def _new_tm_state(self, tm: _TaskManager, first_ms: int) -> _TmState:
        """Metrics of a TaskManager started to replace a lost one, from ``first_ms`` on."""
        number = self.tm_started - 1
        setup = random.Random(f"{self.spec.seed}/metrics/{self.index}/setup/{number}")
        st = self._tm_state(tm, first_ms - self.metric_ms, setup, f"tm/{number}")
        st.next_ms = max(st.next_ms, first_ms)
        st.last_ms = first_ms
        self.tm_states.append(st)
        return st

    def _tm_state_of(self, slot: int, t: int) -> _TmState:
        """The metric state of the TaskManager that runs ``slot`` at ``t`` (when planning)."""
        return [st for st in self.tm_states if st.tm.index == slot and st.next_ms <= t][-1]

    def _tm_state(self, tm: _TaskManager, first_ms: int, rng: random.Random, name: str) -> _TmState:
        labels = {"host": _label(tm.host), "tm_id": _label(tm.tm_id)}
        url = f"http://{tm.host}:9249/metrics"

        def series(metric: str) -> _Series:
            return _Series.of(f"flink_taskmanager_{metric}", labels, tm.tm_id, self.telegraf, url)

        heap_max = self.heap_max
        floor = heap_max * rng.uniform(0.12, 0.3)
        ceiling = heap_max * rng.uniform(0.6, 0.85)
        gc_count = rng.randrange(0, 50)
        return _TmState(
            tm=tm,
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
            last_ms=self.running_ms,
            rng=random.Random(f"{self.spec.seed}/metrics/{self.index}/{name}"),
        )

    def _task_series(self, st: _TmState) -> tuple[_TaskSeries, ...]:
        """The series of the tasks ``st``'s TaskManager runs in the current deployment."""
        if st.tasks_of == (self.deployment, self.jid):
            return st.tasks
        tm = st.tm
        labels = {"host": _label(tm.host), "tm_id": _label(tm.tm_id)}
        url = f"http://{tm.host}:9249/metrics"
        tasks = []
        for task in self.tasks:
            if task.subtask != tm.index:
                continue
            task_labels = {
                **labels,
                "job_id": self.jid,
                "job_name": _label(self.name),
                "task_id": task.vertex_id,
                "task_name": _label(task.name),
                "task_attempt_id": self._attempt_id(task),
                "task_attempt_num": str(self.attempt_no),
                "subtask_index": str(task.subtask),
            }

            def series(metric: str, labels: dict[str, str] = task_labels) -> _Series:
                return _Series.of(
                    f"flink_taskmanager_job_task_{metric}", labels, tm.tm_id, self.telegraf, url
                )

            tasks.append(
                _TaskSeries(
                    task,
                    series("numRecordsInPerSecond"),
                    series("numRecordsOutPerSecond"),
                    series("numRecordsIn"),
                    series("numRecordsOut"),
                )
            )
        st.tasks, st.tasks_of = tuple(tasks), (self.deployment, self.jid)
        return st.tasks

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
            if self.jm_up:
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
        extra = self._state_heap(t)
        if busy and extra:
            used = self._full_heap(st, extra)
        elif busy:
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
        if not self.tasks_running or st.tm is not self.slots[st.tm.index]:
            return
        tasks = self._task_series(st)
        elapsed_s = max(t - st.last_ms, 0) / 1000
        st.last_ms = max(st.last_ms, t)
        if not busy:
            # Idle: meters read 0 and counters stand still.
            for ts in tasks:
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
        for ts in tasks:
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

    def _state_heap(self, t: int) -> float:
        """Heap bytes the state_growth state adds to every TaskManager's live set at ``t``."""
        growth = self.growth
        if growth is None or t < growth.onset_ms:
            return 0.0
        return (growth.size(t) - growth.base) * 1.5 / growth.tms

    def _full_heap(self, st: _TmState, extra: float) -> float:
        """Heap used of a busy TaskManager whose live set is ``extra`` bytes larger.

        The fuller the heap, the less each collection frees and the more of them it takes
        to make room for the same allocation, each longer: GC time climbs steeply as the
        floor nears the maximum.
        """
        rng = st.rng
        floor = min(st.floor + extra, st.heap_max * 0.97)
        ceiling = min(st.ceiling + extra, st.heap_max * 0.98)
        room = max(ceiling - floor, 2**20)
        alloc = st.growth * (self.metric_ms / 1000) * rng.uniform(0.7, 1.3)
        used = max(st.used + alloc, floor)
        if used > ceiling:
            collections = min(max(1, int(alloc / room)), 1000)
            slow = 1 + 20 * max(floor / st.heap_max - 0.7, 0)
            st.gc_count += collections
            st.gc_time += int(collections * rng.randrange(5, 60) * slow)
            used = floor * rng.uniform(1.0, 1.05) + min(used - ceiling, room) * 0.2
        return min(used, float(st.heap_max))

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


@dataclass(slots=True)
class _Growth:
    """state_growth: the job's state size over time (see ``_Job._plan_state_growth``)."""

    onset_ms: int
    base: float  # the job's usual checkpoint size
    slope: float  # growth, bytes per ms
    bytes_per_ms: float  # how fast a snapshot is written out
    peak_ms: int  # the state stops growing (the job fails over soon after)
    resume_ms: int  # restored: the excess halves every checkpoint interval from here
    tms: int
    half_life_ms: int = 0

    def size(self, t: int) -> float:
        grown = self.base + self.slope * (min(t, self.peak_ms) - self.onset_ms)
        if t < self.resume_ms:
            return grown
        halvings = (t - self.resume_ms) / self.half_life_ms
        return self.base + (grown - self.base) * math.pow(0.5, halvings)


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
    first = spec.first_job
    jobs = [_Job(spec, i, start_ms, end_ms) for i in range(first, first + spec.jobs)]
    return heapq.merge(*(j.records() for j in jobs), key=attrgetter("time_ms"))


# --- producer --------------------------------------------------------------------------

_PROGRESS_EVERY = 1000


def produce(
    records: Iterable[SimRecord],
    bootstrap: str | Mapping[str, Any],
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
        bootstrap: Kafka bootstrap servers, ``host:port[,host:port]``, or kafka-python
            connection settings (:attr:`conf.kafka_client.KafkaSettings.python`) for a
            secured broker.
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
        KafkaConnectError: no connection to the brokers (login or TLS refused, or none
            answered within a minute).

    """
    from streaming.topics import connect

    settings = {"bootstrap_servers": bootstrap} if isinstance(bootstrap, str) else bootstrap
    producer = connect(KafkaProducer, settings, linger_ms=20, batch_size=256 * 1024)
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
