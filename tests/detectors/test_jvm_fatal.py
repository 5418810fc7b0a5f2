"""jvm_fatal as a plain state machine: fatal and OOM lines in, alerts out, time injected."""

from __future__ import annotations

import json

import pytest

from detectors import REGISTRY, AlertStatus, Event, Severity
from detectors.correlation import Correlator
from detectors.jvm_fatal import JvmFatal, JvmFatalParams, oom_cause, role_of
from detectors.testing import DetectorTester, drive, drive_timer
from detectors.tm_ids import tm_entity
from detectors.words import at

TM = "container_1597960565773_0003_01_000002"
POD = "orders-enrichment-taskmanager-1-3"
S = 1000
T0 = 1_598_331_508_535  # 2020-08-25 04:58:28,535 (seed 000)

SEED_FATAL = (
    "FATAL: Thread 'flink-akka.actor.default-dispatcher-628' produced an uncaught exception. "
    "Stopping the process..."
)
HEAP_TRACE = (
    "java.lang.OutOfMemoryError: Java heap space\n\tat java.util.Arrays.copyOf(Arrays.java:3236)"
)
RUNNER = "Fatal error occurred while executing the TaskManager. Shutting it down..."
METASPACE_TM = (
    "java.lang.OutOfMemoryError: Metaspace. The metaspace out-of-memory error has occurred. This "
    "can mean two things: either the job requires a larger size of JVM metaspace to load classes "
    "or there is a class loading leak. In the first case 'taskmanager.memory.jvm-metaspace.size' "
    "configuration option should be increased. If the error persists (usually in cluster after "
    "several job (re-)submissions) then there is probably a class loading leak in user code or "
    "some of its dependencies which has to be investigated and fixed. The task executor has to "
    "be shutdown..."
)
HEAP_JM = (
    "java.lang.OutOfMemoryError: Java heap space. A heap space-related out-of-memory error has "
    "occurred. This can mean two things: either Flink Master requires a larger size of JVM heap "
    "space or there is a memory leak. In the first case, 'jobmanager.memory.heap.size' can be "
    "used to increase the amount of available heap memory. If the problem is not resolved by "
    "increasing the heap size, it indicates a memory leak in the user code or its dependencies "
    "which needs to be investigated and fixed. The Flink Master has to be shutdown..."
)


def fatal(t: int, message: str, tm: str = TM, host: str | None = "ip-172-31-20-14") -> Event:
    lines = message.split("\n")
    reason = next((ln for ln in lines[1:] if "Error" in ln or "Exception" in ln), None)
    return Event(kind="fatal_error", time_ms=t, tm_id=tm, host=host, reason=reason, message=message)


def oom(t: int, line: str, tm: str = TM) -> Event:
    detail = line.split("OutOfMemoryError:", 1)[-1].split(".")[0].strip()
    return Event(
        kind="jvm_oom", time_ms=t, tm_id=tm, host="ip-172-31-20-14", reason=detail, message=line
    )


def test_registered_under_its_contract_name_per_process() -> None:
    assert REGISTRY["jvm_fatal"] is JvmFatal
    assert JvmFatal.scope == "tm"
    assert JvmFatalParams().severity is Severity.CRITICAL


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("java.lang.OutOfMemoryError: GC overhead limit exceeded", "gc_overhead"),
        ("java.lang.OutOfMemoryError: Java heap space", "heap_space"),
        (HEAP_JM, "heap_space"),
        (METASPACE_TM, "metaspace"),
        (
            "Caused by: java.lang.OutOfMemoryError: Direct buffer memory. The direct ...",
            "direct_memory",
        ),
        ("java.lang.OutOfMemoryError: unable to create new native thread", "other"),
        ("Encountered fatal error java.lang.OutOfMemoryError - terminating the JVM", "other"),
        (
            "Encountered fatal error java.lang.OutOfMemoryError - terminating the JVM\n"
            "java.lang.OutOfMemoryError: GC overhead limit exceeded",
            "gc_overhead",
        ),
        ("java.lang.Error: This indicates that a fatal error has happened", None),
        (None, None),
    ],
)
def test_oom_causes(text: str | None, cause: str | None) -> None:
    assert oom_cause(text) == cause


