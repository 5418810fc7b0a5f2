"""Alerts for the evidence charts' tests, each driven from events through its real detector."""

from __future__ import annotations

import io
import random
from collections.abc import Callable, Iterable
from typing import Any

from matplotlib import image

from detectors import Alert, AlertStatus, Event
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


def incident_of(alerts: Iterable[Alert]) -> IncidentView:
    corr = Correlator()
    views = [corr.observe(a) for a in sorted(alerts, key=lambda a: a.event_time_ms)]
    return views[-1]
