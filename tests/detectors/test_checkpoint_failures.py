"""checkpoint_failures as a plain state machine: events in, steps out, time injected."""

from __future__ import annotations

import json

import pytest

from detectors import REGISTRY, AlertStatus, Event, Step
from detectors.checkpoint_failures import (
    CheckpointFailures,
    CheckpointFailuresParams,
    CheckpointFailuresState,
    counts,
    failure_reason,
)
from detectors.testing import DetectorTester, drive
from detectors.words import at

JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
S = 1000
MIN = 60_000
T0 = 1_717_400_000_000
TASK = "a1b2c3d4e5f60718293a4b5c6d7e8f90_cbc357ccb763df2852fee8c4fc7d55f2_3_0"


def expired(cp: int, t: int) -> Event:
    return Event(kind="checkpoint_expired", time_ms=t, job_id=JOB, checkpoint_id=cp)


def completed(cp: int, t: int) -> Event:
    return Event(
        kind="checkpoint_completed", time_ms=t, job_id=JOB, checkpoint_id=cp, duration_ms=900
    )


def triggered(cp: int, t: int, kind: str = "Checkpoint") -> Event:
    return Event(kind="checkpoint_triggered", time_ms=t, job_id=JOB, checkpoint_id=cp, reason=kind)


def declined(cp: int, t: int, reason: str | None = None, task: str = TASK) -> Event:
    message = f"Decline checkpoint {cp} by task {task} of job {JOB} at tm-1 @ host-1 (dataPort=1)."
    if reason:
        message += "\n" + reason
    return Event(
        kind="checkpoint_declined",
        time_ms=t,
        job_id=JOB,
        checkpoint_id=cp,
        task=task,
        reason=reason,
        message=message,
    )


def failed(cp: int | None, t: int, reason: str | None, first_line: str | None = None) -> Event:
    line = first_line or (
        f"Failed to trigger or complete checkpoint {cp} for job {JOB}. "
        "(0 consecutive failed attempts so far)"
    )
    exc = f"org.apache.flink.runtime.checkpoint.CheckpointException: {reason}" if reason else None
    return Event(
        kind="checkpoint_failed",
        time_ms=t,
        job_id=JOB,
        checkpoint_id=cp,
        reason=reason,
        message=line + (f"\n{exc}" if exc else ""),
    )


def run(
    det: CheckpointFailures, events: list[Event], state: CheckpointFailuresState | None = None
) -> tuple[CheckpointFailuresState | None, list]:
    """Events only, no deadline passes after the last one."""
    return drive(det, events, state=state)


def test_registered_under_its_contract_name() -> None:
    assert REGISTRY["checkpoint_failures"] is CheckpointFailures


# --- expirations: the behaviour before failures of other kinds counted ---------------------


def test_fires_once_at_the_third_distinct_expiry_and_resolves_after_two_completions() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    events = [expired(10 + i, T0 + i * MIN) for i in range(5)]
    events += [completed(15, T0 + 9 * MIN), completed(16, T0 + 10 * MIN)]
    _, alerts = run(det, events)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, T0 + 2 * MIN),
        (AlertStatus.RESOLVED, T0 + 10 * MIN),
    ]
    assert alerts[0].alert_id == alerts[1].alert_id
    assert alerts[0].job_id == JOB
    assert alerts[0].evidence["expired_checkpoints"] == [10, 11, 12]
    assert alerts[0].evidence["reasons"] == {"expired": 3}
    assert alerts[0].summary == f"3 checkpoints of job {JOB} expired within 30 min"


def test_the_same_checkpoint_logged_twice_counts_once() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    _, alerts = run(det, [expired(7, T0), expired(7, T0 + 1), expired(8, T0 + MIN)])
    assert alerts == []


def test_expirations_spread_wider_than_the_window_stay_quiet() -> None:
    det = CheckpointFailures(CheckpointFailuresParams(window_s=600))
    _, alerts = run(det, [expired(i, T0 + i * 6 * MIN) for i in range(6)])
    assert alerts == []


def test_one_completion_between_expiries_does_not_resolve() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    events = [expired(1, T0), expired(2, T0 + MIN), expired(3, T0 + 2 * MIN)]
    events += [completed(4, T0 + 3 * MIN), expired(5, T0 + 4 * MIN), completed(6, T0 + 5 * MIN)]
    _, alerts = run(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]