@pytest.mark.parametrize(
    ("tm_id", "text", "role"),
    [
        (POD, SEED_FATAL, "taskmanager"),
        (
            "orders-enrichment-7c9d6b5f4-q2wzx",
            "Fatal error occurred in the cluster entrypoint.",
            "jobmanager",
        ),
        ("orders-enrichment-7c9d6b5f4-q2wzx", f"{SEED_FATAL}\n{HEAP_JM}", "jobmanager"),
        ("ip-10-0-0-1", f"{RUNNER}\n{HEAP_TRACE}", "taskmanager"),
        (TM, SEED_FATAL, "taskmanager"),
        ("container_e05_1699999999999_0042_02_000001", SEED_FATAL, "jobmanager"),
        ("10.0.3.17:6122-4f2a9c", SEED_FATAL, "taskmanager"),
        (
            "cdc-5f7d8c9b6-m4k2p",
            "FATAL: Thread 'SourceCoordinator-Source: x' produced an",
            "jobmanager",
        ),
        ("ip-10-0-0-1", SEED_FATAL, "unknown"),
    ],
)
def test_roles(tm_id: str, text: str, role: str) -> None:
    assert role_of(tm_id, text) == role


def test_an_uncaught_oom_with_its_trace_fires_at_once_with_cause_role_and_thread() -> None:
    det = JvmFatal(JvmFatalParams())
    _, alerts = drive(
        det, [fatal(T0, f"{SEED_FATAL}\n{HEAP_TRACE}", tm=POD, host="gke-pool-1-4f2a")]
    )
    assert [(a.status, a.event_time_ms, a.severity) for a in alerts] == [
        (AlertStatus.FIRING, T0, Severity.CRITICAL)
    ]
    a = alerts[0]
    assert (a.tm_id, a.host, a.entity) == (POD, "gke-pool-1-4f2a", tm_entity(POD))
    ev = a.evidence
    assert ev["cause"] == "heap_space" and ev["role"] == "taskmanager"
    assert ev["exit"] == "fatal_exit_handler"
    assert ev["thread"] == "flink-akka.actor.default-dispatcher-628"
    assert ev["oom"] == "java.lang.OutOfMemoryError: Java heap space"
    assert ev["fatal_exits"] == 1 and "RocksDB" in ev["hint"]
    assert a.summary == (
        f"TaskManager {POD} on gke-pool-1-4f2a stopped on "
        "java.lang.OutOfMemoryError: Java heap space"
    )


def test_seed_000_fatal_line_and_oom_shipped_apart_fire_when_the_oom_arrives() -> None:
    det = JvmFatal(JvmFatalParams())
    events = [
        fatal(T0, SEED_FATAL),
        oom(T0 + 168, "java.lang.OutOfMemoryError: GC overhead limit exceeded"),
    ]
    state, alerts = drive(det, events)
    assert [(a.status, a.event_time_ms) for a in alerts] == [(AlertStatus.FIRING, T0 + 168)]
    assert alerts[0].evidence["cause"] == "gc_overhead"
    assert alerts[0].evidence["role"] == "taskmanager"  # a YARN container other than _000001
    assert alerts[0].evidence["fatal_line"] == SEED_FATAL
    assert state is not None and state.pending is None


def test_an_oom_line_just_before_the_fatal_line_is_its_cause() -> None:
    det = JvmFatal(JvmFatalParams())
    events = [oom(T0 - 2 * S, "java.lang.OutOfMemoryError: Metaspace"), fatal(T0, SEED_FATAL)]
    _, alerts = drive(det, events)
    assert [(a.event_time_ms, a.evidence["cause"]) for a in alerts] == [(T0, "metaspace")]


