"""jm_k8s_watch_crash as a plain state machine: events in, steps out, time injected."""

from __future__ import annotations

import json

import pytest

from detectors import REGISTRY, Alert, AlertStatus, Event, Severity
from detectors.jm_k8s_watch_crash import JmK8sWatchCrash, JmK8sWatchCrashParams
from detectors.testing import DetectorTester, drive
from detectors.words import at

JOB = "7848c696590291978aa8279b3c09e5d7"
S = 1000
T0 = 1_602_948_320_649  # 2020-10-17 15:25:20.649 (seed 003)
TOO_OLD = (
    "io.fabric8.kubernetes.client.KubernetesClientException: too old resource version: "
    "5906722735 (5907278804)"
)
FRAME = (
    "\tat io.fabric8.kubernetes.client.dsl.internal.WatchConnectionManager$1.onMessage("
    "WatchConnectionManager.java:259) [flink-dist_2.11-1.11.0.jar:1.11.0]"
)


def fatal(
    t: int, where: str = "ResourceManager", cause: str | None = TOO_OLD, host: str | None = None
) -> Event:
    head = f"Fatal error occurred in {where}."
    message = f"{head}\n{cause}\n{FRAME}" if cause else head
    return Event(kind="fatal_error", time_ms=t, reason=cause, message=message, host=host)


def watch_line(t: int, text: str = TOO_OLD, host: str | None = None) -> Event:
    return Event(kind="k8s_watch_gone", time_ms=t, reason=text, message=text, host=host)


def started(t: int, host: str | None = None) -> Event:
    return Event(
        kind="jm_started",
        time_ms=t,
        reason="KubernetesApplicationClusterEntrypoint",
        message="Starting KubernetesApplicationClusterEntrypoint.",
        host=host,
    )


def restored(t: int, cp: int = 43, job: str = JOB, host: str | None = None) -> Event:
    return Event(
        kind="job_restored",
        time_ms=t,
        job_id=job,
        checkpoint_id=cp,
        reason="Checkpoint",
        host=host,
        message=f"Restoring job {job} from latest valid checkpoint: Checkpoint {cp} @ "
        f"1602919296275 for {job}.",
    )


def no_checkpoint(t: int, host: str | None = None) -> Event:
    return Event(
        kind="no_checkpoint_found",
        time_ms=t,
        host=host,
        message="No checkpoint found during restore.",
    )


def running(t: int, job: str = JOB, frm: str = "CREATED", host: str | None = None) -> Event:
    return Event(
        kind="job_state",
        time_ms=t,
        job_id=job,
        job_name="orders-enrichment",
        from_state=frm,
        to_state="RUNNING",
        host=host,
        message=f"Job orders-enrichment ({job}) switched from state {frm} to RUNNING.",
    )


def transitions(alerts: list[Alert]) -> list[tuple[AlertStatus, Severity, int]]:
    return [(a.status, a.severity, a.event_time_ms - T0) for a in alerts]


def test_registered_under_its_contract_name() -> None:
    assert REGISTRY["jm_k8s_watch_crash"] is JmK8sWatchCrash
    assert JmK8sWatchCrash.scope == "cluster"


def test_crash_with_ha_fires_once_and_resolves_restored_from_checkpoint() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    events = [
        running(T0 - 3600 * S),
        fatal(T0),
        fatal(T0 + 1, "the cluster entrypoint"),
        started(T0 + 20 * S),
        restored(T0 + 31 * S),
        running(T0 + 32 * S),
    ]
    _, alerts = drive(det, events, until=T0 + 3600 * S)
    assert transitions(alerts) == [
        (AlertStatus.FIRING, Severity.WARNING, 0),
        (AlertStatus.RESOLVED, Severity.WARNING, 32 * S + 600 * S),
    ]
    assert alerts[0].evidence["restored"] == "unknown"
    assert alerts[0].evidence["resource_version"] == "5906722735"
    assert alerts[0].job_id == JOB  # the only job the JobManager ran before the crash
    ev = alerts[1].evidence
    assert ev["restored"] == "checkpoint"
    assert ev["restored_job_ids"] == [JOB] and ev["lost_job_ids"] == []
    assert ev["checkpoints"] == {JOB: 43}
    assert ev["jm_restart_s"] == 20.0 and ev["recovery_s"] == 32.0
    assert ev["fatal_lines"] == 2
    assert alerts[1].alert_id == alerts[0].alert_id