def test_a_second_incident_gets_a_new_alert_id() -> None:
    det = CheckpointFailures(CheckpointFailuresParams(resolve_after_completed=1))
    first = [expired(i, T0 + i * MIN) for i in range(3)] + [completed(3, T0 + 8 * MIN)]
    second = [expired(10 + i, T0 + (40 + i) * MIN) for i in range(3)]
    _, alerts = run(det, first + second)
    assert [a.status for a in alerts] == [
        AlertStatus.FIRING,
        AlertStatus.RESOLVED,
        AlertStatus.FIRING,
    ]
    assert alerts[2].alert_id != alerts[0].alert_id


def test_timer_ages_out_the_window_then_evicts_an_idle_job_resolving_it() -> None:
    params = CheckpointFailuresParams(window_s=600, idle_ttl_s=3600, clear_for_s=0)
    det = CheckpointFailures(params)
    state, alerts = run(det, [expired(i, T0 + i * MIN) for i in range(3)])
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    step = det.advance(state, None, completed(9, T0 + 3 * MIN))
    # The next timer is when the oldest expiry leaves the window.
    assert step.timer_ms == T0 + 600_000 + 1
    aged = det.fire_due(step.state, step.timer_ms, step.timer_ms)
    assert aged.state is not None
    assert det.signal_values(aged.state)["checkpoints_expired"] == 2.0
    # Nothing more from the job: at the idle TTL the state goes and the alert resolves.
    idle_at = T0 + 3 * MIN + 3_600_000
    assert aged.timer_ms is not None and aged.timer_ms < idle_at
    final: Step = det.fire_due(aged.state, aged.timer_ms, idle_at)
    assert final.state is None
    assert [(a.status, a.summary) for a in final.alerts] == [
        (AlertStatus.RESOLVED, f"job {JOB}: no events from this job any more")
    ]
    # By then the window has aged every expiry out.
    assert final.alerts[0].evidence["expired_checkpoints"] == []


def test_state_stays_bounded_under_a_flood_of_failures() -> None:
    det = CheckpointFailures(CheckpointFailuresParams(max_tracked=20, min_streak=10_000))
    events = []
    for i in range(300):
        events.append(expired(3 * i, T0 + i * 1000))
        events.append(declined(3 * i + 1, T0 + i * 1000 + 1, f"java.io.IOException: disk {i}"))
        events.append(failed(None, T0 + i * 1000 + 2, "Not all required tasks are running."))
    state, _ = run(det, events)
    assert state is not None
    assert len(state.failed) == 20 and len(state.streak_ids) == 20
    assert len(state.uncounted) <= 20 and len(state.examples) <= 3
    # Measured: the worst case with the default caps stays under 10 KB.
    worst = CheckpointFailures(CheckpointFailuresParams(min_streak=10_000))
    big = [declined(10**15 + i, T0 + i, "x" * 400 + str(i), task="t" * 80) for i in range(300)]
    state, _ = run(worst, big)
    assert state is not None and len(json.dumps(worst.dump(state))) < 10_000


def test_signals_count_distinct_expiries_and_counted_failures_in_the_window() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    events = [expired(7, T0), expired(7, T0 + 1000), expired(8, T0 + MIN)]
    events += [declined(9, T0 + 2 * MIN, "Checkpoint was declined (tasks not ready)")]
    events += [declined(10, T0 + 3 * MIN)]
    state, _ = run(det, events)
    assert state is not None
    assert det.signal_values(state) == {"checkpoints_expired": 2.0, "checkpoints_failed": 3.0}


# --- declines and other failures ----------------------------------------------------------


def test_many_tasks_declining_one_checkpoint_count_once() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    events = [declined(40, T0 + k, task=f"{k:032x}") for k in range(12)]
    events += [declined(41, T0 + MIN + k, task=f"{k:032x}") for k in range(12)]
    state, alerts = run(det, events)
    assert alerts == [] and state is not None
    assert det.signal_values(state)["checkpoints_failed"] == 2.0


