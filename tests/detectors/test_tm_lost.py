"""tm_lost as a plain state machine: events in, steps out, time injected."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from detectors import REGISTRY, Alert, AlertStatus, Event
from detectors.testing import DetectorTester, drive, drive_timer
from detectors.tm_lost import TmLost, TmLostParams
from detectors.words import at

TM = "container_e05_1699999999999_0042_01_000003"
POD = "orders-enrichment-taskmanager-1-3"
JOB = "3f4c2a9b7d1e4f60a8b5c2d1e0f9a7b3"
S = 1000
T0 = 1_717_400_000_000

YARN_KILL = (
    f"Worker {TM} is terminated. Diagnostics: Container {TM} marked as failed.\n"
    " Exit code:-104.\n"
    " Diagnostics:[2023-05-04 02:41:17.688]Container [pid=48211,containerID="
    f"{TM}] is running 125829120B beyond the 'PHYSICAL' memory limit. Current usage: 4.1 GB "
    "of 4 GB physical memory used; 6.3 GB of 8.4 GB virtual memory used. Killing container.\n"
    f"Dump of the process-tree for {TM} :\n"
    "[2023-05-04 02:41:17.702]Container killed on request. Exit code is 143\n"
    "[2023-05-04 02:41:17.709]Container exited with a non-zero exit code 143. "
)
POD_KILL = (
    f"Worker {POD} is terminated. Diagnostics: Pod terminated, container termination statuses: "
    "[flink-task-manager(exitCode=137, reason=OOMKilled, message=null)], pod status: "
    "Failed(reason=null, message=null)"
)


def timeout(t: int, tm: str = TM, rm: bool = True) -> Event:
    the = "The heartbeat" if rm else "Heartbeat"
    return Event(
        kind="heartbeat_timeout",
        time_ms=t,
        tm_id=tm,
        host="worker-7.example.com",
        message=f"{the} of TaskManager with id {tm}(worker-7.example.com:8041) timed out.",
    )


def kill(t: int, tm: str = TM, message: str = YARN_KILL, reason: str = "physical") -> Event:
    return Event(kind="container_memory_kill", time_ms=t, tm_id=tm, reason=reason, message=message)


def fatal_oom(t: int, tm: str = POD) -> Event:
    return Event(
        kind="fatal_error",
        time_ms=t,
        tm_id=tm,
        reason="java.lang.OutOfMemoryError: GC overhead limit exceeded",
        message=(
            "FATAL: Thread 'flink-akka.actor.default-dispatcher-628' produced an uncaught "
            "exception. Stopping the process...\njava.lang.OutOfMemoryError: GC overhead limit "
            "exceeded\n\tat sun.reflect.UTF8.encode(UTF8.java:36)"
        ),
    )


def released(t: int, tm: str = TM) -> Event:
    return Event(
        kind="tm_released", time_ms=t, tm_id=tm, message=f"Stopping worker {tm}(worker-7:8041)."
    )


def job_failing(t: int, tm: str = TM, job: str = JOB) -> Event:
    return Event(
        kind="job_state",
        time_ms=t,
        job_id=job,
        job_name="orders-enrichment",
        tm_id=tm,
        from_state="RUNNING",
        to_state="RESTARTING",
        message=(
            f"Job orders-enrichment ({job}) switched from state RUNNING to RESTARTING.\n"
            f"java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id {tm} "
            "timed out."
        ),
    )


def transitions(alerts: list[Alert]) -> list[tuple[AlertStatus, int]]:
    return [(a.status, a.event_time_ms - T0) for a in alerts]


def test_registered_under_its_contract_name() -> None:
    assert REGISTRY["tm_lost"] is TmLost
    assert TmLost.scope == "tm"


def test_yarn_memory_kill_pages_at_once_and_the_later_timeout_joins_it() -> None:
    det = TmLost(TmLostParams())
    events = [kill(T0), timeout(T0 + 45 * S), timeout(T0 + 46 * S, rm=False)]
    _, alerts = drive(det, events, until=T0 + 3600 * S)
    assert transitions(alerts) == [
        (AlertStatus.FIRING, 0),
        (AlertStatus.RESOLVED, 46 * S + 900 * S),
    ]
    fired = alerts[0]
    assert fired.tm_id == TM
    assert fired.evidence["cause"] == "memory_kill"
    assert fired.evidence["exit_code"] == 143
    assert fired.evidence["exit_status"] == -104
    assert "beyond the 'PHYSICAL' memory limit" in fired.evidence["diagnostics"]
    assert alerts[1].alert_id == fired.alert_id
    assert alerts[1].evidence["heartbeat_timeouts"] == 2


def test_kubernetes_oomkilled_pod_is_its_own_cause_with_exit_137() -> None:
    det = TmLost(TmLostParams())
    _, alerts = drive(det, [kill(T0, POD, POD_KILL, "oomkilled"), timeout(T0 + 50 * S, POD)])
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    assert alerts[0].evidence["cause"] == "oom_killed"
    assert alerts[0].evidence["exit_code"] == 137
    assert "OOMKilled" in alerts[0].evidence["diagnostics"]


def test_oom_logged_just_after_the_timeout_is_waited_for_and_named() -> None:
    # Seed 000: the JobManager's timeout at 04:58:24.509, the TaskManager's OOM at 04:58:28.535.
    det = TmLost(TmLostParams())
    _, alerts = drive(det, [timeout(T0, POD), fatal_oom(T0 + 4026, POD)])
    assert transitions(alerts) == [(AlertStatus.FIRING, 4026)]
    assert alerts[0].evidence["cause"] == "jvm_oom"
    assert "GC overhead limit exceeded" in alerts[0].evidence["diagnostics"]


def test_oom_shortly_before_the_timeout_is_the_cause_and_pages_at_the_timeout() -> None:
    det = TmLost(TmLostParams())
    oom = Event(
        kind="jvm_oom",
        time_ms=T0,
        tm_id=POD,
        reason="Java heap space",
        message="java.lang.OutOfMemoryError: Java heap space",
    )
    _, alerts = drive(det, [oom, timeout(T0 + 50 * S, POD)])
    assert transitions(alerts) == [(AlertStatus.FIRING, 50 * S)]
    assert alerts[0].evidence["cause"] == "jvm_oom"


def test_an_oom_long_before_is_not_the_cause() -> None:
    det = TmLost(TmLostParams(cause_window_s=300))
    oom = Event(
        kind="jvm_oom",
        time_ms=T0,
        tm_id=POD,
        reason="Metaspace",
        message="java.lang.OutOfMemoryError: Metaspace",
    )
    _, alerts = drive(det, [oom, timeout(T0 + 600 * S, POD)], until=T0 + 700 * S)
    assert alerts[0].evidence["cause"] == "unknown"


def test_timeout_without_cause_pages_unknown_after_the_grace() -> None:
    det = TmLost(TmLostParams(grace_s=20))
    # The later event (another TM's job failing is not routed here; a second timeout is) comes
    # after the grace deadline: the page is at the deadline, before the event is folded in.
    events = [timeout(T0), timeout(T0 + 30 * S, rm=False)]
    _, alerts = drive(det, events)
    assert transitions(alerts) == [(AlertStatus.FIRING, 20 * S)]
    assert alerts[0].evidence["cause"] == "unknown"
    assert alerts[0].evidence["diagnostics"].startswith("The heartbeat of TaskManager")


def test_cause_after_the_page_shows_in_the_resolve() -> None:
    det = TmLost(TmLostParams(grace_s=10))
    _, alerts = drive(det, [timeout(T0, POD), fatal_oom(T0 + 60 * S, POD)], until=T0 + 2000 * S)
    assert [a.evidence["cause"] for a in alerts] == ["unknown", "jvm_oom"]
    assert [a.status for a in alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]


def test_timeout_after_flink_released_the_taskmanager_does_not_page() -> None:
    det = TmLost(TmLostParams())
    state, alerts = drive(det, [released(T0), timeout(T0 + 50 * S)], until=T0 + 200 * S)
    assert alerts == []
    assert state is not None and state.suppressed == 1


def test_release_logged_within_the_grace_cancels_the_pending_page() -> None:
    det = TmLost(TmLostParams(grace_s=20))
    _, alerts = drive(det, [timeout(T0), released(T0 + 5 * S)], until=T0 + 200 * S)
    assert alerts == []


def test_timeout_long_after_a_release_pages_again() -> None:
    det = TmLost(TmLostParams(release_window_s=600))
    _, alerts = drive(det, [released(T0), timeout(T0 + 700 * S)], until=T0 + 800 * S)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]


def test_job_failing_because_of_the_taskmanager_ties_the_job() -> None:
    det = TmLost(TmLostParams(grace_s=20))
    events = [timeout(T0), job_failing(T0 + 6)]
    _, alerts = drive(det, events, until=T0 + 2000 * S)
    assert alerts[0].evidence["job_ids"] == [JOB]
    assert alerts[0].job_id == JOB


def test_job_state_alone_keeps_no_state() -> None:
    det = TmLost(TmLostParams())
    step = det.advance(None, None, job_failing(T0))
    assert step.state is None and step.alerts == ()


def test_several_timeout_lines_of_one_loss_page_once() -> None:
    det = TmLost(TmLostParams(grace_s=20))
    events = [timeout(T0), timeout(T0 + 1), timeout(T0 + 500, rm=False)]
    _, alerts = drive(det, events, until=T0 + 3000 * S)
    assert [a.status for a in alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert alerts[1].evidence["heartbeat_timeouts"] == 3


def test_idle_taskmanager_state_is_evicted() -> None:
    det = TmLost(TmLostParams(idle_ttl_s=3600))
    state, _ = drive(det, [released(T0)], until=T0 + 3601 * S)
    assert state is None


def test_state_stays_small() -> None:
    det = TmLost(TmLostParams())
    events = [kill(T0), timeout(T0 + 45 * S)] + [
        job_failing(T0 + i, job=f"{i:032x}") for i in range(50)
    ]
    state, _ = drive(det, sorted(events, key=lambda e: e.time_ms))
    assert state is not None
    assert len(state.job_ids) == 10
    assert len(json.dumps(det.dump(state))) < 2048


def test_host_is_the_taskmanagers_not_the_jobmanager_shippers() -> None:
    det = TmLost(TmLostParams())
    # Kubernetes: the JobManager's line names the pod only; its envelope host is the JM's node.
    jm_line = Event(
        kind="heartbeat_timeout",
        time_ms=T0,
        tm_id=POD,
        host="gke-jm-node",
        message=f"The heartbeat of TaskManager with id {POD} timed out.",
    )
    oom = Event(
        kind="jvm_oom",
        time_ms=T0 + 3 * S,
        tm_id=POD,
        host="gke-tm-node",
        message="java.lang.OutOfMemoryError: Java heap space",
    )
    _, alerts = drive(det, [jm_line, oom])
    assert [a.host for a in alerts] == ["gke-tm-node"]


def test_job_name_is_that_of_the_first_job_not_of_the_latest() -> None:
    det = TmLost(TmLostParams())
    other = job_failing(T0 + 2 * S, job="1" * 32)._replace(job_name="billing")
    _, alerts = drive(det, [kill(T0), job_failing(T0 + S), other], until=T0 + 3600 * S)
    resolved = alerts[-1]
    assert resolved.status is AlertStatus.RESOLVED
    assert (resolved.job_id, resolved.job_name) == (JOB, "orders-enrichment")
    assert resolved.evidence["job_ids"] == [JOB, "1" * 32]


def test_exit_status_only_for_a_kill_and_ignored_timeouts_only_when_some() -> None:
    det = TmLost(TmLostParams(grace_s=10))
    _, alerts = drive(det, [timeout(T0)], until=T0 + 60 * S)
    assert "exit_status" not in alerts[0].evidence
    assert "timeouts_ignored_after_release" not in alerts[0].evidence
    events = [released(T0), timeout(T0 + S), kill(T0 + 2 * S, message="Container killed.")]
    _, alerts = drive(det, events)
    assert alerts[0].evidence["exit_status"] is None  # a kill without the YARN status line
    assert alerts[0].evidence["timeouts_ignored_after_release"] == 1


def test_without_grace_the_timeout_pages_at_once() -> None:
    det = TmLost(TmLostParams(grace_s=0))
    state, timer, alerts = drive_timer(det, [timeout(T0)])
    assert transitions(alerts) == [(AlertStatus.FIRING, 0)]
    assert state is not None and state.pending_until is None
    assert timer == T0 + 900 * S  # the resolve


def test_idle_taskmanager_resolves_with_the_cause_logged_after_the_page() -> None:
    det = TmLost(TmLostParams(grace_s=10, clear_for_s=3600, idle_ttl_s=600))
    events = [timeout(T0, POD), fatal_oom(T0 + 60 * S, POD)]
    state, alerts = drive(det, events, until=T0 + 3600 * S)
    assert state is None
    assert transitions(alerts) == [(AlertStatus.FIRING, 10 * S), (AlertStatus.RESOLVED, 660 * S)]
    assert alerts[1].summary == f"TaskManager {POD}: no events about it any more"
    assert alerts[1].evidence["cause"] == "jvm_oom"


def test_a_resolve_due_at_the_idle_time_itself_still_says_why() -> None:
    det = TmLost(TmLostParams(grace_s=10, clear_for_s=600, idle_ttl_s=600))
    state, alerts = drive(det, [timeout(T0)], until=T0 + 3600 * S)
    assert state is None
    assert transitions(alerts) == [(AlertStatus.FIRING, 10 * S), (AlertStatus.RESOLVED, 600 * S)]
    assert alerts[1].summary == f"TaskManager {TM}: no loss signal for 10 min"


def test_grace_must_end_before_the_taskmanager_counts_as_idle() -> None:
    with pytest.raises(ValidationError, match="grace_s"):
        TmLostParams(grace_s=600, idle_ttl_s=600)


#: States as the dict-based version (schema 1, before typed states) saved them.
OLD_FIRING = {
    "v": 1,
    "entity": f"tm:{TM}",
    "job_id": JOB,
    "job_name": "orders-enrichment",
    "tm_id": TM,
    "host": "worker-7.example.com",
    "firing": True,
    "incident_start_ms": T0,
    "clear_since_ms": None,
    "last_event_ms": T0 + 46 * S,
    "pending_until": None,
    "first_ms": T0,
    "last_signal_ms": T0 + 45 * S,
    "cause": "memory_kill",
    "late_cause": None,
    "timeouts": 1,
    "timeout_line": f"The heartbeat of TaskManager with id {TM}(worker-7.example.com:8041) timed out.",
    "signals": ["container_memory_kill", "heartbeat_timeout"],
    "kill": {
        "cause": "memory_kill",
        "t": T0,
        "line": "Container [pid=48211] is running beyond the 'PHYSICAL' memory limit.",
        "exit_code": 143,
        "exit_status": -104,
    },
    "oom": None,
    "released_ms": None,
    "suppressed": 0,
    "job_ids": [JOB],
}
OLD_PENDING = {
    **OLD_FIRING,
    "entity": f"tm:{POD}",
    "tm_id": POD,
    "job_id": None,
    "job_name": None,
    "firing": False,
    "incident_start_ms": None,
    "last_event_ms": T0,
    "pending_until": T0 + 20 * S,
    "last_signal_ms": T0,
    "cause": None,
    "timeout_line": f"The heartbeat of TaskManager with id {POD} timed out.",
    "signals": ["heartbeat_timeout"],
    "kill": None,
    "job_ids": [],
}


def test_states_saved_by_the_dict_version_load_and_go_on() -> None:
    det = TmLost(TmLostParams())
    firing = det.load(OLD_FIRING)
    assert det.dump(firing) == OLD_FIRING
    _, alerts = drive(det, [], state=firing, timer=T0 + 945 * S, until=T0 + 3600 * S)
    assert transitions(alerts) == [(AlertStatus.RESOLVED, 945 * S)]
    assert alerts[0].evidence["exit_status"] == -104 and alerts[0].job_id == JOB
    pending = det.load(OLD_PENDING)
    _, alerts = drive(det, [fatal_oom(T0 + 4 * S, POD)], state=pending, timer=T0 + 20 * S)
    assert transitions(alerts) == [(AlertStatus.FIRING, 4 * S)]
    assert alerts[0].evidence["cause"] == "jvm_oom"


# --- standing ----------------------------------------------------------------------------


def test_standing_tells_a_timeout_waiting_for_its_cause_then_the_loss_and_its_resolve() -> None:
    tester = DetectorTester(TmLost(TmLostParams(grace_s=20)))
    assert tester.standing() == (
        "no heartbeat timeout, memory kill or OutOfMemoryError for this TaskManager"
    )
    tester.feed(timeout(T0))
    assert tester.standing() == (
        f"heartbeat timed out at {at(T0)}; waiting for a cause until {at(T0 + 20 * S)}, "
        "then pages with cause unknown"
    )
    tester.advance_to(T0 + 20 * S)
    assert tester.standing() == (
        f"FIRING since {at(T0 + 20 * S)}: heartbeat timed out, no cause in the logs; "
        f"latest loss signal {at(T0)} (1 heartbeat timeout); resolves at {at(T0 + 900 * S)} if "
        "no loss signal comes"
    )
    tester.advance_to(T0 + 1000 * S)
    assert [a.status for a in tester.alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert tester.standing() == "not lost: no heartbeat timeout or kill open"


def test_standing_of_a_kill_and_of_a_released_taskmanager() -> None:
    tester = DetectorTester(TmLost(TmLostParams()))
    tester.feed(kill(T0))
    assert tester.standing().startswith(
        f"FIRING since {at(T0)} (0 s): killed by YARN for exceeding its memory limit; "
        f"latest loss signal {at(T0)}; resolves at {at(T0 + 900 * S)}"
    )
    released_tm = DetectorTester(TmLost(TmLostParams()))
    released_tm.feed(released(T0, tm=POD), timeout(T0 + 50 * S, tm=POD))
    assert released_tm.standing() == (
        f"not lost: no heartbeat timeout or kill open; stopped by Flink at {at(T0)}: timeouts "
        f"until {at(T0 + 600 * S)} are expected; 1 timeout ignored after a release"
    )