def test_crash_without_ha_escalates_to_critical_state_lost() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    events = [
        fatal(T0),
        fatal(T0 + 1, "the cluster entrypoint"),
        started(T0 + 20 * S),
        no_checkpoint(T0 + 30 * S),
        running(T0 + 31 * S),
    ]
    _, alerts = drive(det, events, until=T0 + 3600 * S)
    assert transitions(alerts) == [
        (AlertStatus.FIRING, Severity.WARNING, 0),
        (AlertStatus.ESCALATED, Severity.CRITICAL, 31 * S),
        (AlertStatus.RESOLVED, Severity.CRITICAL, 31 * S + 600 * S),
    ]
    assert alerts[1].evidence["restored"] == "none"
    assert alerts[1].evidence["lost_job_ids"] == [JOB]
    assert alerts[1].evidence["job_ids"] == [JOB]
    assert alerts[1].evidence["no_checkpoint_lines"] == 1


def test_stack_trace_split_by_the_shipper_still_pairs_into_one_crash() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams(pair_s=10))
    events = [
        fatal(T0, cause=None),
        watch_line(T0 + 1),
        fatal(T0 + 2, "the cluster entrypoint", None),
    ]
    _, alerts = drive(det, events)
    assert transitions(alerts) == [(AlertStatus.FIRING, Severity.WARNING, 0)]
    assert alerts[0].evidence["diagnostics"] == TOO_OLD


def test_lone_pieces_far_apart_are_no_crash() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams(pair_s=10))
    _, alerts = drive(det, [fatal(T0, cause=None), watch_line(T0 + 60 * S)], until=T0 + 7200 * S)
    assert alerts == []


@pytest.mark.parametrize(
    "event",
    [
        watch_line(T0, "Creating a new watch on TaskManager pods."),
        watch_line(
            T0,
            "Got a http code 'HTTP_GONE' which means the Kubernetes client has the too old "
            "resource version.",
        ),
        fatal(
            T0,
            "TaskExecutor pekko.tcp://flink@10.0.3.17:6122/user/rpc/taskmanager_0",
            "org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException: Could "
            "not register at the ResourceManager within the specified maximum registration "
            "duration PT5M.",
        ),
    ],
    ids=["new_watch_1_13", "http_gone_debug_1_13", "taskexecutor_fatal"],
)
def test_handled_watch_restarts_and_other_fatal_errors_never_fire(event: Event) -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    _, alerts = drive(det, [event, running(T0 + 60 * S, frm="RESTARTING")], until=T0 + 7200 * S)
    assert alerts == []


def test_jobmanager_that_never_comes_back_escalates_after_the_timeout() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams(restart_timeout_s=600))
    events = [running(T0 - 600 * S), fatal(T0), running(T0 + 700 * S, job="0" * 32)]
    _, alerts = drive(det, events)
    # The other job's RUNNING comes after the deadline, so it does not count as a recovery
    # before the escalation.
    assert [(a.status, a.event_time_ms - T0) for a in alerts[:2]] == [
        (AlertStatus.FIRING, 0),
        (AlertStatus.ESCALATED, 600 * S),
    ]
    assert "has not restarted" in alerts[1].summary
    assert alerts[1].evidence["restored"] == "unknown"


def test_restarted_jobmanager_without_jobs_is_state_lost_for_the_jobs_it_ran() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams(restart_timeout_s=600))
    events = [running(T0 - 600 * S), fatal(T0), started(T0 + 30 * S)]
    _, alerts = drive(det, events, until=T0 + 700 * S)
    assert [a.status for a in alerts] == [AlertStatus.FIRING, AlertStatus.ESCALATED]
    assert alerts[1].evidence["restored"] == "none"
    assert alerts[1].evidence["lost_job_ids"] == [JOB]


def test_two_jobmanagers_on_different_hosts_are_two_incidents() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    other = "1" * 32
    events = [
        running(T0 - 100 * S, host="node-a"),
        running(T0 - 100 * S, job=other, host="node-b"),
        fatal(T0, host="node-a"),
        fatal(T0 + 5 * S, host="node-b"),
        restored(T0 + 30 * S, host="node-a"),
        running(T0 + 31 * S, host="node-a"),
        no_checkpoint(T0 + 40 * S, host="node-b"),
        running(T0 + 41 * S, job=other, host="node-b"),
    ]
    _, alerts = drive(det, events, until=T0 + 3600 * S)
    firing = [a for a in alerts if a.status is AlertStatus.FIRING]
    assert len(firing) == 2 and firing[0].alert_id != firing[1].alert_id
    resolved = {a.host: a.evidence["restored"] for a in alerts if a.status is AlertStatus.RESOLVED}
    assert resolved == {"node-a": "checkpoint", "node-b": "none"}


