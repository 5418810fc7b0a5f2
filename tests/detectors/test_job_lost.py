"""job_lost as a plain state machine: events in, steps out, time injected.

The timings follow the real Flink 2.3 standalone runs in tests/data/real/ (checkpoints
every 5 s, JobManager gauges scraped every 15 s, TaskManager heartbeat timeout 20 s).
"""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from detectors import REGISTRY, AlertStatus, Event, Severity
from detectors.correlation import Correlator
from detectors.job_lost import (
    NUM_RESTARTS,
    UPTIME,
    JobLost,
    JobLostParams,
)
from detectors.model import EVENT_KINDS, LAST_CHECKPOINT_DURATION
from detectors.testing import DetectorTester, drive, drive_timer
from detectors.words import at

JOB = "016ba2f5c82eb9472e74954d863dbbbb"
NAME = "insert-into_default_catalog.default_database.sink"
S = 1000
T0 = 1_795_408_727_836  # 2026-11-23 04:38:47.836, the job of jm_killed_2_3 RUNNING
JM_ID = "d99689bd2da94c54f6770055e27d3ff1"


def state(t: int, to: str, frm: str = "CREATED", job: str = JOB) -> Event:
    return Event(
        kind="job_state",
        time_ms=t,
        job_id=job,
        job_name=NAME,
        from_state=frm,
        to_state=to,
        host="jm-0",
        message=f"Job {NAME} ({job}) switched from state {frm} to {to}.",
    )


def checkpoint(t: int, cp: int, kind: str = "checkpoint_completed", job: str = JOB) -> Event:
    return Event(kind=kind, time_ms=t, job_id=job, checkpoint_id=cp, host="jm-0")


def gauge(t: int, value: float, metric: str = UPTIME, job: str = JOB) -> Event:
    return Event(kind="metric", time_ms=t, job_id=job, metric=metric, value=value, host="jm-0")


def jm_timeout(t: int, tm: str | None = "tm-1", job: str | None = JOB) -> Event:
    return Event(
        kind="jm_heartbeat_timeout",
        time_ms=t,
        job_id=job,
        tm_id=tm,
        task="Source: src[1] -> Calc[2] (2/2)#0",
        reason=f"The heartbeat of JobManager with id {JM_ID} timed out",
        message="Source: src[1] -> Calc[2] (2/2)#0 (…) switched from RUNNING to FAILED with "
        "failure cause:",
    )


def released(t: int, tm: str | None = "tm-1", job: str = JOB) -> Event:
    return Event(
        kind="job_released",
        time_ms=t,
        job_id=job,
        tm_id=tm,
        message=f"Remove job {job} from job leader monitoring.",
    )


def healthy(start: int, seconds: int, job: str = JOB) -> list[Event]:
    """The job's own telemetry: a checkpoint every 5 s, the two gauges every 15 s."""
    events: list[Event] = []
    for k in range(1, seconds // 5 + 1):
        t = start + k * 5 * S
        events.append(checkpoint(t - 20, k, "checkpoint_triggered", job=job))
        events.append(checkpoint(t, k, job=job))
        if k % 3 == 0:
            events += [gauge(t + 7, t - start, job=job), gauge(t + 7, 0, NUM_RESTARTS, job=job)]
    return events


def running_for(seconds: int) -> list[Event]:
    return [state(T0, "RUNNING"), *healthy(T0, seconds)]


LAST = T0 + 60 * S + 7  # the last gauge of running_for(60)
SINCE = T0 - 41 * 24 * 3600 * S  # RUNNING for 41 days when flinkwatch first reads the job


def running_since(since: int, start: int, seconds: int) -> list[Event]:
    """healthy() from ``start`` on, of a job RUNNING since ``since`` (its line not read)."""
    return [
        gauge(e.time_ms, e.time_ms - since) if e.metric == UPTIME else e
        for e in healthy(start, seconds)
    ]


def test_registered_with_its_contract() -> None:
    assert REGISTRY["job_lost"] is JobLost
    assert JobLost.scope == "job"
    assert JobLost.kinds <= set(EVENT_KINDS)
    assert JobLost.metrics == {UPTIME, NUM_RESTARTS, LAST_CHECKPOINT_DURATION}
    assert JobLostParams().severity is Severity.CRITICAL


def test_a_taskmanager_reporting_the_jobmanager_lost_pages_once_after_confirm_s() -> None:
    det = JobLost(JobLostParams())
    # jm_killed_2_3: killed 60 s after RUNNING, the TaskManager's timeout 20 s later; its
    # four tasks fail with the same cause, the slots time out 10 s after.
    reports = [jm_timeout(LAST + 20 * S + k) for k in range(4)]
    events = [*running_for(60), *reports, released(LAST + 30 * S)]
    _, alerts = drive(det, events, until=LAST + 900 * S)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, LAST + 50 * S)  # the report + confirm_s
    ]
    a = alerts[0]
    assert a.severity is Severity.CRITICAL
    assert a.job_id == JOB and a.job_name == NAME and a.entity == f"job:{JOB}"
    assert a.summary == (
        f"job {NAME} lost: TaskManager tm-1 lost its JobManager (The heartbeat of JobManager "
        f"with id {JM_ID} timed out); nothing from it for 50 s (last: metric {NUM_RESTARTS} = 0), "
        "last state RUNNING"
    )
    ev = a.evidence
    assert ev["why"] == "jm_lost"
    assert ev["last_state"] == "RUNNING" and ev["last_state_ms"] == T0
    assert ev["last_seen_ms"] == LAST and ev["silent_s"] == 50.0
    assert ev["reported_ms"] == LAST + 20 * S and ev["reported_by"] == ["tm-1"]
    assert "job_ids" not in ev and "tm_ids" not in ev