def test_expired_declined_and_failed_checkpoints_fire_together_with_counted_reasons() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    async_failure = "Task name with subtask : Sink (1/2)#0 Failure reason: Asynchronous task "
    events = [
        expired(100, T0),
        failed(100, T0 + 1, "Checkpoint expired before completing."),
        declined(101, T0 + 2 * MIN, "java.io.IOException: Could not flush to s3://b/chk-101"),
        failed(101, T0 + 2 * MIN + 2, async_failure + "checkpoint failed."),
        failed(102, T0 + 4 * MIN, "Failure to finalize checkpoint."),
    ]
    _, alerts = run(det, events)
    assert [(a.status, a.event_time_ms) for a in alerts] == [(AlertStatus.FIRING, T0 + 4 * MIN)]
    ev = alerts[0].evidence
    assert ev["failed_checkpoints"] == [100, 101, 102]
    assert ev["expired_checkpoints"] == [100]
    assert ev["reasons"] == {"async_failure": 1, "expired": 1, "finalize_failure": 1}
    # The first text of each reason is kept for the person paged.
    assert ev["examples"]["finalize_failure"] == "Failure to finalize checkpoint."
    assert alerts[0].summary.startswith(
        f"3 checkpoints of job {JOB} failed within 30 min (1 async failure, 1 expired, "
    )


def test_a_later_line_with_a_reason_that_does_not_count_takes_the_checkpoint_back() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    not_ready = "Task name with subtask : Map (2/4)#0 Failure reason: Checkpoint was declined"
    events = [declined(5, T0), failed(5, T0 + 2, not_ready + " (tasks not ready)")]
    events += [expired(6, T0 + MIN), expired(7, T0 + 2 * MIN)]
    state, alerts = run(det, events)
    assert alerts == [] and state is not None
    assert state.streak_ids == [6, 7]
    # A third counted failure fires; the decline stays listed as not counted.
    _, alerts = run(det, [expired(8, T0 + 3 * MIN)], state)
    assert alerts[0].evidence["not_counted"] == {"task_not_ready": 1}
    # For a chart: every failure of the window on a time line, counted or not.
    assert alerts[0].evidence["timeline"] == [
        [T0, 5, "task_not_ready", False],
        [T0 + MIN, 6, "expired", True],
        [T0 + 2 * MIN, 7, "expired", True],
        [T0 + 3 * MIN, 8, "expired", True],
    ]
    assert alerts[0].evidence["failed_checkpoints"] == [6, 7, 8]


def test_the_evidence_timeline_holds_failures_without_an_id_and_the_newest_60() -> None:
    det = CheckpointFailures(CheckpointFailuresParams(max_tracked=100, min_expired=1000))
    events = [failed(None, T0, None, f"Failed to trigger checkpoint for job {JOB}.")]
    events += [expired(i, T0 + i * S) for i in range(1, 80)]
    state, _ = run(det, events)
    timeline = det.evidence(state).timeline
    assert len(timeline) == 60
    assert [m.checkpoint_id for m in timeline] == list(range(20, 80))
    state, _ = run(det, events[:3])
    assert [tuple(m) for m in det.evidence(state).timeline] == [
        (T0, None, "trigger_failure", False),
        (T0 + S, 1, "expired", True),
        (T0 + 2 * S, 2, "expired", True),
    ]


def test_restart_trigger_failures_do_not_count() -> None:
    # While a job restarts every trigger fails because tasks are not running (1.13-2.0
    # wordings); Flink does not count these towards its tolerable failures either.
    det = CheckpointFailures(CheckpointFailuresParams())
    since = (
        f"Failed to trigger checkpoint for job {JOB} since Checkpoint triggering task Source: "
        f"orders (1/4) of job {JOB} is not being executed at the moment. Aborting checkpoint. "
        "Failure reason: Not all required tasks are currently running.."
    )
    due = (
        f"Triggering Checkpoint {{}} for job {JOB} failed due to org.apache.flink.runtime."
        "checkpoint.CheckpointException: Not all required tasks are currently running."
    )
    events = []
    for i in range(6):
        events.append(failed(None, T0 + i * MIN, None, first_line=since))
        events.append(
            failed(
                300 + i,
                T0 + i * MIN + 1,
                "org.apache.flink.runtime.checkpoint.CheckpointException: Not all required tasks "
                "are currently running.",
                first_line=due.format(300 + i),
            )
        )
    state, alerts = run(det, events)
    assert alerts == [] and state is not None
    assert det.signal_values(state)["checkpoints_failed"] == 0.0


