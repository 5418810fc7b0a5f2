"""The detector contract: plain-Python state machines over parsed Flink events.

A detector never touches Spark, the clock or I/O. The Spark adapter
(``streaming/processor.py``) groups events by ``(detector, entity)``, loads the
detector's state, calls :meth:`Detector.on_event` for each event in event-time
order, calls :meth:`Detector.on_timer` when the watermark passes the timer the
detector asked for, and stores whatever state the returned :class:`Step` holds.
The same calls run in unit tests with hand-made events and an advancing
``now_ms``.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

Scope = Literal["job", "tm", "cluster"]

#: Every ``kind`` the parser can emit (the parsed-event contract, README "Input formats").
EVENT_KINDS: tuple[str, ...] = (
    "checkpoint_triggered",
    "checkpoint_completed",
    "checkpoint_expired",
    "checkpoint_late_ack",
    "checkpoint_declined",
    "checkpoint_failed",
    "heartbeat_timeout",
    "container_memory_kill",
    "jvm_oom",
    "fatal_error",
    "k8s_watch_gone",
    "job_state",
    "task_state",
    "leadership_lost",
    "registration_timeout",
    "tm_released",
    "jm_started",
    "job_restored",
    "no_checkpoint_found",
    "metric",
    "unparsed",
)


@dataclass(frozen=True, slots=True)
class Event:
    """One parsed Flink log line or metric sample, as the detectors see it.

    Attributes:
        kind: One of :data:`EVENT_KINDS`.
        time_ms: Event time, epoch milliseconds UTC.
        job_id: Flink job id (32 hex), when the record names one.
        tm_id: TaskManager resource id (YARN container, pod name, ``host:port-xxxxxx``).
        host: Host name, from the record or its shipper.
        task: Task name or execution attempt id.
        checkpoint_id: Checkpoint id for checkpoint events.
        duration_ms: Checkpoint duration for ``checkpoint_completed``.
        size_bytes: Checkpoint size for ``checkpoint_completed``.
        from_state: Previous state for ``job_state``/``task_state``.
        to_state: New state for ``job_state``/``task_state``.
        reason: Failure reason or error kind (e.g. ``Java heap space``).
        metric: Prometheus-style metric name for ``metric`` events.
        value: Metric value for ``metric`` events.
        job_name: Flink job name, when known.
        message: The log message (truncated), for evidence.
    """

    kind: str
    time_ms: int
    job_id: str | None = None
    tm_id: str | None = None
    host: str | None = None
    task: str | None = None
    checkpoint_id: int | None = None
    duration_ms: int | None = None
    size_bytes: int | None = None
    from_state: str | None = None
    to_state: str | None = None
    reason: str | None = None
    metric: str | None = None
    value: float | None = None
    job_name: str | None = None
    message: str | None = None


class Severity(StrEnum):
    """How urgently a human should look."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class AlertStatus(StrEnum):
    """An alert is firing until its condition clears, then resolved once.

    While firing it may be escalated (same ``alert_id``, higher severity), at most once
    per severity.
    """

    FIRING = "firing"
    ESCALATED = "escalated"
    RESOLVED = "resolved"


