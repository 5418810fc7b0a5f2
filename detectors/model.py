"""The words every floor shares: parsed events, alerts and errors.

This module imports nothing of ours (only the standard library and pydantic), so every
package can import it and none of its arrows points up. The floors, bottom first:
``detectors`` (this module, then the detector contract in ``base.py`` and the detectors),
``conf``, ``sinks``, ``streaming``; ``lab`` and ``bench`` sit on top.

* :class:`Event`: one parsed Flink log line or metric sample (its ``kind`` one of
  :data:`EVENT_KINDS`), as the parser emits it and the detectors read it; the names of
  the Flink metrics more than one detector reads (:data:`LAST_CHECKPOINT_SIZE`, ...).
* :class:`Alert` with :class:`Severity` and :class:`AlertStatus`: what a detector decides,
  as the ledger records it and the sinks deliver it.
* The error hierarchy, one base and subclasses that carry their context:

  * :class:`FlinkwatchError`: every error flinkwatch raises on purpose. Its base lives
    here, on the bottom floor, because the detectors raise one of its kinds.
  * ``conf.errors.ConfigError``: a config that cannot be used; ``path`` and ``fields``
    say where. ``conf.kafka_client.KafkaSettingsError`` (a variable unset, a CA file
    unreadable). A detector's parameters are checked by pydantic (``ValueError`` in a
    validator), which ``conf`` turns into a ``ConfigError`` naming the field.
  * :class:`StateError`: a saved detector state of a newer version or a bad shape
    (``detectors.base.Detector.load``); the runner drops it and closes its incident.
  * ``sinks.base.DeliveryError``: a send that did not happen, with ``Retryable``,
    ``Ambiguous`` and ``Permanent`` kinds the ledger acts on.
  * ``sinks.inbound.metrics_server.MetricsEndpointError``, ``streaming.topics.KafkaConnectError``:
    the endpoint or the broker cannot be used as configured.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

#: Every ``kind`` the parser can emit (the parsed-event contract, README "Input formats").
EVENT_KINDS: tuple[str, ...] = (
    "checkpoint_triggered",
    "checkpoint_completed",
    "checkpoint_expired",
    "checkpoint_late_ack",
    "checkpoint_declined",
    "checkpoint_failed",
    "heartbeat_timeout",
    "jm_heartbeat_timeout",
    "job_released",
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
    "log_warn",
    "log_error",
    "metric",
    "unparsed",
)


#: Flink metric names (``Event.metric``) that more than one detector reads; a name only one
#: detector reads stays in that detector's module.
LAST_CHECKPOINT_DURATION = "flink_jobmanager_job_lastCheckpointDuration"
LAST_CHECKPOINT_SIZE = "flink_jobmanager_job_lastCheckpointSize"


#: Names (job names, TaskManager ids, hosts) are cut to this many characters where they
#: enter (the parsers), and the config's regular expressions (silences, routes, overrides)
#: see them so cut wherever a name comes from. Flink bounds no job name (only operator
#: names in metric scopes, to 80 characters); the longest real ones are SQL statement
#: sets' ``insert-into_<catalog>.<db>.<table>,…`` (about 50 characters a sink): 1024 holds
#: some 20 sinks. A pattern's cost grows with the name's length to the power of its
#: unbounded wildcards: on 1024 characters ``.*-etl-.*-prod`` costs well under a
#: millisecond where a 1 MiB name cost seconds.
NAME_CHARS = 1024
#: The last character of a name cut to :data:`NAME_CHARS`.
CUT_MARK = "…"


def cap_name(name: str | None) -> str | None:
    """``name`` cut to :data:`NAME_CHARS` characters, the last one :data:`CUT_MARK`.

    The parsers' Spark expression cuts the same way, so a name cut there is left as it is.

    Example:
        >>> cap_name("orders")
        'orders'
        >>> n = cap_name("x" * 5000)
        >>> len(n), n[-2:]
        (1024, 'x…')
    """
    if name is None or len(name) <= NAME_CHARS:
        return name
    return name[: NAME_CHARS - 1] + CUT_MARK


class Event(NamedTuple):
    """One parsed Flink log line or metric sample, as the detectors see it.

    Immutable. A named tuple rather than a frozen dataclass: every event of the fleet is
    built once in the detect stage, and a frozen dataclass sets its sixteen fields one
    ``object.__setattr__`` at a time (5 µs an event, measured; 1 µs as a tuple).

    Attributes:
        kind: One of :data:`EVENT_KINDS`.
        time_ms: Event time, epoch milliseconds UTC.
        job_id: Flink job id (32 hex), when the record names one.
        job_name: Flink job name, when known.
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
        message: The log message (truncated), for evidence.
    """

    kind: str
    time_ms: int
    job_id: str | None = None
    job_name: str | None = None
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
    message: str | None = None


class Severity(StrEnum):
    """How urgently a human should look."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """Urgency in order: info 0, warning 1, critical 2."""
        return list(Severity).index(self)


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
    job_id: str | None = None
    job_name: str | None = None
    tm_id: str | None = None
    host: str | None = None
    summary: str
    evidence: dict[str, Any] = Field(default_factory=dict)


class FlinkwatchError(Exception):
    """Base of every error flinkwatch raises on purpose."""


class StateError(FlinkwatchError):
    """A saved detector state that cannot be loaded: a newer version, or a bad shape.

    Attributes:
        detector: The detector whose state it is.
        version: The version the state was written with.
    """

    def __init__(self, message: str, *, detector: str, version: int | None) -> None:
        super().__init__(message)
        self.detector = detector
        self.version = version