def test_state_stays_bounded() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams(max_jobs=20, max_jobmanagers=8))
    events = [running(T0 + i, job=f"{i:032x}", host=f"node-{i % 30}") for i in range(600)]
    events += [fatal(T0 + 10 * S + i * S, host=f"node-{i}") for i in range(30)]
    st, _ = drive(det, events)
    assert st is not None
    assert len(st.crashes) <= 8 and len(st.jobs) <= 8
    assert all(len(j) <= 20 for j in st.jobs.values())
    assert len(json.dumps(det.dump(st))) < 16384


def test_jobs_of_the_crashed_jobmanager_do_not_carry_over_to_its_next_crash() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    other = "2" * 32
    events = [running(T0 - 100 * S), fatal(T0), restored(T0 + 30 * S), running(T0 + 31 * S)]
    later = T0 + 2 * 3600 * S
    events += [running(later - 100 * S, job=other), fatal(later)]
    _, alerts = drive(det, events, until=later + 10 * S)
    assert alerts[-1].status is AlertStatus.FIRING
    assert alerts[-1].evidence["jobs_before_crash"] == sorted([JOB, other])


def test_a_failover_of_another_job_during_an_open_crash_is_not_state_lost() -> None:
    # On 1.10+ a failover logs RESTARTING -> RUNNING before its restore line: it must not
    # read as a job the restarted JobManager brought back without state.
    other = "0123456789abcdef0123456789abcdef"
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    events = [
        running(T0 - 3600 * S),
        fatal(T0),
        fatal(T0 + 1, "the cluster entrypoint"),
        running(T0 + 5 * S, job=other, frm="RESTARTING"),
        started(T0 + 20 * S),
        restored(T0 + 31 * S),
        running(T0 + 32 * S),
    ]
    _, alerts = drive(det, events, until=T0 + 3600 * S)
    assert [a.severity for a in alerts] == [Severity.WARNING, Severity.WARNING]
    assert alerts[1].evidence["lost_job_ids"] == []


def comeback(t: int) -> list[Event]:
    """Kubernetes restarts the JobManager; with HA it restores the job (seed 003's story)."""
    return [started(t + 20 * S), restored(t + 31 * S), running(t + 32 * S)]


def test_a_crash_loop_is_one_incident_that_escalates_at_the_third_crash() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    events = [running(T0 - 3600 * S)]
    for k in range(4):
        events += [fatal(T0 + k * 300 * S), *comeback(T0 + k * 300 * S)]
    _, alerts = drive(det, events, until=T0 + 3 * 300 * S + 100 * S)
    assert transitions(alerts) == [
        (AlertStatus.FIRING, Severity.WARNING, 0),
        (AlertStatus.ESCALATED, Severity.CRITICAL, 600 * S),
    ]
    assert len({a.alert_id for a in alerts}) == 1
    assert "crashed 3 times in 10 min" in alerts[1].summary
    assert alerts[1].evidence["crashes"] == 3
    assert alerts[1].evidence["recovery_s"] is None  # measured from the latest crash
    _, later = drive(det, events, until=T0 + 3 * 300 * S + 3600 * S)
    resolved = [a for a in later if a.status is AlertStatus.RESOLVED]
    assert len(resolved) == 1 and resolved[0].evidence["crashes"] == 4
    assert resolved[0].evidence["recovery_s"] == 32.0


def test_crashes_spread_over_closed_incidents_still_make_a_loop() -> None:
    # Each crash recovers and its incident closes (clear_for_s = 600 s) before the next:
    # the third within the hour opens critical at once.
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    events = [running(T0 - 3600 * S)]
    for k in range(3):
        events += [fatal(T0 + k * 1200 * S), *comeback(T0 + k * 1200 * S)]
    _, alerts = drive(det, events, until=T0 + 2 * 1200 * S + 60 * S)
    fired = [a for a in alerts if a.status is AlertStatus.FIRING]
    assert [a.severity for a in fired] == [Severity.WARNING, Severity.WARNING, Severity.CRITICAL]
    assert "crashed 3 times in 40 min" in fired[-1].summary