class Alert(BaseModel):
    """A firing or resolved alert: the typed result of every detector.

    ``alert_id`` is the same for the firing and the resolved transition of one
    incident, so sinks can update one Slack message and dedupe replays by
    ``(alert_id, status)``.

    Example:
        >>> a = Alert(alert_id="ab12", detector="checkpoint_failures", entity="job:7f",
        ...           status=AlertStatus.FIRING, severity=Severity.WARNING,
        ...           event_time_ms=1700000000000, summary="3 checkpoints expired")
        >>> a.status
        <AlertStatus.FIRING: 'firing'>
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    alert_id: str
    detector: str
    entity: str
    status: AlertStatus
    severity: Severity
    event_time_ms: int
    summary: str
    job_id: str | None = None
    job_name: str | None = None
    tm_id: str | None = None
    host: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)


State = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Step:
    """What one detector call decided.

    Attributes:
        state: The state to keep, or ``None`` to drop the entity's state entirely.
        alerts: Transitions to emit (firing or resolved), in order.
        timer_ms: Event time at which :meth:`Detector.on_timer` should run next,
            or ``None`` for no timer. It replaces any earlier timer.
    """

    state: State | None
    alerts: tuple[Alert, ...] = ()
    timer_ms: int | None = None


class DetectorParams(BaseModel):
    """Parameters every detector has; each detector subclasses this with its own."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(default=True, description="Run this detector.")
    severity: Severity = Field(
        default=Severity.WARNING, description="Severity of its alerts: info, warning or critical."
    )
    idle_ttl_s: float = Field(
        default=6 * 3600,
        gt=0,
        description="Drop an entity's state after this long without events (seconds).",
    )
    clear_for_s: float = Field(
        default=300,
        ge=0,
        description=(
            "Hysteresis: a firing alert resolves only after its condition has been false "
            "this long (event-time seconds), so a flapping condition pages once."
        ),
    )


class Lifecycle:
    """Firing/resolved bookkeeping with hysteresis, kept inside a detector's state dict.

    A detector evaluates its condition and calls :meth:`update`; the result is the
    transition to emit, if any. The alert fires the first time the condition holds
    and resolves once it has been false for ``clear_for_s`` without interruption.
    State keys used: ``firing``, ``incident_start_ms``, ``clear_since_ms``.

    Example:
        >>> st = {"firing": False}
        >>> Lifecycle.update(st, True, 1000, clear_for_ms=500)
        'firing'
        >>> Lifecycle.update(st, False, 1200, clear_for_ms=500) is None
        True
        >>> Lifecycle.update(st, False, 1700, clear_for_ms=500)
        'resolved'
    """

    @staticmethod
    def update(st: State, condition: bool, now_ms: int, *, clear_for_ms: int) -> str | None:
        """Advance the lifecycle; returns ``"firing"``, ``"resolved"`` or ``None``."""
        if condition:
            st["clear_since_ms"] = None
            if not st.get("firing"):
                st["firing"] = True
                st["incident_start_ms"] = now_ms
                return "firing"
            return None
        if not st.get("firing"):
            return None
        since = st.get("clear_since_ms")
        if since is None:
            st["clear_since_ms"] = since = now_ms
        if now_ms - int(since) >= clear_for_ms:
            st["firing"] = False
            st["clear_since_ms"] = None
            return "resolved"
        return None

    @staticmethod
    def resolve_deadline(st: State, clear_for_ms: int) -> int | None:
        """When a pending resolve completes if nothing changes (for the detector's timer)."""
        since = st.get("clear_since_ms")
        if st.get("firing") and since is not None:
            return int(since) + clear_for_ms
        return None


P = TypeVar("P", bound=DetectorParams)