def test_an_uncaught_exception_without_trace_fires_as_fatal_exit_when_the_wait_ends() -> None:
    det = JvmFatal(JvmFatalParams(cause_wait_s=10))
    state, timer, alerts = drive_timer(det, [fatal(T0, SEED_FATAL)])
    assert alerts == [] and timer == T0 + 10 * S
    _, fired = drive(det, [], until=T0 + 10 * S, state=state, timer=timer)
    assert [(a.status, a.event_time_ms, a.evidence["cause"]) for a in fired] == [
        (AlertStatus.FIRING, T0 + 10 * S, "fatal_exit")
    ]
    # The same decision when a later event, not the timer, notices the deadline first.
    _, alerts = drive(det, [fatal(T0, SEED_FATAL), oom(T0 + 30 * S, HEAP_TRACE)])
    assert [(a.event_time_ms, a.evidence["cause"]) for a in alerts] == [(T0 + 10 * S, "fatal_exit")]


def test_a_non_oom_uncaught_exception_fires_as_fatal_exit() -> None:
    det = JvmFatal(JvmFatalParams())
    msg = (
        "FATAL: Thread 'SourceCoordinator-Source: TableSourceScan(table=[[cdc]]) -> Map' produced "
        "an uncaught exception. Stopping the process...\njava.lang.Error: This indicates that a "
        "fatal error has happened and caused the coordinator executor thread to exit."
    )
    _, alerts = drive(det, [fatal(T0, msg, tm="cdc-5f7d8c9b6-m4k2p", host="node-3")])
    ev = alerts[0].evidence
    assert (ev["cause"], ev["role"], ev["oom"]) == ("fatal_exit", "jobmanager", None)
    assert alerts[0].summary.startswith(
        "JobManager cdc-5f7d8c9b6-m4k2p on node-3 stopped on an uncaught exception in thread "
    )


def test_oom_lines_alone_never_fire_a_task_failure_cause_or_a_client_trace() -> None:
    det = JvmFatal(JvmFatalParams(idle_ttl_s=3600))
    events = [
        oom(T0, "java.lang.OutOfMemoryError: Java heap space", tm=POD),
        oom(T0 + 60 * S, METASPACE_TM, tm=POD),
        oom(T0 + 600 * S, "Caused by: java.lang.OutOfMemoryError: Java heap space", tm=POD),
        oom(T0 + 601 * S, HEAP_JM, tm=POD),
    ]
    state, timer, alerts = drive_timer(det, events)
    assert alerts == []
    # A fatal line much later is not explained by an OOM long gone.
    late = [fatal(T0 + 900 * S, SEED_FATAL, tm=POD)]
    state, timer, alerts = drive_timer(det, late, state=state, timer=timer)
    assert alerts == []
    assert state is not None
    _, alerts = drive(det, [], until=T0 + 910 * S, state=state, timer=timer)
    assert [a.evidence["cause"] for a in alerts] == ["fatal_exit"]


def test_shutdowns_for_other_reasons_are_left_to_other_detectors() -> None:
    det = JvmFatal(JvmFatalParams())
    timeout = (
        "org.apache.flink.runtime.taskexecutor.exceptions.RegistrationTimeoutException: Could not "
        "register at the ResourceManager within the specified maximum registration duration PT5M."
    )
    watch = (
        "io.fabric8.kubernetes.client.KubernetesClientException: too old resource version: 1 (2)"
    )
    events = [
        fatal(
            T0,
            f"Fatal error occurred in TaskExecutor pekko.tcp://flink@h:6122/user/rpc/taskmanager_0.\n{timeout}",
        ),
        fatal(T0 + 5, f"{RUNNER}\n{timeout}"),
        fatal(T0 + 9, f"Fatal error occurred in ResourceManager.\n{watch}"),
        fatal(T0 + 12, f"Fatal error occurred in the cluster entrypoint.\n{watch}"),
    ]
    state, timer, alerts = drive_timer(det, events)
    assert alerts == []
    # A runner line without its trace waits for an OOM; none comes, so nothing fires.
    runner = [fatal(T0 + 60 * S, RUNNER)]
    state, timer, alerts = drive_timer(det, runner, state=state, timer=timer)
    assert state is not None and state.pending is not None and alerts == []
    state, alerts = drive(det, [], until=T0 + 70 * S, state=state, timer=timer)
    assert alerts == [] and state.pending is None


