"""Checkpoints: healthy ones, their chatter, and the incidents that fail them."""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict

import pytest

from detectors import AlertStatus, Event
from detectors.checkpoint_state_growth import CheckpointStateGrowth, CheckpointStateGrowthParams
from detectors.testing import drive
from lab.fleet import FleetSpec, Incident, generate, job_id, tm_id
from tests.lab.fleet.helpers import (
    COMPLETED,
    START_MS,
    by_job,
    full,
    level,
    message,
    messages,
    points,
    run,
)

# --- healthy checkpoints ------------------------------------------------------------------


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


# --- checkpoint_expiry --------------------------------------------------------------------


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


# --- checkpoint_creep ---------------------------------------------------------------------


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


# --- checkpoint_declines ------------------------------------------------------------------


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


# --- late_acks_skew -----------------------------------------------------------------------


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