def test_crashes_further_apart_than_the_loop_window_are_no_loop() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    events = [running(T0 - 3600 * S)]
    for k in range(3):
        events += [fatal(T0 + k * 4000 * S), *comeback(T0 + k * 4000 * S)]
    _, alerts = drive(det, events, until=T0 + 3 * 4000 * S)
    assert all(a.severity is Severity.WARNING for a in alerts)


def test_idle_fleet_closes_every_open_crash() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams(restart_timeout_s=600, idle_ttl_s=3600))
    events = [fatal(T0, host="node-a"), fatal(T0 + 5 * S, host="node-b")]
    state, alerts = drive(det, events, until=T0 + 7200 * S)
    assert state is None
    closed = [(a.host, a.event_time_ms - T0) for a in alerts if a.status is AlertStatus.RESOLVED]
    assert closed == [("node-a", 3605 * S), ("node-b", 3605 * S)]
    assert all(a.summary.endswith("no events any more") for a in alerts[-2:])
    assert [a.severity for a in alerts[-2:]] == [Severity.CRITICAL, Severity.CRITICAL]


#: A state as the dict-based version (schema 1, before typed states) saved it: a crash that
#: came back from its checkpoint (resolves 600 s after), an earlier loop on another host.
OLD_STATE = {
    "v": 1,
    "entity": "cluster",
    "job_id": JOB,
    "job_name": "orders-enrichment",
    "tm_id": None,
    "host": None,
    "firing": False,
    "incident_start_ms": None,
    "clear_since_ms": None,
    "last_event_ms": T0 + 32 * S,
    "crashes": {
        "": {
            "start_ms": T0,
            "stalled": False,
            "job_id": JOB,
            "fatal_lines": 2,
            "line": TOO_OLD,
            "resource_version": "5906722735",
            "jm_started_ms": T0 + 20 * S,
            "restored": {JOB: 43},
            "lost": [],
            "back_ms": T0 + 32 * S,
            "no_checkpoint": 0,
            "jobs_before": [JOB],
            "severity": "warning",
            "crash_times": [T0 - 300 * S, T0],
            "last_crash_ms": T0,
        }
    },
    "jobs": {"": {JOB: T0 + 32 * S}},
    "pending": {"node-b": {"fatal_ms": T0 + 30 * S, "watch_ms": None, "line": None}},
    "loops": {"node-c": [T0 - 1200 * S]},
}


def _as_incidents(old: dict) -> dict:
    """OLD_STATE in layout 2: each open crash an incident (``start_ms`` renamed, open)."""
    crashes = {
        src: {k: v for k, v in c.items() if k != "start_ms"}
        | {"firing": True, "incident_start_ms": c["start_ms"], "clear_since_ms": None}
        for src, c in old["crashes"].items()
    }
    return old | {"v": 2, "crashes": crashes}


def test_a_state_saved_by_the_dict_version_loads_and_goes_on() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    state = det.load(OLD_STATE)
    assert det.dump(state) == _as_incidents(OLD_STATE)
    assert det.signal_values(state) == {"jm_crashes_open": 1.0}
    # The split crash on node-b pairs with its watch line (and never comes back); the open
    # one resolves on time.
    events = [watch_line(T0 + 35 * S, host="node-b")]
    _, alerts = drive(det, events, state=state, timer=T0 + 632 * S, until=T0 + 700 * S)
    assert [(a.status, a.host, a.event_time_ms - T0) for a in alerts] == [
        (AlertStatus.FIRING, "node-b", 30 * S),
        (AlertStatus.ESCALATED, "node-b", 630 * S),
        (AlertStatus.RESOLVED, None, 632 * S),
    ]
    assert alerts[2].evidence["crashes"] == 2 and alerts[2].evidence["checkpoints"] == {JOB: 43}


