"""What a Flink version writes: its release, loggers, message wording and timestamps.

Follows ``FLINK_FORMATS.md``: the wording of a job's lines depends on its version, fixed
once per job in :class:`Wording` and :func:`sites_of` so that the hot loop only formats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache


def parse_version(v: str) -> tuple[int, int]:
    """``(major, minor)`` of a Flink version such as ``"1.18"`` or ``"1.10.2"``.

    Raises:
        ValueError: not ``MAJOR.MINOR[.PATCH]``, or older than 1.5.

    """
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


def release_of(ver: tuple[int, int]) -> str:
    """The patch release of ``ver`` whose jar names and version strings a job prints."""
    return _RELEASES.get(ver, f"{ver[0]}.{ver[1]}.0")


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
    # from ResourceManager.java under YarnResourceManager's logger instead (see sites_of).
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
    # The job's own code (the healthy background and the new_error incident, background.py).
    "user_drop": ("com.example.pipeline.RecordDecoder", "RecordDecoder.java", "57"),
    "user_lookup": ("com.example.pipeline.ReferenceLookup", "ReferenceLookup.java", "88"),
}

#: Sites logged outside any job's context: on 1.19+ their JSON records carry no job id in
#: the MDC (``flink-job-id``, FLINK-34417), which the JobManager's job lines and the
#: TaskManager's task threads carry. A legacy Kafka fetcher thread is the task's own
#: thread's child and does not inherit it.
PROCESS_SITES = frozenset(
    {
        "worker_terminated",
        "tm_signal",
        "task_executor",
        "tm_runner",
        "entrypoint",
        "blob",
        "rm_heartbeat",
        "rm_close",
        "rm_fatal",
        "fatal_exit",
        "commit_failed_legacy",
        "remote_gated",
    }
)

# CheckpointCoordinator$CheckpointCanceller.run line per release (illustrative).
_CANCELLER_LINES = {(1, 15): 2143, (1, 16): 2155, (1, 17): 2183, (1, 18): 2216, (1, 19): 2242}

JDK_FRAMES = (
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
COMMIT_FAILURE_TRACE = (
    "org.apache.kafka.clients.consumer.RetriableCommitFailedException: Offset commit failed "
    "with a retriable exception. You should retry committing the latest consumed offsets.\n"
    "Caused by: org.apache.kafka.common.errors.CoordinatorNotAvailableException: "
    "The coordinator is not available."
)


def sites_of(ver: tuple[int, int], k8s: bool) -> dict[str, tuple[str, str, str]]:
    """Where each message is logged from, ``(logger, file, line)`` by site name.

    As a job of version ``ver`` on YARN or Kubernetes (``k8s``) logs them.
    """
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
    # The RPC system's remoting: Akka until 1.17, Pekko from 1.18 (FLINK-32468).
    remoting = "org.apache.pekko.remote" if ver >= (1, 18) else "akka.remote"
    sites["remote_gated"] = (
        f"{remoting}.ReliableDeliverySupervisor",
        "ReliableDeliverySupervisor.scala",
        "0",
    )
    return sites


FLINK_EXC = "org.apache.flink.util.FlinkException"

# Flink 1.11+ rewrites a TaskManager's Metaspace OutOfMemoryError in place (FLINK-15989).
ENRICHED_METASPACE = (
    "Metaspace. The metaspace out-of-memory error has occurred. This can mean two things: "
    "either the job requires a larger size of JVM metaspace to load classes or there is a "
    "class loading leak. In the first case 'taskmanager.memory.jvm-metaspace.size' "
    "configuration option should be increased. If the error persists (usually in cluster after "
    "several job (re-)submissions) then there is probably a class loading leak in user code or "
    "some of its dependencies which has to be investigated and fixed. The task executor has to "
    "be shutdown..."
)


@dataclass(frozen=True, slots=True)
class Wording:
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
    mdc_job_id: bool  # 1.19+: the job id in the logging MDC (FLINK-34417)
    io_thread: str  # JobManager I/O executor threads
    frame_jar: str  # packaging suffix of Flink frames
    expire_line: int  # CheckpointCanceller frame line

    @staticmethod
    def of(ver: tuple[int, int]) -> Wording:
        """The wording of Flink ``ver``."""
        release = release_of(ver)
        jar = f"flink-dist-{release}.jar" if ver >= (1, 15) else f"flink-dist_2.12-{release}.jar"
        if ver < (1, 11):
            trigger_type = None
        elif ver < (1, 15):
            trigger_type = "CHECKPOINT"
        else:
            trigger_type = (
                "CheckpointType{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}"
            )
        return Wording(
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
            mdc_job_id=ver >= (1, 19),
            io_thread="jobmanager-io-thread" if ver >= (1, 15) else "jobmanager-future-thread",
            frame_jar=f" [{jar}:{release}]",
            expire_line=_CANCELLER_LINES.get(ver, 2216),
        )


# --- timestamps and sizes --------------------------------------------------------------


@lru_cache(maxsize=4096)
def _second_text(sec: int) -> str:
    return datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%d %H:%M:%S")


def log4j_ts(ms: int) -> str:
    """``ms`` as log4j's ``%d`` prints it, in UTC."""
    # %d{yyyy-MM-dd HH:mm:ss,SSS}; most records share a second with the one before.
    sec, milli = divmod(ms, 1000)
    return f"{_second_text(sec)},{milli:03d}"


def iso_ts(ms: int) -> str:
    """``ms`` as a container runtime stamps a log line (RFC 3339, nanoseconds, UTC)."""
    # Container runtimes stamp with nanoseconds; the digits below the millisecond are noise.
    sec, milli = divmod(ms, 1000)
    return f"{_second_text(sec).replace(' ', 'T')}.{milli:03d}{(ms * 7919) % 1_000_000:06d}Z"


def hadoop_ts(ms: int) -> str:
    """``ms`` as Hadoop 3 prefixes a container diagnostic."""
    # Hadoop 3 prefixes each container diagnostic with [yyyy-MM-dd HH:mm:ss.SSS].
    sec, milli = divmod(ms, 1000)
    return f"[{_second_text(sec)}.{milli:03d}]"


def hadoop_size(n: int) -> str:
    """Bytes as Hadoop's ``TraditionalBinaryPrefix.long2String(n, "B", 1)`` prints them.

    Exact multiples print whole (``3 GB``), anything else with one decimal (``3.0 GB``).
    """
    for shift, symbol in ((40, "T"), (30, "G"), (20, "M"), (10, "K")):
        if n >= 1 << shift:
            if n & ((1 << shift) - 1) == 0:
                return f"{n >> shift} {symbol}B"
            return f"{n / (1 << shift):.1f} {symbol}B"
    return f"{n} B"