def test_savepoint_failures_do_not_count_and_one_declined_checkpoint_stays_quiet() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    async_failure = "Task name with subtask : Sink (1/1)#0 Failure reason: Asynchronous task "
    events: list[Event] = []
    for i, kind in enumerate(["Terminate Savepoint", "Checkpoint", "Savepoint", "SYNC_SAVEPOINT"]):
        t = T0 + i * 3 * MIN
        events += [triggered(880 + i, t, kind), declined(880 + i, t + 2000, "java.io.IOException")]
        events += [failed(880 + i, t + 2003, async_failure + "checkpoint failed.")]
    state, alerts = run(det, events)
    assert alerts == [] and state is not None
    assert det.signal_values(state)["checkpoints_failed"] == 1.0
    # Savepoint completions are no checkpoint completions either.
    state, _ = run(det, [triggered(890, T0 + 20 * MIN, "Savepoint")], state)
    state, _ = run(det, [completed(890, T0 + 21 * MIN)], state)
    assert state is not None and state.completed_streak == 0


def test_min_failed_defaults_to_min_expired_and_can_be_set_apart() -> None:
    events = [declined(i, T0 + i * MIN, "java.io.IOException: sink down") for i in range(5)]
    _, alerts = run(CheckpointFailures(CheckpointFailuresParams(min_expired=5)), events)
    assert [a.event_time_ms for a in alerts] == [T0 + 4 * MIN]
    params = CheckpointFailuresParams(min_expired=2, min_failed=4)
    _, alerts = run(CheckpointFailures(params), events)
    assert [a.event_time_ms for a in alerts] == [T0 + 3 * MIN]
    # Expirations alone still fire at min_expired.
    _, alerts = run(CheckpointFailures(params), [expired(1, T0), expired(2, T0 + MIN)])
    assert [a.event_time_ms for a in alerts] == [T0 + MIN]


def test_streak_catches_failures_further_apart_than_the_window() -> None:
    # A job checkpointing every 30 minutes: no window of 30 minutes holds three failures.
    params = CheckpointFailuresParams(min_streak=3)
    events = [expired(i, T0 + i * 30 * MIN) for i in range(3)]
    _, alerts = run(CheckpointFailures(params), events)
    assert [a.event_time_ms for a in alerts] == [T0 + 60 * MIN]
    assert alerts[0].evidence["streak"] == 3
    assert alerts[0].summary == (
        f"3 checkpoints of job {JOB} failed in a row without a completed checkpoint"
    )
    # A completed checkpoint between them breaks the streak.
    events.insert(2, completed(99, T0 + 45 * MIN))
    _, alerts = run(CheckpointFailures(params), events)
    assert alerts == []
    # Off by default.
    _, alerts = run(CheckpointFailures(CheckpointFailuresParams()), events[:2] + events[3:])
    assert alerts == []


def test_state_of_the_previous_version_is_migrated() -> None:
    det = CheckpointFailures(CheckpointFailuresParams())
    old = {
        "v": 1,
        "entity": f"job:{JOB}",
        "job_id": JOB,
        "job_name": None,
        "tm_id": None,
        "host": None,
        "firing": False,
        "incident_start_ms": None,
        "clear_since_ms": None,
        "last_event_ms": T0 + MIN,
        "expired": {"1": T0, "2": T0 + MIN},
        "completed_streak": 0,
    }
    loaded = det.load(old)
    assert det.signal_values(loaded) == {"checkpoints_expired": 2.0, "checkpoints_failed": 2.0}
    state, alerts = run(det, [expired(3, T0 + 2 * MIN)], loaded)
    assert [a.evidence["expired_checkpoints"] for a in alerts] == [[1, 2, 3]]
    assert state is not None and det.dump(state)["v"] == 2 and "expired" not in det.dump(state)