def test_a_cluster_that_stops_altogether_pages_at_the_silence_deadline() -> None:
    det = JobLost(JobLostParams(silence_s=180))
    st, timer, alerts = drive_timer(det, running_for(60))
    assert alerts == [] and timer == LAST + 180 * S  # the deadline the adapter registers
    _, alerts = drive(det, [], state=st, timer=timer, until=LAST + 3600 * S)
    assert [(a.status, a.event_time_ms) for a in alerts] == [(AlertStatus.FIRING, LAST + 180 * S)]
    assert alerts[0].evidence["why"] == "silence"
    assert "its JobManager went silent with no end state" in alerts[0].summary
    assert "nothing from it for 180 s" in alerts[0].summary


@pytest.mark.parametrize("end", ["CANCELED", "FINISHED", "FAILED"])
def test_a_job_that_ends_is_not_lost(end: str) -> None:
    # job_cancelled_2_3: CANCELLING, CANCELED, then the TaskManager lets go of the job.
    det = JobLost(JobLostParams())
    end_at = LAST + 2 * S
    events = [
        *running_for(60),
        state(end_at, "CANCELLING" if end == "CANCELED" else "RUNNING", frm="RUNNING"),
        state(end_at + 167, end, frm="CANCELLING" if end == "CANCELED" else "RUNNING"),
        released(end_at + 282),
    ]
    st, alerts = drive(det, events, until=end_at + 7200 * S)
    assert alerts == [] and st is None


def test_the_taskmanager_release_just_before_the_end_state_is_not_a_loss() -> None:
    # Hosts' clocks differ: the TaskManager's line may carry a time before the JobManager's.
    det = JobLost(JobLostParams())
    events = [*running_for(60), released(LAST + 1 * S), state(LAST + 1 * S + 80, "CANCELED")]
    _, alerts = drive(det, events, until=LAST + 7200 * S)
    assert alerts == []


def test_metrics_that_pause_shorter_than_silence_s_do_not_page() -> None:
    det = JobLost(JobLostParams(silence_s=180))
    events = [*running_for(60), *healthy(LAST + 170 * S, 60)]
    _, alerts = drive(det, events, until=LAST + 170 * S + 65 * S)
    assert alerts == []


@pytest.mark.parametrize("watched_from", ["running_line", "uptime_gauge"])
def test_a_job_restarting_normally_is_not_lost(watched_from: str) -> None:
    # Its uptime reads 0 while it restarts: a restart, not a page, however the watch began.
    det = JobLost(JobLostParams())
    back = LAST + 12 * S
    start = running_for(60) if watched_from == "running_line" else running_since(SINCE, T0, 60)
    events = [
        *start,
        state(LAST + 1 * S, "RESTARTING", frm="RUNNING"),
        gauge(LAST + 8 * S, 0),
        state(back, "RUNNING", frm="RESTARTING"),
        *healthy(back, 120),
    ]
    st, alerts = drive(det, events, until=back + 121 * S)
    assert alerts == [] and st.running_ms == back


