"""Evidence charts: each detector's alert, driven from events, renders to a valid small PNG."""

from __future__ import annotations

import io
import random
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from matplotlib import image

from detectors import REGISTRY, Alert, AlertStatus, Event, Severity
from detectors.checkpoint_creep import CheckpointCreep, CheckpointCreepParams
from detectors.checkpoint_failures import CheckpointFailures, CheckpointFailuresParams
from detectors.checkpoint_state_growth import CheckpointStateGrowth, CheckpointStateGrowthParams
from detectors.correlation import Correlator, IncidentView
from detectors.idle_heap_growth import HEAP_USED, IdleHeapGrowth, IdleHeapGrowthParams
from detectors.jm_k8s_watch_crash import JmK8sWatchCrash, JmK8sWatchCrashParams
from detectors.job_lost import UPTIME, JobLost, JobLostParams
from detectors.late_barrier_acks import LateBarrierAcks, LateBarrierAcksParams
from detectors.restart_storm import RestartStorm, RestartStormParams
from detectors.testing import drive
from sinks.charts import CHARTS, render
from sinks.charts.frame import safe

S, MIN, MB = 1000, 60_000, 1 << 20
T0 = 1_795_400_000_000  # 2026-11-23 02:13:20 UTC
JOB = "7f3a9c2e5b1d4f6a8c0e2b4d6f8a0c1e"
TM = "container_e08_1795400000000_0042_01_000002"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: The hostile job name: math mode, a bad formula, control characters, a glyph no font has.
HOSTILE = "orders $\\frac{1}{$ <script>\x00\x1b[31m \U0001f525" + "x" * 300


def one(alerts: list[Alert], status: AlertStatus = AlertStatus.FIRING) -> Alert:
    return next(a for a in alerts if a.status is status)


# --- alerts, each from its real detector fed with events --------------------------------------


def creep_alert(name: str = "orders-etl") -> Alert:
    rnd = random.Random(4)
    events, t = [], T0
    for cp in range(1, 81):
        d = int(5 * S * 1.04**cp * rnd.uniform(0.85, 1.15))
        events.append(Event("checkpoint_triggered", t, job_id=JOB, job_name=name, checkpoint_id=cp))
        events.append(
            Event(
                "checkpoint_completed",
                t + d,
                job_id=JOB,
                job_name=name,
                checkpoint_id=cp,
                duration_ms=d,
                size_bytes=(200 + 3 * cp) * MB,
            )
        )
        t = max(t + MIN, t + d + 5)
    return one(drive(CheckpointCreep(CheckpointCreepParams()), events)[1])


def growth_alert(**params: Any) -> Alert:
    rnd = random.Random(7)
    sizes = [240.0] * 130 + [240 + 2.0 * i for i in range(400)]
    events = [
        Event(
            "checkpoint_completed",
            T0 + i * MIN,
            job_id=JOB,
            job_name="sessions",
            checkpoint_id=i + 1,
            size_bytes=int(s * rnd.uniform(0.98, 1.02) * MB),
            duration_ms=4000,
        )
        for i, s in enumerate(sizes)
    ]
    det = CheckpointStateGrowth(CheckpointStateGrowthParams(**params))
    return one(drive(det, events)[1])


def failures_alert() -> Alert:
    def failed(kind: str, cp: int, t: int, reason: str | None = None) -> Event:
        return Event(kind, t, job_id=JOB, job_name="orders-etl", checkpoint_id=cp, reason=reason)

    events = [
        failed("checkpoint_declined", 3, T0, "Checkpoint was declined (tasks not ready)"),
        failed("checkpoint_expired", 4, T0 + 4 * MIN),
        failed("checkpoint_failed", 5, T0 + 9 * MIN, "Asynchronous task checkpoint failed."),
        failed("checkpoint_expired", 6, T0 + 14 * MIN),
        failed("checkpoint_expired", 7, T0 + 20 * MIN),
    ]
    det = CheckpointFailures(CheckpointFailuresParams())
    return one(drive(det, events)[1])