def test_a_runner_line_whose_trace_came_apart_fires_on_the_oom() -> None:
    det = JvmFatal(JvmFatalParams())
    events = [fatal(T0, RUNNER, tm="ip-10-0-0-1"), oom(T0 + 40, METASPACE_TM, tm="ip-10-0-0-1")]
    _, alerts = drive(det, events)
    ev = alerts[0].evidence
    assert (ev["cause"], ev["role"], ev["exit"]) == (
        "metaspace",
        "taskmanager",
        "taskmanager_runner",
    )
    assert ev["oom"].startswith("java.lang.OutOfMemoryError: Metaspace. The metaspace")
    assert len(ev["oom"]) <= 300


def test_task_terminating_the_jvm_names_the_oom_kind_from_its_trace_or_waits_for_it() -> None:
    det = JvmFatal(JvmFatalParams())
    head = "Encountered fatal error java.lang.OutOfMemoryError - terminating the JVM"
    _, alerts = drive(
        det, [fatal(T0, f"{head}\njava.lang.OutOfMemoryError: GC overhead limit exceeded")]
    )
    assert [a.evidence["cause"] for a in alerts] == ["gc_overhead"]
    _, alerts = drive(
        det, [fatal(T0, head), oom(T0 + 3, "java.lang.OutOfMemoryError: Java heap space")]
    )
    assert [(a.event_time_ms, a.evidence["cause"]) for a in alerts] == [(T0 + 3, "heap_space")]
    state, timer, alerts = drive_timer(det, [fatal(T0, head)])
    assert alerts == [] and state is not None
    _, alerts = drive(det, [], until=T0 + 10 * S, state=state, timer=timer)
    assert [a.evidence["cause"] for a in alerts] == ["other"]


def test_one_crash_logged_twice_counts_once_a_crash_loop_counts_each_and_resolves_once() -> None:
    det = JvmFatal(JvmFatalParams(clear_for_s=900))
    crash = [
        fatal(T0, f"{SEED_FATAL}\n{HEAP_TRACE}", tm=POD),
        fatal(T0 + 7, f"{RUNNER}\n{HEAP_TRACE}", tm=POD),
    ]
    again = [fatal(T0 + 343 * S, f"{SEED_FATAL}\n{HEAP_TRACE}", tm=POD)]
    state, timer, alerts = drive_timer(det, crash + again)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    assert state is not None and state.exits == 2
    assert det.signal_values(state) == {"process_fatal_exits": 2.0}
    state, timer, _ = drive_timer(
        det, [oom(T0 + 400 * S, HEAP_TRACE, tm=POD)], state=state, timer=timer
    )
    assert timer == T0 + 343 * S + 900 * S
    state, timer, resolved = drive_timer(det, [], until=timer, state=state, timer=timer)
    assert [(a.status, a.alert_id, a.evidence["fatal_exits"]) for a in resolved] == [
        (AlertStatus.RESOLVED, alerts[0].alert_id, 2)
    ]
    assert state is not None
    assert det.signal_values(state) == {"process_fatal_exits": 0.0}
    # The next crash of the same process is a new incident.
    next_crash = [fatal(T0 + 3600 * S, f"{SEED_FATAL}\n{HEAP_TRACE}", tm=POD)]
    _, later = drive(det, next_crash, state=state, timer=timer)
    assert [a.status for a in later] == [AlertStatus.FIRING]
    assert later[0].alert_id != alerts[0].alert_id
    assert later[0].evidence["fatal_exits"] == 1


def test_jobmanager_heap_oom_of_the_cluster_entrypoint() -> None:
    det = JvmFatal(JvmFatalParams())
    jm = "orders-enrichment-7c9d6b5f4-q2wzx"
    msg = (
        f"Fatal error occurred in the cluster entrypoint.\n{HEAP_JM}\n\tat java.util.HashMap.resize"
    )
    _, alerts = drive(det, [fatal(T0, msg, tm=jm, host="gke-pool-1-9c1d")])
    ev = alerts[0].evidence
    assert (ev["cause"], ev["role"], ev["exit"]) == (
        "heap_space",
        "jobmanager",
        "cluster_entrypoint",
    )
    assert alerts[0].summary.startswith(f"JobManager {jm} on gke-pool-1-9c1d stopped on java.lang")


