"""What to simulate and what comes out: the fleet, its incidents, its records."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from lab.fleet.ids import on_k8s
from lab.fleet.wording import parse_version

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
    "new_error",
]

#: Incident kinds :func:`generate` knows how to inject.
INCIDENT_KINDS: frozenset[str] = frozenset(get_args(IncidentKind))

# Kinds that fail the job over: all but the checkpoint ones. A job takes at most one of
# them: each plans its own failovers and restarts, and two plans would have to be merged.
_FAILOVER_KINDS = INCIDENT_KINDS - {
    "checkpoint_expiry",
    "checkpoint_creep",
    "late_acks_skew",
    "checkpoint_declines",
    "new_error",
}


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

            * ``new_error``: the job's own code starts failing to look up reference data
              in a remote service: an ERROR line with a ``SocketTimeoutException`` every
              5-40 s on a source subtask's thread; the job keeps running (see
              ``lab/fleet/background.py``). Only a JSON layout on 1.19+ names the job in
              those lines (the MDC), so only there can a job detector see it.

            A job takes at most one of the kinds that fail it over (all but
            ``checkpoint_expiry``, ``checkpoint_creep``, ``late_acks_skew``,
            ``checkpoint_declines`` and ``new_error``). Replacement TaskManagers are named by
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
            parse_version(v)
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
                ver = parse_version(self.flink_versions[inc.job_index % len(self.flink_versions)])
                if not on_k8s(inc.job_index) or not (1, 10) <= ver <= (1, 11):
                    msg = (
                        f"{inc.kind} needs a job on Kubernetes (index % 4 in 2, 3) running Flink "
                        f"1.10 or 1.11 (1.12.2+ re-creates the watch, FLINK-20417); job "
                        f"{inc.job_index} runs {ver[0]}.{ver[1]} on "
                        f"{'Kubernetes' if on_k8s(inc.job_index) else 'YARN'}"
                    )
                    raise ValueError(msg)
        for i in {c.job_index for c in self.incidents}:
            kinds = sorted({c.kind for c in self.incidents if c.job_index == i} & _FAILOVER_KINDS)
            if len(kinds) > 1:
                msg = f"job {i} has more than one incident that fails it over: {kinds}"
                raise ValueError(msg)