def late_alert(host: str = "worker-7.example.com") -> Alert:
    events = []
    for i, cp in enumerate((41, 42, 44, 45)):
        t = T0 + i * 11 * MIN
        events.append(Event("checkpoint_expired", t, job_id=JOB, checkpoint_id=cp))
        hosts = [host] * 3 + ["worker-3.example.com"] + (["worker-5"] if i % 2 else [])
        for k, h in enumerate(hosts):
            events.append(
                Event(
                    "checkpoint_late_ack",
                    t + k * S + S,
                    job_id=JOB,
                    job_name="orders-etl",
                    checkpoint_id=cp,
                    task=f"Map ({k + 1}/8)",
                    host=h,
                    tm_id=f"tm-{h}",
                )
            )
    return one(drive(LateBarrierAcks(LateBarrierAcksParams()), events)[1])


def idle_heap_alert() -> Alert:
    rnd = random.Random(1)
    events, h = [], 420.0
    for i in range(240):  # an hour, every 15 s: a GC sawtooth on a floor rising 200 MB/h
        t = T0 + i * 15 * S
        floor = 420 + 200 * (t - T0) / 3_600_000
        h = max(h + 15 * rnd.uniform(0.5, 1.5), floor)
        if h - floor > 120:
            h = floor + rnd.uniform(0, 3)
        task = "Source:_kafka_orders/0"
        events += [
            Event("metric", t, tm_id=TM, host="worker-7", metric=HEAP_USED, value=h * MB),
            Event(
                "metric",
                t,
                tm_id=TM,
                job_id=JOB,
                task=task,
                value=123456.0,
                metric="flink_taskmanager_job_task_numRecordsOut",
            ),
            Event(
                "metric",
                t,
                tm_id=TM,
                job_id=JOB,
                task=task,
                value=0.0,
                metric="flink_taskmanager_job_task_numRecordsOutPerSecond",
            ),
        ]
    return one(drive(IdleHeapGrowth(IdleHeapGrowthParams()), events)[1])


def restart_alert() -> Alert:
    def state(t: int, frm: str, to: str, why: str | None = None) -> Event:
        return Event(
            "job_state",
            t,
            job_id=JOB,
            job_name="orders-etl",
            from_state=frm,
            to_state=to,
            message=why,
        )

    beat = (
        f"java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id {TM} timed out."
    )
    ask = "java.util.concurrent.TimeoutException: Ask timed out on [Actor]"
    events = [state(T0, "CREATED", "RUNNING")]
    for t, why in ((T0 + 5 * MIN, beat), (T0 + 9 * MIN, beat), (T0 + 12 * MIN, ask)):
        events += [
            state(t, "RUNNING", "RESTARTING", why),
            state(t + 2 * S, "RESTARTING", "RUNNING"),
        ]
    return one(drive(RestartStorm(RestartStormParams()), events, until=T0 + 60 * MIN)[1])


def job_lost_alert() -> Alert:
    events = [
        Event("job_state", T0, job_id=JOB, job_name="etl", from_state="CREATED", to_state="RUNNING")
    ]
    events += [
        Event("metric", T0 + k * 15 * S, job_id=JOB, metric=UPTIME, value=k * 15e3)
        for k in range(1, 20)
    ]
    events.append(
        Event(
            "jm_heartbeat_timeout",
            T0 + 290 * S,
            job_id=JOB,
            tm_id="tm-1",
            reason="The heartbeat of JobManager with id 1 timed out",
        )
    )
    return one(drive(JobLost(JobLostParams()), events, until=T0 + 3600 * S)[1])