class Detector(ABC, Generic[P]):
    """Base class of all detectors.

    Subclasses set the class attributes and implement :meth:`on_event`; most also
    implement :meth:`on_timer` to expire windows and evict idle entities.

    Attributes:
        name: Stable detector name; part of the output contract.
        scope: Which entity the detector keys on.
        kinds: Event kinds routed to it.
        metrics: For ``metric`` events, the metric names routed to it.
        params_model: The pydantic model of its parameters.
        runbook: What the person paged should do first (shown in Slack).
        signals: Gauges the detector exports per entity (see :meth:`signal_values`).
    """

    name: ClassVar[str]
    scope: ClassVar[Scope]
    kinds: ClassVar[frozenset[str]]
    metrics: ClassVar[frozenset[str]] = frozenset()
    params_model: ClassVar[type[DetectorParams]]
    schema_version: ClassVar[int] = 1
    runbook: ClassVar[str] = ""
    #: Gauges for dashboards, per entity: metric name (``flinkwatch_`` is prefixed) → help.
    signals: ClassVar[dict[str, str]] = {}

    def __init__(self, params: P) -> None:
        self.params = params

    @abstractmethod
    def on_event(self, state: State | None, event: Event, now_ms: int) -> Step:
        """Fold one event into the state.

        Args:
            state: The entity's state, ``None`` for an entity seen the first time.
            event: The event, delivered in event-time order within a micro-batch.
            now_ms: The current watermark (event time), never the wall clock.
        """

    def on_timer(self, state: State, now_ms: int) -> Step:
        """Handle the timer asked for in an earlier :class:`Step`; default: evict."""
        return Step(state=None)

    # Helpers shared by detectors -------------------------------------------------

    def expire_idle(self, state: State | None, t: int) -> tuple[State | None, list[Alert]]:
        """What the idle timer would have done before ``t``, had it run.

        Within one micro-batch events arrive before the timers fire; a detector whose
        entity went idle before ``t`` calls this first, so a replay of one long batch
        gives the alerts live timers would. Needs ``last_event_ms`` in the state.
        """
        if state is None:
            return None, []
        idle_at = int(state["last_event_ms"]) + int(self.params.idle_ttl_s * 1000)
        if t < idle_at:
            return state, []
        step = self.on_timer(state, idle_at)
        return step.state, list(step.alerts)

    def signal_values(self, state: State) -> dict[str, float]:
        """The entity's current :attr:`signals` (a missing name means not known yet)."""
        return {}

    def identity(self, event: Event) -> State:
        """The keys every detector state starts with: version, entity, who, lifecycle."""
        return {
            "v": self.schema_version,
            "entity": self.entity_of(event, self.scope),
            "job_id": event.job_id,
            "job_name": event.job_name,
            "tm_id": event.tm_id,
            "host": event.host,
            "firing": False,
            "incident_start_ms": None,
            "clear_since_ms": None,
            "last_event_ms": event.time_ms,
        }

    @staticmethod
    def entity_of(event: Event, scope: Scope) -> str | None:
        """The entity key an event belongs to for a scope, or ``None``."""
        if scope == "job":
            return f"job:{event.job_id}" if event.job_id else None
        if scope == "tm":
            return f"tm:{event.tm_id}" if event.tm_id else None
        return "cluster"

    def resolve(
        self,
        state: State,
        time_ms: int,
        summary: str,
        evidence: dict[str, Any],
        severity: Severity | None = None,
    ) -> Alert:
        """The resolved transition of the open incident; closes it in ``state``.

        The alert carries the incident's ``alert_id`` (it is built before the incident's
        start time is cleared); afterwards the state is ready for a new incident.
        """
        alert = self.alert(
            state=state,
            status=AlertStatus.RESOLVED,
            event_time_ms=time_ms,
            summary=summary,
            evidence=evidence,
            severity=severity,
        )
        state["firing"] = False
        state["incident_start_ms"] = None
        state["clear_since_ms"] = None
        return alert

    def alert(
        self,
        *,
        state: State,
        status: AlertStatus,
        event_time_ms: int,
        summary: str,
        evidence: dict[str, Any],
        severity: Severity | None = None,
    ) -> Alert:
        """Build an alert whose id is stable for one incident of one entity.

        The incident starts when the alert fires; ``state["incident_start_ms"]``
        keeps that time so the resolved transition carries the same id.
        """
        entity = str(state["entity"])
        start = int(state.get("incident_start_ms") or event_time_ms)
        raw = f"{self.name}|{entity}|{start}".encode()
        return Alert(
            alert_id=hashlib.sha1(raw, usedforsecurity=False).hexdigest()[:16],
            detector=self.name,
            entity=entity,
            status=status,
            severity=severity or self.params.severity,
            event_time_ms=event_time_ms,
            summary=summary,
            job_id=state.get("job_id"),
            job_name=state.get("job_name"),
            tm_id=state.get("tm_id"),
            host=state.get("host"),
            evidence=evidence,
        )
