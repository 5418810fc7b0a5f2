"""A job fails over and comes back: failed tasks, restart, restore, redeploy."""

from __future__ import annotations

import json
import re

import pytest

from lab.fleet import FleetSpec, Incident, job_id, tm_id
from lab.fleet.identity import Identity
from lab.fleet.metrics import label
from tests.lab.fleet.helpers import (
    COMPLETED,
    JOB_STATE,
    RESTORED,
    START_MS,
    TASK_STATE,
    by_job,
    full,
    messages,
    points,
    restart_after,
    run,
)

# --- tm_memory_kill and the restart every failover ends in --------------------------------


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
    vertex = next(k for k in Identity(spec, job).tasks if k.subtask == 0)
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
    assert max(t for t, _ in used[f"{label(tm)}|"]) < onset_ms
    assert min(t for t, _ in used[f"{label(new_tm)}|"]) > onset_ms
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


# --- restart_storm ------------------------------------------------------------------------


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