def jm_crash_alert() -> Alert:
    too_old = "KubernetesClientException: too old resource version: 5906722735 (5907278804)"
    job = "7848c696590291978aa8279b3c09e5d7"
    events = [
        Event("job_state", T0 - 3600 * S, job_id=job, from_state="CREATED", to_state="RUNNING"),
        Event(
            "fatal_error",
            T0,
            reason=too_old,
            message=f"Fatal error occurred in ResourceManager.\n{too_old}",
        ),
        Event("jm_started", T0 + 20 * S, reason="KubernetesApplicationClusterEntrypoint"),
        Event("job_restored", T0 + 31 * S, job_id=job, checkpoint_id=43, reason="Checkpoint"),
        Event("job_state", T0 + 32 * S, job_id=job, from_state="CREATED", to_state="RUNNING"),
    ]
    det = JmK8sWatchCrash(JmK8sWatchCrashParams())
    return one(drive(det, events, until=T0 + 3600 * S)[1], AlertStatus.RESOLVED)


BUILDERS: dict[str, Callable[[], Alert]] = {
    "checkpoint_creep": creep_alert,
    "checkpoint_state_growth": lambda: growth_alert(state_backend="heap", state_heap_mb=3057),
    "checkpoint_failures": failures_alert,
    "late_barrier_acks": late_alert,
    "idle_heap_growth": idle_heap_alert,
    "restart_storm": restart_alert,
    "job_lost": job_lost_alert,
    "jm_k8s_watch_crash": jm_crash_alert,
}


def decoded(data: bytes | None) -> Any:
    """The PNG's pixels, after checking it is one of the designed size and weight."""
    assert data is not None
    assert data[:8] == PNG_MAGIC
    assert 5_000 < len(data) < 150_000, len(data)
    pixels = image.imread(io.BytesIO(data), format="png")
    assert pixels.shape[:2] == (360, 720)
    return pixels


# --- every charted detector -------------------------------------------------------------------


def test_every_chart_is_of_a_registered_detector_and_every_one_is_tested_here() -> None:
    assert set(CHARTS) <= set(REGISTRY)
    assert set(BUILDERS) == set(CHARTS)


@pytest.mark.parametrize("detector", sorted(BUILDERS))
def test_an_alert_driven_from_events_renders_a_small_png(detector: str) -> None:
    alert = BUILDERS[detector]()
    assert alert.detector == detector
    pixels = decoded(render(alert))
    # Something is drawn: not one flat colour.
    assert pixels.reshape(-1, pixels.shape[-1]).std(axis=0).max() > 0.05


@pytest.mark.parametrize("detector", sorted(BUILDERS))
def test_a_chart_is_the_same_bytes_each_time(detector: str) -> None:
    alert = BUILDERS[detector]()
    assert render(alert) == render(alert)


def test_evidence_without_a_series_gives_no_chart() -> None:
    alert = creep_alert()
    empty = {
        **alert.evidence,
        "durations_ms": [],
        "sizes_bytes": [],
        "checkpoint_ids": [],
        "times_ms": [],
    }
    assert render(alert.model_copy(update={"evidence": empty})) is None
    # An idle_heap_growth resolve before any verdict carries only why and a hint.
    idle = idle_heap_alert().model_copy(update={"evidence": {"why": "idle", "hint": "h"}})
    assert render(idle) is None
    # Evidence of another shape (another release) is no chart either, not an error.
    assert render(alert.model_copy(update={"evidence": {"durations_ms": "lots"}})) is None


def test_values_no_axis_can_place_give_no_chart_not_an_error(caplog) -> None:
    alert = creep_alert()
    far = alert.model_copy(update={"event_time_ms": 10**15})  # the year 33658
    assert render(far) is None
    assert "cannot be drawn" in caplog.text and alert.alert_id in caplog.text