def test_idle_process_is_evicted_and_state_stays_small() -> None:
    det = JvmFatal(JvmFatalParams(idle_ttl_s=3600, clear_for_s=900))
    huge = f"FATAL: Thread '{'x' * 5000}' produced an uncaught exception. Stopping the process..."
    state, timer, alerts = drive_timer(det, [fatal(T0, f"{huge}\n{HEAP_TRACE}{'y' * 5000}")])
    assert state is not None and len(alerts) == 1
    assert len(json.dumps(det.dump(state))) < 2000
    big_oom = [oom(T0 + S, "java.lang.OutOfMemoryError: " + "z" * 5000)]
    state, timer, _ = drive_timer(det, big_oom, state=state, timer=timer)
    assert state is not None and len(json.dumps(det.dump(state))) < 2000
    state, timer, alerts = drive_timer(det, [], until=T0 + 900 * S, state=state, timer=timer)
    assert [a.status for a in alerts] == [AlertStatus.RESOLVED]
    assert state is not None and timer == T0 + S + 3600 * S
    state, alerts = drive(det, [], until=T0 + S + 3600 * S, state=state, timer=timer)
    assert state is None and alerts == []


def test_two_fatal_lines_of_one_exit_without_traces_wait_together() -> None:
    # The handler's line then the runner's, both shipped without their exception: the
    # first one's verdict (it always ends the process) is not lost to the second.
    det = JvmFatal(JvmFatalParams())
    state, timer, alerts = drive_timer(det, [fatal(T0, SEED_FATAL), fatal(T0 + 4, RUNNER)])
    assert alerts == [] and state is not None
    _, alerts = drive(det, [], until=T0 + 10 * S, state=state, timer=timer)
    assert [(a.event_time_ms, a.evidence["cause"], a.evidence["exit"]) for a in alerts] == [
        (T0 + 10 * S, "fatal_exit", "fatal_exit_handler")
    ]


def test_an_idle_process_resolves_its_incident_in_its_own_words() -> None:
    det = JvmFatal(JvmFatalParams(idle_ttl_s=600, clear_for_s=900))
    state, alerts = drive(
        det, [fatal(T0, f"{SEED_FATAL}\n{HEAP_TRACE}", tm=POD)], until=T0 + 600 * S
    )
    assert state is None
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, T0),
        (AlertStatus.RESOLVED, T0 + 600 * S),
    ]
    assert alerts[1].summary == f"TaskManager {POD} on ip-172-31-20-14: no fatal exit for 15 min"
    assert alerts[1].evidence == alerts[0].evidence


#: States as the untyped version wrote them: firing with a runner line waiting for its
#: OOM line, and an OOM line waiting for its fatal line.
OLD_FIRING = {
    "v": 1,
    "entity": f"tm:{POD}",
    "job_id": None,
    "job_name": None,
    "tm_id": POD,
    "host": "ip-172-31-20-14",
    "firing": True,
    "incident_start_ms": T0,
    "clear_since_ms": None,
    "last_event_ms": T0 + 400 * S,
    "clock_ms": T0 + 400 * S,
    "pending": {
        "t": T0 + 400 * S,
        "how": "taskmanager_runner",
        "always": False,
        "line": RUNNER,
        "thread": None,
        "role": "taskmanager",
        "cause": None,
        "oom": None,
        "bare_oom": False,
    },
    "oom": None,
    "exits": 1,
    "last_exit_ms": T0,
    "facts": {
        "how": "fatal_exit_handler",
        "line": SEED_FATAL,
        "thread": "flink-akka.actor.default-dispatcher-628",
        "role": "taskmanager",
        "cause": "heap_space",
        "oom": "java.lang.OutOfMemoryError: Java heap space",
        "first_exit_ms": T0,
        "last_exit_ms": T0,
    },
}
OLD_OOM = {
    "v": 1, "entity": f"tm:{POD}", "job_id": None, "job_name": None, "tm_id": POD,
    "host": "ip-172-31-20-14", "firing": False, "incident_start_ms": None,
    "clear_since_ms": None, "last_event_ms": T0, "clock_ms": T0, "pending": None,
    "oom": [T0, "metaspace", "java.lang.OutOfMemoryError: Metaspace"], "exits": 0,
    "last_exit_ms": None, "facts": None,
}  # fmt: skip


