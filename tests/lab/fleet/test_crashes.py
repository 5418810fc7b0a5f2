"""What dying processes log: JVM fatal errors, a JobManager crash, a flapping TaskManager."""

from __future__ import annotations

import json
import re

import pytest

from lab.fleet import FleetSpec, Incident, job_id, tm_id
from tests.lab.fleet.helpers import (
    COMPLETED,
    JOB_STATE,
    K8S_111,
    RESTORED,
    START_MS,
    TASK_STATE,
    by_job,
    full,
    level,
    message,
    messages,
    points,
    restart_after,
    run,
)

# --- JVM fatal errors on a TaskManager ----------------------------------------------------


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


# --- k8s_watch_crash ----------------------------------------------------------------------


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