def test_a_single_point_or_a_flat_series_draws_without_a_warning() -> None:
    alert = creep_alert()
    ev = alert.evidence
    one = {k: ev[k][-1:] for k in ("durations_ms", "sizes_bytes", "checkpoint_ids", "times_ms")}
    flat = {"durations_ms": [0] * 3, "sizes_bytes": [0] * 3, "checkpoint_ids": [1, 2, 3]}
    restarts = restart_alert()
    cases = [
        alert.model_copy(update={"evidence": {**ev, **one, "fit": None}}),
        alert.model_copy(update={"evidence": {**ev, **flat, "times_ms": ev["times_ms"][:3]}}),
        restarts.model_copy(
            update={
                "evidence": {**restarts.evidence, "timeline": restarts.evidence["timeline"][:1]}
            }
        ),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for case in cases:
            decoded(render(case))


def test_detectors_without_a_series_have_no_chart() -> None:
    for name in ("tm_lost", "jvm_fatal"):
        alert = creep_alert().model_copy(update={"detector": name, "evidence": {}})
        assert render(alert) is None


def test_a_creep_without_sizes_or_a_fit_yet_still_draws_its_durations() -> None:
    alert = creep_alert()
    ev = {**alert.evidence, "fit": None, "sizes_bytes": [None] * len(alert.evidence["sizes_bytes"])}
    decoded(render(alert.model_copy(update={"evidence": ev})))


def test_state_growth_without_heap_draws_without_the_heap_line() -> None:
    with_heap = render(growth_alert(state_backend="heap", state_heap_mb=3057))
    without = render(growth_alert())
    decoded(without)
    assert with_heap != without


def test_hostile_text_in_names_and_hosts_renders() -> None:
    decoded(render(creep_alert(name=HOSTILE)))
    decoded(render(late_alert(host=HOSTILE)))
    alert = restart_alert()
    ev = {**alert.evidence, "timeline": [[m[0], HOSTILE, m[2]] for m in alert.evidence["timeline"]]}
    decoded(render(alert.model_copy(update={"evidence": ev, "job_name": HOSTILE})))


def test_safe_text_is_one_drawable_line_without_math() -> None:
    text = safe(HOSTILE, 40)
    assert len(text.replace("\\$", "$")) == 40 and text.endswith("…")
    assert "\x00" not in text and "\x1b" not in text and "\U0001f525" not in text
    assert "\\$\\frac" in text  # every dollar escaped: no math mode
    assert safe("a\nb\tc") == "a b c"


# --- incidents ---------------------------------------------------------------------------------


def incident_of(alerts: Iterable[Alert]) -> IncidentView:
    corr = Correlator()
    views = [corr.observe(a) for a in sorted(alerts, key=lambda a: a.event_time_ms)]
    return views[-1]


def test_an_incident_of_several_members_renders_them_on_one_axis() -> None:
    creep, failures, late = creep_alert(), failures_alert(), late_alert()
    incident = incident_of([creep, failures, late])
    assert len(incident.members) == 3 and incident.joined
    chart = render(late, incident)
    decoded(chart)
    # The incident's chart, not the member's own.
    assert chart != render(late)
    # Resolved members end their lane; the chart changes with them.
    resolved = failures.model_copy(
        update={"status": AlertStatus.RESOLVED, "event_time_ms": failures.event_time_ms + 9 * MIN}
    )
    assert render(resolved, incident_of([creep, failures, late, resolved])) != chart


def test_an_incident_of_one_member_is_the_alerts_own_chart() -> None:
    alert = restart_alert()
    incident = incident_of([alert])
    assert len(incident.members) == 1
    assert render(alert, incident) == render(alert)


def test_an_incident_with_hostile_names_and_many_members_renders() -> None:
    base = creep_alert()
    members = [
        base.model_copy(
            update={
                "alert_id": f"a{i}",
                "detector": sorted(REGISTRY)[i % len(REGISTRY)],
                "job_name": HOSTILE,
                "event_time_ms": base.event_time_ms + i * MIN,
                "severity": list(Severity)[i % 3],
            }
        )
        for i in range(20)
    ]
    incident = incident_of(members)
    assert len(incident.members) == 20
    decoded(render(members[-1], incident))


def test_threads_render_at_once_alike() -> None:
    alerts = [creep_alert(), late_alert(), restart_alert(), idle_heap_alert()]
    want = [render(a) for a in alerts]
    got: dict[int, bytes | None] = {}

    def work(i: int) -> None:
        got[i] = render(alerts[i % len(alerts)])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(8)] == want * 2
