"""restart_storm as a plain state machine: events in, steps out, time injected."""

from __future__ import annotations

import json

import pytest

from detectors import REGISTRY, Alert, AlertStatus, Event, Severity
from detectors.correlation import Correlator
from detectors.restart_storm import RestartStorm, RestartStormParams, _classify
from detectors.testing import DetectorTester, drive
from detectors.words import at

JOB = "b5a0c61ab1b1495dd9c2f8e45d349957"
NAME = "herd-property-sync"
TM = "container_e142_1652757164854_0006_01_000002"
S = 1000
MIN = 60 * S
T0 = 1_652_800_000_000

HEARTBEAT_CAUSE = (
    f"java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id {TM}"
    "(hdfs05-dev.yingzi.com:45454) timed out."
)
ASK_CAUSE = (
    "org.apache.flink.runtime.JobException: Recovery is suppressed by NoRestartBackoffTimeStrategy\n"
    "Caused by: java.util.concurrent.TimeoutException: Invocation of public abstract "
    "java.util.concurrent.CompletableFuture org.apache.flink.runtime.taskexecutor."
    "TaskExecutorGateway.submitTask timed out.\n"
    "Caused by: akka.pattern.AskTimeoutException: Ask timed out on [Actor[akka.tcp://"
    "flink@hdfs05-dev.yingzi.com:23065/user/rpc/taskmanager_0#-613206152]] after [10000 ms]."
)


def state(t: int, frm: str, to: str, cause: str | None = None, job: str = JOB) -> Event:
    line = f"Job {NAME} ({job}) switched from state {frm} to {to}."
    message = f"{line}\n{cause}" if cause else line
    return Event(
        kind="job_state",
        time_ms=t,
        job_id=job,
        job_name=NAME,
        from_state=frm,
        to_state=to,
        reason=cause.split("\n", 1)[0] if cause else None,
        message=message,
    )


def restart(t: int, cause: str | None = HEARTBEAT_CAUSE, back_after: int = 2 * S) -> list[Event]:
    return [
        state(t, "RUNNING", "RESTARTING", cause),
        state(t + back_after, "RESTARTING", "RUNNING"),
    ]


def lost_leadership(t: int, job: str = JOB) -> Event:
    return Event(
        kind="leadership_lost",
        time_ms=t,
        job_id=job,
        message=(
            f"JobManager for job {job} with leader id 84a8fd94fa276bf476d3af016c1441be "
            "lost leadership."
        ),
    )


def transitions(alerts: list[Alert]) -> list[tuple[AlertStatus, int]]:
    return [(a.status, a.event_time_ms - T0) for a in alerts]


def test_registered_under_its_contract_name() -> None:
    assert REGISTRY["restart_storm"] is RestartStorm
    assert RestartStorm.scope == "job"


def test_third_restart_within_the_window_fires_with_counted_causes_and_tm_ids() -> None:
    det = RestartStorm(RestartStormParams())
    events = [state(T0, "CREATED", "RUNNING")]
    events += restart(T0 + 5 * MIN) + restart(T0 + 9 * MIN) + restart(T0 + 12 * MIN, ASK_CAUSE)
    _, alerts = drive(det, events, until=T0 + 60 * MIN)
    assert transitions(alerts) == [
        (AlertStatus.FIRING, 12 * MIN),
        (AlertStatus.RESOLVED, 12 * MIN + 2 * S + 10 * MIN),
    ]
    ev = alerts[0].evidence
    assert ev["restarts"] == 3
    assert ev["causes"] == {"tm_heartbeat_timeout": 2, "rpc_timeout": 1}
    assert ev["tm_ids"] == [TM]
    assert ev["not_running_s"] == 0.0
    # For a chart: each restart on a time line, with its cause.
    assert ev["timeline"] == [
        [T0 + 5 * MIN, "tm_heartbeat_timeout", False],
        [T0 + 9 * MIN, "tm_heartbeat_timeout", False],
        [T0 + 12 * MIN, "rpc_timeout", False],
    ]
    assert alerts[0].job_id == JOB and alerts[0].job_name == NAME
    assert alerts[1].alert_id == alerts[0].alert_id


def test_one_restart_that_recovers_fast_stays_quiet() -> None:
    det = RestartStorm(RestartStormParams())
    events = [state(T0, "CREATED", "RUNNING"), *restart(T0 + MIN, back_after=3 * S)]
    _, alerts = drive(det, events, until=T0 + 120 * MIN)
    assert alerts == []