@pytest.mark.parametrize(
    ("event", "key"),
    [
        (expired(1, T0), "expired"),
        (failed(1, T0, "Checkpoint expired before completing."), "expired"),
        (declined(1, T0), "declined"),
        (declined(1, T0, "java.io.IOException: No space left on device"), "declined"),
        (
            declined(
                1,
                T0,
                "SerializedThrowable: Task name with subtask : Src (3/4)#0 Failure "
                "reason: Task has failed.",
            ),
            "task_failure",
        ),
        (failed(1, T0, "Checkpoint was declined (tasks not ready)"), "task_not_ready"),
        (
            failed(1, T0, "Task received cancellation from one of its inputs"),
            "cancellation_barrier",
        ),
        (failed(1, T0, "Checkpoint Coordinator is suspending."), "coordinator_stopped"),
        (failed(1, T0, "Checkpoint has been subsumed."), "subsumed"),
        (failed(1, T0, "Asynchronous task checkpoint failed."), "async_failure"),
        (failed(1, T0, "Failure to finalize checkpoint."), "finalize_failure"),
        (
            failed(
                1, T0, "An Exception occurred while triggering the checkpoint. IO-problem detected."
            ),
            "io_exception",
        ),
        (failed(1, T0, "Trigger checkpoint failure."), "trigger_failure"),
        (failed(1, T0, "java.lang.IllegalStateException: boom"), "other"),
        (failed(1, T0, None), "unknown"),
        (
            failed(
                None,
                T0,
                None,
                first_line=f"Failed to trigger checkpoint for job {JOB} (3 "
                "consecutive failed attempts so far).",
            ),
            "trigger_failure",
        ),
        (
            Event(
                kind="checkpoint_failed",
                time_ms=T0,
                reason="The latest checkpoint failed due to Checkpoint expired before completing"
                "., view the Checkpoint History tab or the Job Manager log to find out why "
                "continuous checkpoints failed.",
                message="Trying to recover from a global failure.\norg.apache.flink.util."
                "FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold. The "
                "latest checkpoint failed due to Checkpoint expired before completing., view ...",
            ),
            "tolerable_threshold_exceeded",
        ),
    ],
)
def test_failure_reasons_of_every_wording(event: Event, key: str) -> None:
    assert failure_reason(event) == key


def test_which_reasons_count() -> None:
    assert all(counts(k) for k in ("expired", "declined", "async_failure", "unknown", "other"))
    assert not any(
        counts(k) for k in ("tasks_not_running", "task_not_ready", "savepoint", "task_failure")
    )


def test_a_job_whose_every_other_checkpoint_expires_is_one_incident() -> None:
    # Seen on a real Flink 2.3 run (tests/data/real/expiry_2_3): a 2 s interval, a 500 ms
    # timeout, durations around it. Two completions in a row between expiries resolved
    # the incident and the next expiry paged again, three times in 45 s.
    det = CheckpointFailures(CheckpointFailuresParams())
    events, t = [], T0
    for cp in range(1, 63):
        events.append(expired(cp, t) if cp % 3 == 0 else completed(cp, t))
        t += 2 * S
    _, alerts = drive(det, events, until=t + 10 * MIN)
    last_expiry = T0 + (60 - 1) * 2 * S
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, T0 + 8 * 2 * S),
        (AlertStatus.RESOLVED, last_expiry + 300 * S),
    ]


# --- standing -----------------------------------------------------------------------


def test_standing_counts_failures_against_the_thresholds_then_tells_what_resolves() -> None:
    tester = DetectorTester(CheckpointFailures(CheckpointFailuresParams()))
    assert tester.standing() == "no checkpoint seen for this job"
    tester.feed(expired(1, T0), declined(2, T0 + MIN, "tasks not ready"), expired(3, T0 + 2 * MIN))
    assert tester.standing() == (
        "2 of 3 expired, 2 of 3 failed within 30 min; 1 not counted (task not ready); "
        "0 checkpoints completed in a row"
    )
    tester.feed(expired(4, T0 + 3 * MIN))
    assert tester.standing() == (
        f"FIRING since {at(T0 + 3 * MIN)} (0 s); 3 expired, 3 failed within 30 min; "
        f"resolves after 2 completed in a row (0 so far) and no failure until {at(T0 + 8 * MIN)}"
    )
    tester.feed(completed(5, T0 + 4 * MIN))
    assert "(60 s); 3 expired" in tester.standing()
    assert "(1 so far)" in tester.standing()
    tester.feed(completed(6, T0 + 9 * MIN))
    assert [a.status for a in tester.alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    # Resolved: the incident's failures are forgotten, the completions go on counting.
    assert tester.standing() == (
        "0 of 3 expired, 0 of 3 failed within 30 min; 2 checkpoints completed in a row"
    )


def test_standing_counts_a_streak_when_one_is_set() -> None:
    tester = DetectorTester(CheckpointFailures(CheckpointFailuresParams(min_streak=4)))
    tester.feed(expired(1, T0), expired(2, T0 + 40 * MIN))
    assert tester.standing().startswith(
        "1 of 3 expired, 1 of 3 failed within 30 min, 2 of 4 in a row"
    )