def test_a_jobmanager_that_answers_again_after_a_taskmanager_timeout_is_not_lost() -> None:
    # A network blip between one TaskManager and the JobManager: the job restarts, the
    # JobManager's own records go on.
    det = JobLost(JobLostParams())
    events = [*running_for(60), jm_timeout(LAST + 1 * S), *healthy(LAST, 120)]
    _, alerts = drive(det, events, until=LAST + 121 * S)
    assert alerts == []


def test_a_taskmanager_released_while_the_job_runs_on_elsewhere_is_not_lost() -> None:
    det = JobLost(JobLostParams())
    events = [*running_for(60), released(LAST + 1 * S, tm="tm-2"), *healthy(LAST, 120)]
    st, alerts = drive(det, events, until=LAST + 121 * S)
    assert alerts == []
    assert st.report is None and st.reporters == []


def test_a_release_without_the_job_showing_itself_pages_within_its_rhythm() -> None:
    det = JobLost(JobLostParams(confirm_s=30))
    events = [*running_for(60), released(LAST + 30 * S, tm="tm-2")]
    _, alerts = drive(det, events, until=LAST + 900 * S)
    assert [(a.status, a.event_time_ms) for a in alerts] == [(AlertStatus.FIRING, LAST + 60 * S)]
    assert alerts[0].evidence["why"] == "released"
    assert alerts[0].evidence["reported_by"] == ["tm-2"]
    assert "TaskManager tm-2 released it and the job went silent" in alerts[0].summary


def test_a_job_never_seen_running_is_not_watched() -> None:
    det = JobLost(JobLostParams())
    events = [
        state(T0, "CREATED", frm="INITIALIZING"),
        gauge(T0 + 15 * S, 0),
        jm_timeout(T0 + 60 * S),
        released(T0 + 70 * S),
    ]
    st, alerts = drive(det, events, until=T0 + 7200 * S)
    assert alerts == []
    # Its records are kept (they count if RUNNING comes later), but nothing is due.
    assert st is not None and det.next_deadline(st) is None
    assert DetectorTester(det, state=st).standing().startswith("not watched")


def test_records_read_before_the_running_line_still_count_as_the_job_s_latest() -> None:
    # The metric topic read a batch ahead of the log topic (tests/data/real/
    # cluster_stopped_2_3 replayed): the gauges of 04:43:19.918 arrive before the job's
    # RUNNING line and its checkpoints up to 04:43:17.656. The silence counts from the
    # gauges, as if everything had come in event-time order.
    det = JobLost(JobLostParams(silence_s=30))
    last_log = T0 + 60 * S
    logs = [
        state(T0, "RUNNING"),
        *[checkpoint(T0 + k * 5 * S, k, "checkpoint_triggered") for k in range(1, 13)],
    ]
    gauges = [gauge(T0 + k * 15 * S, k * 15 * S) for k in range(1, 6)]
    st, alerts = drive(det, gauges, until=T0)
    assert alerts == []
    st, alerts = drive(det, logs, state=st, until=last_log + 3600 * S)
    (fired,) = alerts
    assert fired.evidence["last_seen_ms"] == T0 + 75 * S  # the last gauge, not the checkpoint
    assert fired.event_time_ms == T0 + 75 * S + 30 * S


def test_a_job_without_periodic_telemetry_pages_only_on_a_taskmanager_report() -> None:
    det = JobLost(JobLostParams())
    st, alerts = drive(det, [state(T0, "RUNNING")], until=T0 + 3 * 3600 * S)
    assert alerts == [] and st is not None  # nothing periodic: its silence says nothing
    _, alerts = drive(det, [jm_timeout(T0 + 3 * 3600 * S + 1)], state=st, until=T0 + 4 * 3600 * S)
    assert [a.event_time_ms for a in alerts] == [T0 + 3 * 3600 * S + 1 + 30 * S]