#: A state as version 1 (before a crash was an incident value) saved it, printed by that
#: version's ``Detector.dump_json`` after ``fatal(T0, host="jm-0")``: a JobManager crashed
#: and is not back yet (due to escalate 600 s after).
SAVED_BY_V1 = (
    '{"v":1,"entity":"cluster","job_id":null,"job_name":null,"tm_id":null,"host":"jm-0",'
    '"firing":false,"incident_start_ms":null,"clear_since_ms":null,"last_event_ms":1602948320649,'
    '"crashes":{"jm-0":{"start_ms":1602948320649,"last_crash_ms":null,'
    '"crash_times":[1602948320649],"stalled":false,"job_id":null,"fatal_lines":1,'
    '"line":"io.fabric8.kubernetes.client.KubernetesClientException: too old resource version: '
    '5906722735 (5907278804)","resource_version":"5906722735","jm_started_ms":null,'
    '"restored":{},"lost":[],"back_ms":null,"no_checkpoint":0,"jobs_before":[],'
    '"severity":"warning"}},"jobs":{},"pending":{},"loops":{}}'
)


def test_a_crash_saved_by_version_1_escalates_and_resolves_with_the_id_it_fired_with() -> None:
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    (fired,) = drive(det, [fatal(T0, host="jm-0")])[1]
    state = det.load_json(SAVED_BY_V1)
    assert state.crashes["jm-0"].firing and state.crashes["jm-0"].incident_start_ms == T0
    _, alerts = drive(det, [], state=state, timer=T0 + 600 * S, until=T0 + 700 * S)
    assert [(a.status, a.alert_id, a.host) for a in alerts] == [
        (AlertStatus.ESCALATED, fired.alert_id, "jm-0")
    ]


# --- standing ----------------------------------------------------------------------------


def test_standing_follows_a_crash_s_recovery_to_its_resolve() -> None:
    tester = DetectorTester(JmK8sWatchCrash(JmK8sWatchCrashParams()))
    assert tester.standing() == "no JobManager fatal error, start or job state line seen"
    tester.feed(running(T0 - 3600 * S, host="jm-0"))
    assert tester.standing() == "no JobManager crash open; 1 job on 1 JobManager watched"
    # A lone watch error waits for its fatal line.
    tester.feed(watch_line(T0 - 60 * S, host="jm-0"))
    assert tester.standing().endswith("a lone watch error on jm-0 waits for its other half")
    tester.feed(fatal(T0, host="jm-0"))
    assert tester.standing() == (
        f"FIRING since {at(T0)} (0 s): JobManager on jm-0 crashed, not restarted yet, 0 jobs "
        f"restored, 0 without state, critical at {at(T0 + 600 * S)} if no job is back"
    )
    tester.feed(started(T0 + 20 * S, host="jm-0"), restored(T0 + 31 * S, host="jm-0"))
    tester.feed(running(T0 + 32 * S, host="jm-0"))
    assert tester.standing() == (
        f"FIRING since {at(T0)} (32 s): JobManager on jm-0 crashed, restarted after 20 s, "
        f"1 job restored, 0 without state, resolves at {at(T0 + 632 * S)}"
    )
    tester.advance_to(T0 + 3600 * S)
    assert [a.status for a in tester.alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    # Closed, the crash still counts towards a loop for loop_window_s.
    assert tester.standing() == (
        "no JobManager crash open; 1 job on 1 JobManager watched; "
        "jm-0: 1 recent crash (3 make a loop)"
    )


def test_standing_of_a_jobmanager_that_did_not_come_back() -> None:
    tester = DetectorTester(JmK8sWatchCrash(JmK8sWatchCrashParams()))
    tester.feed(running(T0 - 3600 * S), fatal(T0))
    tester.advance_to(T0 + 700 * S)
    assert tester.alerts[-1].status is AlertStatus.ESCALATED
    assert tester.standing() == (
        f"FIRING since {at(T0)} (0 s): JobManager crashed, not restarted yet, 0 jobs restored, "
        "0 without state, critical: no job back"
    )


def test_standing_tells_the_first_crash_and_names_the_others() -> None:
    tester = DetectorTester(JmK8sWatchCrash(JmK8sWatchCrashParams()))
    tester.feed(*[fatal(T0 + i * S, host=f"node-{i}") for i in range(4)])
    line = tester.standing()
    assert line.startswith(f"FIRING since {at(T0)} (3 s): JobManager on node-0 crashed, ")
    assert line.endswith("; 3 more crashes open (node-1, node-2, ...)"), line
    # It crashes again after its restart: the recovery counts from the latest crash.
    tester.feed(started(T0 + 20 * S, host="node-0"), fatal(T0 + 60 * S, host="node-0"))
    assert f"JobManager on node-0 crashed (again at {at(T0 + 60 * S)}), not restarted yet" in (
        tester.standing()
    )
