"""Incidents change a job from their onset only, and play out as planned."""

from __future__ import annotations

import json
import re
import statistics

import pytest

from lab import fleet as sim
from lab.fleet import FleetSpec, Incident, job_id, tm_id
from tests.lab.fleet.helpers import (
    COMPLETED,
    DEFAULT_LAYOUT,
    K8S_111,
    LOG4J2,
    RESTORED,
    START_MS,
    TASK_STATE,
    by_job,
    floors,
    full,
    level,
    log4j_ms,
    message,
    messages,
    points,
    restart_after,
    run,
)

# --- every incident -----------------------------------------------------------------------


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


# --- idle_heap_leak -----------------------------------------------------------------------


LEAK_FAST = 20_000.0  # MiB/h: the heap fills in minutes


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


# --- state_growth -------------------------------------------------------------------------


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