@pytest.mark.parametrize(("max_silence_s", "deadline_s"), [(1800, 1800), (1200, 1200)])
def test_sparse_telemetry_sets_a_longer_deadline_up_to_max_silence_s(
    max_silence_s: float, deadline_s: float
) -> None:
    # No metrics shipped and a checkpoint every 10 min: its own rhythm is no silence. Its
    # period is 600 s: 3 x that, or max_silence_s.
    det = JobLost(JobLostParams(silence_s=180, max_silence_s=max_silence_s))
    events = [state(T0, "RUNNING")]
    for k in range(1, 7):
        events += [checkpoint(T0 + k * 600 * S, k, "checkpoint_triggered")]
        events += [checkpoint(T0 + k * 600 * S + 300, k)]
    last = T0 + 6 * 600 * S + 300
    st, timer, alerts = drive_timer(det, events, until=last)
    assert alerts == [] and timer == last + int(deadline_s * S)
    _, alerts = drive(det, [], state=st, timer=timer, until=last + 7200 * S)
    assert [a.event_time_ms for a in alerts] == [timer]
    assert alerts[0].evidence["silence_s"] == deadline_s


def test_it_resolves_when_a_standby_brings_the_job_back_running() -> None:
    det = JobLost(JobLostParams(clear_for_s=60))
    fired_at = LAST + 50 * S
    back = LAST + 90 * S
    events = [
        *running_for(60),
        jm_timeout(LAST + 20 * S),
        state(back - 2 * S, "CREATED", frm="INITIALIZING"),
        state(back, "RUNNING"),
        *healthy(back, 90),
    ]
    _, alerts = drive(det, events)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, fired_at),
        (AlertStatus.RESOLVED, back + 60 * S),
    ]
    assert alerts[0].alert_id == alerts[1].alert_id
    assert alerts[1].summary == f"job {NAME}: the job is RUNNING and reporting again"


def test_a_job_that_comes_back_restarting_is_not_back_yet() -> None:
    det = JobLost(JobLostParams(clear_for_s=0))
    events = [
        *running_for(60),
        jm_timeout(LAST + 20 * S),
        state(LAST + 90 * S, "RESTARTING", frm="RUNNING"),
        gauge(LAST + 95 * S, 0),
    ]
    _, alerts = drive(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]
    _, alerts = drive(det, [*events, state(LAST + 99 * S, "RUNNING", frm="RESTARTING")])
    assert [a.status for a in alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]


def test_an_end_state_after_the_page_resolves_it_and_forgets_the_job() -> None:
    det = JobLost(JobLostParams())
    events = [*running_for(60), jm_timeout(LAST + 20 * S), state(LAST + 300 * S, "FAILED")]
    st, alerts = drive(det, events)
    assert [a.status for a in alerts] == [AlertStatus.FIRING, AlertStatus.RESOLVED]
    assert alerts[1].summary == f"job {NAME}: the job ended (FAILED)"
    assert st is None


def test_the_jobmanager_gauge_saying_no_longer_running_ends_the_watch_quietly() -> None:
    det = JobLost(JobLostParams())
    st, alerts = drive(det, [*running_for(60), gauge(LAST + 15 * S, -1)], until=LAST + 7200 * S)
    assert alerts == [] and st is None


def test_one_page_per_incident_however_many_reports_and_silences_follow() -> None:
    det = JobLost(JobLostParams())
    reports = [jm_timeout(LAST + k * 20 * S, tm=f"tm-{k % 7}") for k in range(1, 40)]
    _, alerts = drive(det, [*running_for(60), *reports], until=LAST + 3600 * S)
    assert [a.status for a in alerts] == [AlertStatus.FIRING]


def test_an_idle_lost_job_closes_with_the_idle_ttl() -> None:
    det = JobLost(JobLostParams(idle_ttl_s=3600))
    events = [*running_for(60), jm_timeout(LAST + 20 * S)]
    st, alerts = drive(det, events, until=LAST + 2 * 3600 * S)
    assert [(a.status, a.event_time_ms) for a in alerts] == [
        (AlertStatus.FIRING, LAST + 50 * S),
        (AlertStatus.RESOLVED, LAST + 20 * S + 3600 * S),
    ]
    assert alerts[1].summary.endswith("no events about this job any more")
    assert st is None