def test_states_saved_by_the_untyped_version_load_and_go_on() -> None:
    det = JvmFatal(JvmFatalParams())
    state = det.load(OLD_FIRING)
    assert det.dump(state) == OLD_FIRING
    assert state.pending is not None and state.pending.how == "taskmanager_runner"
    # The runner line waits in vain (it alone does not end the process); the incident
    # resolves 15 min after its only exit.
    _, alerts = drive(det, [], until=T0 + 900 * S, state=state, timer=T0 + 410 * S)
    assert [(a.status, a.event_time_ms, a.evidence["fatal_exits"]) for a in alerts] == [
        (AlertStatus.RESOLVED, T0 + 900 * S, 1)
    ]
    assert alerts[0].evidence["cause"] == "heap_space"
    state = det.load(OLD_OOM)
    assert state.oom == (T0, "metaspace", "java.lang.OutOfMemoryError: Metaspace")
    _, alerts = drive(det, [fatal(T0 + 2 * S, SEED_FATAL, tm=POD)], state=state, timer=None)
    assert [(a.event_time_ms, a.evidence["cause"]) for a in alerts] == [(T0 + 2 * S, "metaspace")]


def test_a_line_out_of_order_comes_after_what_was_due_by_the_latest_line() -> None:
    # Without a wait the fatal line's verdict is due at once: an OOM line logged earlier
    # but read after it is stamped with the latest time and does not change that verdict.
    det = JvmFatal(JvmFatalParams(cause_wait_s=0))
    events = [fatal(T0 + 5 * S, SEED_FATAL), oom(T0, HEAP_TRACE)]
    state, alerts = drive(det, events)
    assert [(a.event_time_ms, a.evidence["cause"]) for a in alerts] == [(T0 + 5 * S, "fatal_exit")]
    assert state is not None and state.oom is not None and state.oom[0] == T0 + 5 * S


def test_its_alert_tells_the_incident_headline_which_process_died_and_how() -> None:
    det = JvmFatal(JvmFatalParams())
    jm = "orders-enrichment-7c9d6b5f4-q2wzx"
    msg = f"Fatal error occurred in the cluster entrypoint.\n{HEAP_JM}"
    _, (fired,) = drive(det, [fatal(T0, msg, tm=jm, host="gke-pool-1-9c1d")])
    assert Correlator().observe(fired).headline == f"JobManager {jm} died (heap space)"


# --- standing ----------------------------------------------------------------------------


def test_standing_tells_a_fatal_line_waiting_for_its_cause_then_the_exit_and_its_resolve() -> None:
    tester = DetectorTester(JvmFatal(JvmFatalParams()))
    assert tester.standing() == "no fatal error or OutOfMemoryError line from this process"
    tester.feed(fatal(T0, SEED_FATAL))
    assert tester.standing() == (
        f"a fatal line at {at(T0)} waits for its OutOfMemoryError until {at(T0 + 10 * S)} "
        "(pages then)"
    )
    tester.feed(oom(T0 + 168, "java.lang.OutOfMemoryError: GC overhead limit exceeded"))
    assert tester.standing() == (
        f"FIRING since {at(T0 + 168)} (0 s); TaskManager stopped (gc overhead), 1 fatal exit, "
        f"the latest {at(T0 + 168)}; resolves at {at(T0 + 168 + 900 * S)} if it does not exit "
        "again"
    )
    tester.advance_to(T0 + 3600 * S)
    assert [a.status for a in tester.alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert tester.standing() == f"no fatal exit open (its latest line {at(T0 + 168)})"


def test_standing_of_an_oom_line_alone_says_it_is_no_exit_yet() -> None:
    tester = DetectorTester(JvmFatal(JvmFatalParams()))
    tester.feed(oom(T0, "java.lang.OutOfMemoryError: Java heap space", tm=POD))
    assert tester.alerts == []
    assert tester.standing() == (
        f"an OutOfMemoryError (heap space) at {at(T0)}, no fatal exit yet: a fatal line until "
        f"{at(T0 + 10 * S)} makes it one"
    )