def test_restarts_spread_wider_than_the_window_stay_quiet() -> None:
    det = RestartStorm(RestartStormParams(window_s=1800))
    events = [e for i in range(5) for e in restart(T0 + i * 40 * MIN)]
    _, alerts = drive(det, events, until=T0 + 300 * MIN)
    assert alerts == []


def test_recovery_slower_than_max_recovery_fires_at_the_deadline() -> None:
    det = RestartStorm(RestartStormParams(max_recovery_s=300))
    events = [state(T0, "CREATED", "RUNNING"), state(T0 + MIN, "RUNNING", "RESTARTING")]
    events.append(state(T0 + 11 * MIN, "RESTARTING", "RUNNING"))
    _, alerts = drive(det, events)
    assert transitions(alerts) == [(AlertStatus.FIRING, MIN + 300 * S)]
    assert alerts[0].evidence["fired_for"] == "slow_recovery"
    assert alerts[0].evidence["not_running_s"] == 300.0


def test_failover_seen_by_many_taskmanagers_counts_once_and_its_recovery_time() -> None:
    # Seed 004 (3): the JobManager's host is lost; the TaskManagers report it; the job is
    # back 10 minutes later from the new leader.
    det = RestartStorm(RestartStormParams())
    events = [state(T0, "CREATED", "RUNNING")]
    events += [lost_leadership(T0 + MIN + i * 7) for i in range(5)]
    events.append(state(T0 + 11 * MIN, "CREATED", "RUNNING"))
    _, alerts = drive(det, events, until=T0 + 60 * MIN)
    assert [a.status for a in alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert alerts[0].evidence["failovers"] == 1
    assert alerts[0].evidence["causes"] == {"lost_leadership": 1}
    assert alerts[1].evidence["longest_not_running_s"] == 600.0


def test_legacy_failing_then_restarting_is_one_restart_with_the_failing_cause() -> None:
    det = RestartStorm(RestartStormParams())
    events = [state(T0, "CREATED", "RUNNING")]
    for i in range(3):
        t = T0 + (i + 1) * MIN
        events += [
            state(t, "RUNNING", "FAILING", HEARTBEAT_CAUSE),
            state(t + 10, "FAILING", "RESTARTING"),
            state(t + 10 * S, "RESTARTING", "CREATED"),
            state(t + 10 * S + 5, "CREATED", "RUNNING"),
        ]
    _, alerts = drive(det, events)
    assert len(alerts) == 1
    assert alerts[0].evidence["restarts"] == 3
    assert alerts[0].evidence["causes"] == {"tm_heartbeat_timeout": 3}


def test_cancel_and_resubmit_with_the_same_job_id_is_not_a_restart() -> None:
    # Taskmanagers log the job's leadership ending; one clock runs ahead of the JobManager's.
    det = RestartStorm(RestartStormParams())
    events: list[Event] = []
    for i in range(4):
        t = T0 + i * 5 * MIN
        events += [
            state(t, "CREATED", "RUNNING"),
            state(t + 2 * MIN, "RUNNING", "CANCELLING"),
            lost_leadership(t + 2 * MIN + 400),
            state(t + 2 * MIN + 900, "CANCELLING", "CANCELED"),
            lost_leadership(t + 2 * MIN + 1200),
        ]
    _, alerts = drive(det, events, until=T0 + 120 * MIN)
    assert alerts == []


def test_leadership_loss_logged_just_before_a_cancel_does_not_tip_the_count() -> None:
    # Two real restarts, then a planned cancel: a TaskManager whose clock runs ahead logs the
    # job's leadership ending 400 ms before the JobManager logs CANCELLING.
    det = RestartStorm(RestartStormParams(min_restarts=3))
    events = [state(T0, "CREATED", "RUNNING"), *restart(T0 + MIN), *restart(T0 + 2 * MIN)]
    events += [
        lost_leadership(T0 + 4 * MIN - 400),
        state(T0 + 4 * MIN, "RUNNING", "CANCELLING"),
        state(T0 + 4 * MIN + 800, "CANCELLING", "CANCELED"),
    ]
    _, alerts = drive(det, events, until=T0 + 60 * MIN)
    assert alerts == []


def test_failovers_fire_once_confirmed() -> None:
    det = RestartStorm(RestartStormParams(min_restarts=3, max_recovery_s=3600))
    events = [state(T0, "CREATED", "RUNNING")]
    for i in range(3):
        t = T0 + (i + 1) * 5 * MIN
        events += [lost_leadership(t), state(t + 20 * S, "CREATED", "RUNNING")]
    events.append(Event(kind="job_restored", time_ms=T0 + 30 * MIN, job_id=JOB, checkpoint_id=9))
    _, alerts = drive(det, events)
    assert transitions(alerts)[:1] == [(AlertStatus.FIRING, 15 * MIN + 30 * S)]
    assert alerts[0].evidence["failovers"] == 3


def test_leadership_loss_just_before_a_finish_is_retracted() -> None:
    det = RestartStorm(RestartStormParams(min_restarts=2))
    events = [state(T0, "CREATED", "RUNNING"), lost_leadership(T0 + MIN)]
    events += [state(T0 + MIN + 2 * S, "RUNNING", "FINISHED"), *restart(T0 + 3 * MIN)]
    state_, alerts = drive(det, events, until=T0 + 30 * MIN)
    assert alerts == []
    assert state_ is not None and len(state_.restarts) == 1


def test_jobmanager_restart_without_notice_counts_as_a_failover() -> None:
    det = RestartStorm(RestartStormParams(min_restarts=2))
    events = [state(T0, "CREATED", "RUNNING"), state(T0 + MIN, "INITIALIZING", "CREATED")]
    events += [state(T0 + MIN + 5, "CREATED", "RUNNING"), *restart(T0 + 2 * MIN)]
    _, alerts = drive(det, events)
    assert len(alerts) == 1
    assert alerts[0].evidence["causes"] == {"jobmanager_restart": 1, "tm_heartbeat_timeout": 1}
    assert alerts[0].evidence["timeline"] == [
        [T0 + MIN, "jobmanager_restart", True],
        [T0 + 2 * MIN, "tm_heartbeat_timeout", False],
    ]


def test_job_failing_for_good_while_firing_escalates_to_critical() -> None:
    det = RestartStorm(RestartStormParams())
    events = [state(T0, "CREATED", "RUNNING")]
    events += restart(T0 + MIN) + restart(T0 + 2 * MIN) + restart(T0 + 3 * MIN)
    events += [
        state(T0 + 4 * MIN, "RUNNING", "FAILING", ASK_CAUSE),
        state(T0 + 4 * MIN + 50, "FAILING", "FAILED"),
    ]
    _, alerts = drive(det, events, until=T0 + 60 * MIN)
    assert [(a.status, a.severity) for a in alerts] == [
        (AlertStatus.FIRING, Severity.WARNING),
        (AlertStatus.ESCALATED, Severity.CRITICAL),
    ]
    assert alerts[1].alert_id == alerts[0].alert_id


def test_cancel_while_firing_resolves_at_once() -> None:
    det = RestartStorm(RestartStormParams())
    events = [state(T0, "CREATED", "RUNNING")]
    events += restart(T0 + MIN) + restart(T0 + 2 * MIN) + restart(T0 + 3 * MIN)
    events += [
        state(T0 + 4 * MIN, "RUNNING", "CANCELLING"),
        state(T0 + 4 * MIN + 9, "CANCELLING", "CANCELED"),
    ]
    _, alerts = drive(det, events)
    assert transitions(alerts) == [
        (AlertStatus.FIRING, 3 * MIN),
        (AlertStatus.RESOLVED, 4 * MIN + 9),
    ]


def test_a_restart_during_the_clear_period_keeps_it_firing() -> None:
    det = RestartStorm(RestartStormParams(clear_for_s=600))
    events = [state(T0, "CREATED", "RUNNING")]
    events += restart(T0 + MIN) + restart(T0 + 2 * MIN) + restart(T0 + 3 * MIN)
    events += restart(T0 + 10 * MIN)
    _, alerts = drive(det, events, until=T0 + 60 * MIN)
    assert transitions(alerts) == [
        (AlertStatus.FIRING, 3 * MIN),
        (AlertStatus.RESOLVED, 10 * MIN + 2 * S + 10 * MIN),
    ]


@pytest.mark.parametrize(
    ("text", "cause", "tms"),
    [
        (HEARTBEAT_CAUSE, "tm_heartbeat_timeout", [TM]),
        (
            "java.util.concurrent.TimeoutException: The heartbeat of TaskManager with id "
            "container_1597960565773_0003_01_000002  timed out.",
            "tm_heartbeat_timeout",
            ["container_1597960565773_0003_01_000002"],
        ),
        (
            "org.apache.flink.runtime.jobmaster.JobMasterException: TaskManager with id "
            "orders-taskmanager-1-3 is no longer reachable.",
            "tm_unreachable",
            ["orders-taskmanager-1-3"],
        ),
        (ASK_CAUSE, "rpc_timeout", []),
        (
            "org.apache.flink.util.FlinkException: Disconnect from JobManager responsible for "
            f"{JOB}.\nCaused by: java.lang.Exception: Job leader for job id {JOB} lost leadership.",
            "lost_leadership",
            [],
        ),
        (
            "org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure "
            "threshold.",
            "checkpoint_failure_threshold",
            [],
        ),
        (
            "java.lang.ArithmeticException: / by zero\n\tat Job.map(Job.java:12)",
            "ArithmeticException",
            [],
        ),
        ("", "unknown", []),
    ],
    ids=[
        "heartbeat",
        "heartbeat_1_10",
        "unreachable",
        "ask",
        "leadership",
        "checkpoints",
        "user",
        "none",
    ],
)
def test_failure_causes_are_classified(text: str, cause: str, tms: list[str]) -> None:
    assert _classify(text) == (cause, tms)


def test_state_stays_bounded() -> None:
    det = RestartStorm(RestartStormParams(max_tracked=50, max_tm_ids=10))
    events = [state(T0, "CREATED", "RUNNING")]
    for i in range(200):
        cause = HEARTBEAT_CAUSE.replace(TM, f"container_e1_1_01_{i:06d}")
        events += restart(T0 + i * 5 * S, cause, back_after=S)
    st, _ = drive(det, events)
    assert st is not None
    assert len(st.restarts) == 50 and len(st.tm_ids) == 10
    assert len(json.dumps(det.dump(st))) < 8192
    # The evidence's timeline: the newest 60 at most, whatever max_tracked allows.
    det = RestartStorm(RestartStormParams(max_tracked=200))
    st, _ = drive(det, events)
    timeline = det.evidence(st).timeline
    assert len(timeline) == 60 and timeline[-1].time_ms == T0 + 199 * 5 * S


def test_a_job_idle_longer_than_the_ttl_starts_afresh() -> None:
    # Evicted after idle_ttl_s: a run seen hours later is a new run, not a failover.
    det = RestartStorm(RestartStormParams(idle_ttl_s=3600, min_restarts=2))
    events = [state(T0, "CREATED", "RUNNING"), *restart(T0 + MIN)]
    events += [
        state(T0 + 300 * MIN, "INITIALIZING", "CREATED"),
        state(T0 + 300 * MIN + 9, "CREATED", "RUNNING"),
    ]
    st, alerts = drive(det, events)
    assert alerts == []
    assert st is not None and st.restarts == []


def test_a_job_suspended_by_lost_leadership_counts_as_down_until_it_runs_again() -> None:
    # Flink suspends a job when its JobMaster loses leadership; that is an outage, not a
    # planned stop, so the time until the new leader runs it again counts.
    det = RestartStorm(RestartStormParams())
    events = [
        state(T0, "CREATED", "RUNNING"),
        state(T0 + 10 * MIN, "RUNNING", "SUSPENDED"),
        state(T0 + 10 * MIN + 330 * S, "CREATED", "RUNNING"),
    ]
    _, alerts = drive(det, events, until=T0 + 60 * MIN)
    assert alerts and alerts[0].status is AlertStatus.FIRING
    assert alerts[0].evidence["not_running_s"] == 300.0


def restored_line(t: int, cp: int) -> Event:
    return Event(
        kind="job_restored",
        time_ms=t,
        job_id=JOB,
        checkpoint_id=cp,
        reason="Checkpoint",
        message=f"Restoring job {JOB} from Checkpoint {cp} @ 1716170400000 for {JOB} located at "
        f"s3://ckpt/{JOB}/chk-{cp}.",
    )


@pytest.mark.parametrize("with_restore_line", [True, False])
def test_a_jobmanager_crash_loop_counts_each_comeback_once(with_restore_line: bool) -> None:
    # A crashed JobManager restarted by Kubernetes logs no state change of the old run: the
    # job comes back as CREATED -> RUNNING (1.11 wording: no INITIALIZING), with HA after
    # its restore line. Each comeback is one restart.
    det = RestartStorm(RestartStormParams(min_restarts=3))
    events = [state(T0, "CREATED", "RUNNING")]
    # Seen on a real Flink 2.3 run (tests/data/real/crashloop_2_3): back every 50 s, closer
    # than failover_dedupe_s, and the last comeback too close to the end of the log for a
    # confirmation timer: a comeback is certain, it counts at once.
    for k in range(1, 4):
        t = T0 + k * 50 * S
        if with_restore_line:
            events.append(restored_line(t, 10 * k))
        events.append(state(t + S, "CREATED", "RUNNING"))
    _, alerts = drive(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    assert alerts[0].event_time_ms - T0 == 150 * S + (0 if with_restore_line else S)
    assert alerts[0].evidence["causes"] == {"jobmanager_restart": 3}


def test_a_restore_during_a_failover_is_not_one_more_restart() -> None:
    det = RestartStorm(RestartStormParams(min_restarts=2))
    events = [state(T0, "CREATED", "RUNNING"), state(T0 + MIN, "RUNNING", "RESTARTING")]
    events += [restored_line(T0 + MIN + S, 7), state(T0 + MIN + 2 * S, "RESTARTING", "RUNNING")]
    state_, alerts = drive(det, events, until=T0 + 30 * MIN)
    assert alerts == []
    assert state_ is not None and len(state_.restarts) == 1


def test_a_restore_logged_just_after_a_failover_is_running_again_is_that_failover() -> None:
    # 1.10+ logs RESTARTING -> RUNNING, then its restore line 40 ms later
    # (tests/data/restart_storm/storm_tm_failures_1_17.log): one restart, not two.
    det = RestartStorm(RestartStormParams(min_restarts=2))
    events = [state(T0, "CREATED", "RUNNING"), state(T0 + MIN, "RUNNING", "RESTARTING")]
    events += [state(T0 + MIN + 10 * S, "RESTARTING", "RUNNING")]
    events += [restored_line(T0 + MIN + 10 * S + 40, 7)]
    state_, alerts = drive(det, events, until=T0 + 30 * MIN)
    assert alerts == []
    assert state_ is not None and len(state_.restarts) == 1


def test_a_state_saved_by_the_previous_version_loads_and_goes_on() -> None:
    # Written by the untyped version: firing on three restarts (one a JobManager comeback),
    # down again with a legacy FAILING whose cause waits for its RESTARTING.
    old = {
        "v": 1,
        "entity": f"job:{JOB}",
        "job_id": JOB,
        "job_name": NAME,
        "tm_id": None,
        "host": None,
        "firing": True,
        "incident_start_ms": T0 + 180_010,
        "clear_since_ms": None,
        "last_event_ms": T0 + 4 * MIN,
        "status": "FAILING",
        "down_since": T0 + 4 * MIN,
        "down_cause": "failure",
        "running_since": T0 + 180_020,
        "last_down_ms": 20,
        "longest_down_ms": 2000,
        "restarts": [
            {"t": T0 + MIN, "cause": "tm_heartbeat_timeout", "tms": [TM], "failover": False},
            {
                "t": T0 + 2 * MIN,
                "cause": "jobmanager_restart",
                "tms": [],
                "failover": True,
                "seen": True,
            },
            {"t": T0 + 180_010, "cause": "tm_heartbeat_timeout", "tms": [TM], "failover": False},
        ],
        "last_restart_ms": T0 + 180_010,
        "failover_ms": T0 + 2 * MIN,
        "pending_failure": {"t": T0 + 4 * MIN, "cause": "rpc_timeout", "tms": []},
        "tm_ids": [TM],
        "restored": [7],
        "severity": "warning",
        "fired_for": "restarts",
        "evaluated_ms": T0 + 4 * MIN,
    }
    det = RestartStorm(RestartStormParams(min_restarts=3))
    loaded = det.load(old)
    # Saved again the same, but for the "seen" every restart now names.
    assert det.dump(loaded) == {**old, "restarts": [{"seen": False, **r} for r in old["restarts"]]}
    assert det.signal_values(loaded) == {"job_restarts": 3.0, "job_not_running_seconds": 0.0}
    events = [state(T0 + 4 * MIN + 10, "FAILING", "RESTARTING")]
    events.append(state(T0 + 5 * MIN, "RESTARTING", "RUNNING"))
    _, alerts = drive(det, events, until=T0 + 60 * MIN, state=loaded)
    # The incident it had open resolves with its id; the pending cause was kept.
    assert transitions(alerts) == [(AlertStatus.RESOLVED, 5 * MIN + 10 * MIN)]
    assert alerts[0].alert_id == "2671707c74df242c"  # what the previous version fired with
    assert alerts[0].evidence["causes"] == {
        "tm_heartbeat_timeout": 2,
        "jobmanager_restart": 1,
        "rpc_timeout": 1,
    }


def test_an_incident_a_lost_taskmanager_started_tells_the_restarts_after_it() -> None:
    det = RestartStorm(RestartStormParams())
    events = [state(T0, "CREATED", "RUNNING")]
    events += restart(T0 + 5 * MIN) + restart(T0 + 9 * MIN) + restart(T0 + 12 * MIN)
    _, [storm] = drive(det, events)
    lost = storm.model_copy(
        update={
            "alert_id": "lost",
            "detector": "tm_lost",
            "entity": f"tm:{TM}",
            "job_id": None,
            "job_name": None,
            "tm_id": TM,
            "event_time_ms": T0 + 5 * MIN,
            "evidence": {"cause": "memory_kill"},
        }
    )
    c = Correlator()
    c.observe(lost)
    view = c.observe(storm)  # joins through the TaskManager its causes name
    assert view.incident_id == "lost"
    assert (
        view.headline == f"TaskManager {TM} killed for memory; job {NAME} restarting (3 restarts)"
    )


# --- standing ----------------------------------------------------------------------------


def test_standing_counts_restarts_against_the_limit_and_tells_what_resolves() -> None:
    tester = DetectorTester(RestartStorm(RestartStormParams()))
    assert tester.standing() == "no state change, failover or restore of this job seen"
    tester.feed(state(T0, "CREATED", "RUNNING"))
    assert tester.standing() == f"0 of 3 restarts within 30 min; job RUNNING since {at(T0)}"
    # Down after a restart: the page for a slow recovery is due max_recovery_s later.
    tester.feed(state(T0 + 5 * MIN, "RUNNING", "RESTARTING", HEARTBEAT_CAUSE))
    assert tester.standing() == (
        f"1 of 3 restarts within 30 min (mostly tm heartbeat timeout); job down since "
        f"{at(T0 + 5 * MIN)} (failure, RESTARTING): pages at {at(T0 + 10 * MIN)} unless back "
        "by then"
    )
    tester.feed(state(T0 + 5 * MIN + 2 * S, "RESTARTING", "RUNNING"))
    assert tester.standing().endswith(
        f"job RUNNING since {at(T0 + 5 * MIN + 2 * S)}; the oldest counts until {at(T0 + 35 * MIN)}"
    )
    tester.feed(*restart(T0 + 9 * MIN), *restart(T0 + 12 * MIN, ASK_CAUSE))
    back = T0 + 12 * MIN + 2 * S
    assert tester.standing() == (
        f"FIRING since {at(T0 + 12 * MIN)} (2 s); 3 restarts within 30 min (mostly tm "
        f"heartbeat timeout); job RUNNING since {at(back)}; resolves at {at(back + 10 * MIN)}"
    )
    tester.advance_to(T0 + 60 * MIN)
    assert [a.status for a in tester.alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert tester.standing().startswith("3 of 3 restarts within 30 min")


def test_standing_of_a_recovery_too_slow() -> None:
    tester = DetectorTester(RestartStorm(RestartStormParams(max_recovery_s=300)))
    tester.feed(state(T0, "CREATED", "RUNNING"), state(T0 + MIN, "RUNNING", "RESTARTING"))
    tester.advance_to(T0 + 7 * MIN)
    assert tester.standing() == (
        f"FIRING since {at(T0 + 6 * MIN)}: recovery too slow; 1 restart within 30 min (mostly "
        f"unknown); job down since {at(T0 + MIN)} (failure, RESTARTING); resolves after 10 min "
        "back in RUNNING"
    )