def test_a_new_run_of_the_same_job_id_is_watched_afresh() -> None:
    det = JobLost(JobLostParams())
    later = LAST + 3600 * S
    events = [*running_for(60), state(LAST + 1 * S, "CANCELED", frm="CANCELLING")]
    events += [state(later, "RUNNING"), *healthy(later, 30)]
    st, alerts = drive(det, events, until=later + 31 * S)
    assert alerts == [] and st is not None and st.running_ms == later
    periods = [max(s.intervals) for s in st.series.values() if s.intervals]
    assert periods and max(periods) <= 15 * S  # the old run's silence is not its rhythm


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"silence_s": 600, "max_silence_s": 300}, "max_silence_s"),
        ({"max_silence_s": 7200, "idle_ttl_s": 3600}, "idle_ttl_s"),
    ],
    ids=["silence_above_max", "max_above_idle_ttl"],
)
def test_deadlines_that_the_idle_ttl_would_swallow_are_rejected(params: dict, field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        JobLostParams(**params)


def test_state_stays_small_and_bounded() -> None:
    det = JobLost(JobLostParams(max_reporters=5))
    last = T0 + 600 * S + 7
    reports = [jm_timeout(last + 20 * S + k, tm=f"tm-{k:04d}-" + "x" * 40) for k in range(50)]
    st, _ = drive(det, [*running_for(600), *reports])
    assert len(st.reporters) == 5 and len(st.series) <= 4
    assert all(len(s.intervals) <= 4 for s in st.series.values())
    assert len(json.dumps(det.dump(st))) < 2048


def test_the_signal_says_lost_while_the_incident_is_open() -> None:
    det = JobLost(JobLostParams(clear_for_s=0))
    st, _ = drive(det, running_for(60))
    assert det.signal_values(st) == {"job_lost": 0.0}
    st, _ = drive(det, [jm_timeout(LAST + 20 * S)], state=st, until=LAST + 60 * S)
    assert det.signal_values(st) == {"job_lost": 1.0}
    st, _ = drive(det, [state(LAST + 90 * S, "RUNNING")], state=st)
    assert det.signal_values(st) == {"job_lost": 0.0}


def test_the_job_is_named_as_flink_names_it_not_as_the_metric_label() -> None:
    det = JobLost(JobLostParams())
    label = NAME.replace(".", "_")  # the reporter filters label values
    events = [
        state(T0, "RUNNING"),
        Event("metric", T0 + 15 * S, job_id=JOB, job_name=label, metric=UPTIME, value=15_000),
    ]
    st, _ = drive(det, events)
    assert st.job_name == NAME


def test_the_incident_headline_is_the_page_itself() -> None:
    det = JobLost(JobLostParams())
    _, alerts = drive(det, [*running_for(60), jm_timeout(LAST + 20 * S)], until=LAST + 60 * S)
    view = Correlator().observe(alerts[0])
    assert view.headline == alerts[0].summary


def test_a_standby_taking_the_job_over_within_confirm_s_pages_nothing() -> None:
    det = JobLost(JobLostParams(confirm_s=30))
    back = LAST + 35 * S
    events = [
        *running_for(60),
        jm_timeout(LAST + 20 * S),
        state(back - 1 * S, "CREATED", frm="INITIALIZING"),
        state(back, "RUNNING"),
        *healthy(back, 120),
    ]
    _, alerts = drive(det, events, until=back + 121 * S)
    assert alerts == []


def test_a_late_record_from_before_the_report_does_not_clear_it() -> None:
    # Another host's record, shipped late: older than the TaskManager's report, it says
    # nothing about the JobManager after it.
    det = JobLost(JobLostParams())
    events = [*running_for(60), jm_timeout(LAST + 20 * S), checkpoint(LAST + 2 * S, 13)]
    _, alerts = drive(det, events, until=LAST + 600 * S)
    assert [a.event_time_ms for a in alerts] == [LAST + 50 * S]
    assert alerts[0].evidence["last_seen"] == "checkpoint 13 completed"


def test_the_last_checkpoint_duration_gauge_is_a_heartbeat_too() -> None:
    # A job that never completed a checkpoint still has its gauge exported (-1).
    det = JobLost(JobLostParams())
    gauges = [gauge(T0 + k * 15 * S, -1, LAST_CHECKPOINT_DURATION) for k in range(1, 41)]
    last = gauges[-1].time_ms
    _, alerts = drive(det, [state(T0, "RUNNING"), *gauges], until=last + 3600 * S)
    assert [a.event_time_ms - last for a in alerts] == [180 * S]


def test_a_watch_that_starts_at_a_restart_waits_for_the_jobs_period() -> None:
    # The log starts mid-life (tests/data/incidents/seed_001): the first RUNNING line seen
    # is a restart's, a restore 41 ms after it, and the next record comes with the next
    # failover 5 min later (checkpoints every 3 min, no JobManager gauges shipped). A few
    # ms between two one-off lines are no period.
    det = JobLost(JobLostParams())
    events = [
        state(T0, "RUNNING", frm="RESTARTING"),
        Event("job_restored", T0 + 41, job_id=JOB, checkpoint_id=55),
        state(T0 + 300 * S + 85, "RESTARTING", frm="RUNNING"),
        state(T0 + 310 * S + 90, "RUNNING", frm="RESTARTING"),
    ]
    _, alerts = drive(det, events, until=T0 + 312 * S)
    assert alerts == []


def test_the_liveliest_series_sets_the_rhythm_not_the_slowest() -> None:
    # Checkpoints every 10 min and gauges every 15 s: a JobManager that is alive keeps its
    # gauges going, so a silence of silence_s is one, however slow the checkpoints.
    det = JobLost(JobLostParams(silence_s=180))
    events = [state(T0, "RUNNING")]
    for k in range(1, 81):
        events.append(gauge(T0 + k * 15 * S, k * 15_000))
        if k % 40 == 0:
            events.append(checkpoint(T0 + k * 15 * S + 3, k // 40, "checkpoint_triggered"))
    last = T0 + 80 * 15 * S + 3
    st, timer, _ = drive_timer(det, sorted(events, key=lambda e: e.time_ms))
    assert timer == last + 180 * S


def test_a_series_that_stopped_while_the_others_go_on_no_longer_sets_the_rhythm() -> None:
    # The gauges stop being shipped; checkpoints every 10 min go on. The first silence
    # cannot be told from a lost JobManager and pages; the next checkpoint resolves it, and
    # from then on the checkpoints set the rhythm.
    det = JobLost(JobLostParams(silence_s=180, max_silence_s=3600, clear_for_s=0))
    events = [state(T0, "RUNNING")]
    events += [gauge(T0 + k * 15 * S, k * 15_000) for k in range(1, 88)]  # until 1305 s
    events += [checkpoint(T0 + k * 600 * S, k, "checkpoint_triggered") for k in range(1, 6)]
    st, timer, alerts = drive_timer(det, sorted(events, key=lambda e: e.time_ms))
    assert [(a.status.value, a.event_time_ms - T0) for a in alerts] == [
        ("firing", 1305 * S + 180 * S),
        ("resolved", 1800 * S),
    ]
    assert timer == T0 + 3000 * S + 1800 * S  # 3 x 600 s after the last checkpoint


# --- a job already running when flinkwatch first reads it --------------------------------


def test_a_job_first_read_running_is_watched_from_its_uptime_and_pages_on_silence() -> None:
    # A new install: the job switched to RUNNING 41 days ago, its line is long gone.
    det = JobLost(JobLostParams(silence_s=180))
    st, timer, alerts = drive_timer(det, running_since(SINCE, T0, 60))
    assert alerts == [] and timer == LAST + 180 * S
    assert st.running_ms == SINCE and (st.status, st.status_ms) == ("RUNNING", SINCE)
    _, alerts = drive(det, [], state=st, timer=timer, until=LAST + 3600 * S)
    (fired,) = alerts
    assert fired.event_time_ms == LAST + 180 * S
    ev = fired.evidence
    assert ev["why"] == "silence" and ev["last_seen_ms"] == LAST
    assert (ev["last_state"], ev["last_state_ms"]) == ("RUNNING", SINCE)  # the job's own since
    assert fired.summary.endswith("last state RUNNING")


def test_a_watch_from_the_uptime_gauge_still_waits_for_the_jobs_rhythm() -> None:
    # One sample and one checkpoint: watched, but one sample shows no period yet.
    det = JobLost(JobLostParams())
    events = [checkpoint(T0, 9), gauge(T0 + 7, T0 + 7 - SINCE)]
    st, alerts = drive(det, events, until=T0 + 3 * 3600 * S)
    assert alerts == [] and st.running_ms == SINCE and det.next_deadline(st) is None
    assert DetectorTester(det, state=st).standing() == (
        f"RUNNING since {at(SINCE)}; last record {at(T0 + 7)} (metric {UPTIME} = "
        f"{T0 + 7 - SINCE:g}); no periodic telemetry yet: its silence cannot be told"
    )


def test_a_running_line_sets_the_watch_not_the_gauge() -> None:
    det = JobLost(JobLostParams())
    st, _ = drive(det, running_for(60))
    assert st.running_ms == T0 and st.status_ms == T0  # the gauges say T0 + 7: the line wins


@pytest.mark.parametrize("value", [0, -1])
def test_a_job_whose_uptime_reads_0_or_minus_1_is_not_watched(value: float) -> None:
    # A job first read in a restart loop (0: restarting) or that ended (-1): restores are
    # logged, the gauges scraped every 15 s, and then it goes quiet for good.
    det = JobLost(JobLostParams())
    events: list[Event] = []
    for k in range(1, 41):
        t = T0 + k * 15 * S
        events += [gauge(t, value), gauge(t, k, NUM_RESTARTS)]
        events.append(Event("job_restored", t + 2 * S, job_id=JOB, checkpoint_id=55))
    st, alerts = drive(det, events, until=T0 + 3 * 3600 * S)
    assert alerts == [] and st.running_ms is None and det.next_deadline(st) is None


def test_gauges_without_the_jobmanager_log_start_no_watch() -> None:
    # Only the log tells a job's end: job_cancelled_2_3's gauges are just gone after the
    # cancel. A job known from its gauges alone would page at every cancel.
    det = JobLost(JobLostParams())
    gauges = [g for g in running_since(SINCE, T0, 60) if g.kind == "metric"]
    st, alerts = drive(det, gauges, until=LAST + 3600 * S)
    assert alerts == [] and st is not None and det.next_deadline(st) is None
    assert DetectorTester(det, state=st).standing() == (
        f"not watched: its uptime gauge says RUNNING since {at(SINCE)}, but no line of its "
        "JobManager's log was read (only the log tells its end)"
    )
    # One checkpoint line of the job shows its log is read: the watch starts.
    st, _ = drive(det, [checkpoint(LAST + 3 * S, 13, "checkpoint_triggered")], state=st)
    assert st.running_ms == SINCE


def test_gauges_read_ahead_of_the_log_start_the_watch_once_the_log_comes() -> None:
    # The metric topic read a batch ahead: the gauges first, then the checkpoint lines;
    # the silence counts from the latest record of either.
    det = JobLost(JobLostParams(silence_s=180))
    records = running_since(SINCE, T0, 60)
    gauges = [e for e in records if e.kind == "metric"]
    logs = [e for e in records if e.kind != "metric"]
    st, alerts = drive(det, gauges)
    assert alerts == [] and st.running_ms is None
    _, alerts = drive(det, logs, state=st, until=LAST + 3600 * S)
    assert [a.event_time_ms for a in alerts] == [LAST + 180 * S]
    assert alerts[0].evidence["last_state_ms"] == SINCE


@pytest.mark.parametrize("end", ["CANCELED", "FINISHED", "FAILED"])
def test_a_job_watched_from_its_uptime_that_ends_is_not_lost(end: str) -> None:
    det = JobLost(JobLostParams())
    end_at = LAST + 2 * S
    via = "CANCELLING" if end == "CANCELED" else "RUNNING"
    events = [
        *running_since(SINCE, T0, 60),
        state(end_at, via, frm="RUNNING"),
        state(end_at + 150, end, frm=via),
        released(end_at + 290),
    ]
    st, alerts = drive(det, events, until=end_at + 7200 * S)
    assert alerts == [] and st is None


def test_gauges_read_after_the_job_ended_start_no_watch() -> None:
    # The log topic read a batch ahead: job_cancelled_2_3's end as logged (the execution
    # graph's lines, then the application's), and only then the gauges scraped before it.
    det = JobLost(JobLostParams())
    records = running_since(SINCE, T0, 60)
    end_at = LAST + 2 * S
    logs = [e for e in records if e.kind != "metric"] + [
        state(end_at, "CANCELLING", frm="RUNNING"),
        state(end_at + 150, "CANCELED", frm="CANCELLING"),
        state(end_at + 151, "CANCELING", frm="RUNNING"),
        state(end_at + 151, "CANCELED", frm="CANCELING"),
    ]
    st, alerts = drive(det, logs)
    assert alerts == [] and st is None
    gauges = [e for e in records if e.kind == "metric"]
    st, alerts = drive(det, gauges, state=st, until=end_at + 7200 * S)
    assert alerts == [] and st.running_ms is None and det.next_deadline(st) is None


def test_a_sample_older_than_a_restarting_line_does_not_start_the_watch() -> None:
    # First read mid-restart: the RESTARTING line, then (the metric topic behind) samples
    # scraped before it. Only a sample of the next run, RUNNING since after the line, starts
    # the watch, before that run's RUNNING line is read.
    det = JobLost(JobLostParams())
    restart, back = T0, T0 + 10 * S
    late = [gauge(restart - k * 15 * S, restart - k * 15 * S - SINCE) for k in (2, 1)]
    st, alerts = drive(det, [state(restart, "RESTARTING", frm="RUNNING"), *late])
    assert alerts == [] and st.running_ms is None
    assert DetectorTester(det, state=st).standing() == (
        f"not watched: RESTARTING since {at(restart)}, no switch to RUNNING seen after it"
    )
    st, _ = drive(det, [gauge(restart + 5 * S, 0), gauge(back + 5 * S, 5000)], state=st)
    assert st.running_ms == back and (st.status, st.status_ms) == ("RUNNING", back)


def test_a_gauge_that_read_0_since_it_said_running_starts_no_watch() -> None:
    # The gauge said RUNNING, then 0 (restarting); the log's first line comes after that.
    det = JobLost(JobLostParams())
    events = [
        gauge(T0, T0 - SINCE),
        gauge(T0 + 15 * S, 0),
        Event("job_restored", T0 + 16 * S, job_id=JOB, checkpoint_id=55),
    ]
    st, _ = drive(det, events)
    assert st.running_ms is None and st.logged


def test_a_state_saved_before_the_uptime_fields_still_loads() -> None:
    det = JobLost(JobLostParams())
    st, _ = drive(det, running_for(60))
    saved = json.loads(det.dump_json(st))
    del saved["up_since_ms"], saved["logged"]
    back = JobLost.load_json(json.dumps(saved))
    assert back.up_since_ms is None and back.logged is False
    assert back.running_ms == T0 and det.next_deadline(back) == det.next_deadline(st)


# --- standing ----------------------------------------------------------------------------


def test_standing_tells_the_deadline_the_report_and_the_way_back() -> None:
    tester = DetectorTester(JobLost(JobLostParams()))
    assert tester.standing() == (
        "not watched: no switch to RUNNING seen for this job, nor an uptime gauge above 0 "
        "(or it ended)"
    )
    tester.feed(state(T0, "RUNNING"))
    # RUNNING, but no rhythm shown yet: silence cannot be told.
    assert tester.standing() == (
        f"RUNNING since {at(T0)}; last record {at(T0)} (job state CREATED -> RUNNING); "
        "no periodic telemetry yet: its silence cannot be told"
    )
    tester.feed(*healthy(T0, 60))
    assert tester.standing() == (
        f"RUNNING since {at(T0)}; last record {at(LAST)} (metric {NUM_RESTARTS} = 0); "
        f"pages at {at(LAST + 180 * S)} if nothing comes"
    )
    # A TaskManager lost the JobManager: the page comes confirm_s later unless the job shows.
    tester.feed(jm_timeout(LAST + 20 * S))
    assert tester.standing() == (
        f"RUNNING since {at(T0)}; last record {at(LAST)}; TaskManager tm-1 lost its JobManager "
        f"at {at(LAST + 20 * S)}; pages at {at(LAST + 50 * S)} if nothing comes"
    )
    tester.advance_to(LAST + 50 * S)
    assert tester.standing() == (
        f"FIRING since {at(LAST + 50 * S)}: JobManager reported lost; last record "
        f"{at(LAST)} (metric {NUM_RESTARTS} = 0), state RUNNING; resolves after 60 s back in RUNNING"
    )
    # A standby brings it back: the resolve is under way.
    tester.feed(state(LAST + 60 * S, "RUNNING", frm="CREATED"))
    assert tester.standing().endswith(f"back since {at(LAST + 60 * S)}, resolves after 60 s")
