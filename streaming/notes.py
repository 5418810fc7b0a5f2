"""What the runner tells besides alerts: signals, failures, refusals, entity counts.

The runner (:mod:`streaming.runner`) returns its results as values: each an
:class:`~detectors.model.Alert` or one of the notes here, in the order they happened
(:data:`Output`). The Spark shell turns them into rows of the detect query's one schema
(:mod:`streaming.rows`, the only module of the two that needs Spark), and the driver reads
each row back into the same value. Without Spark, so the runner stays testable and typed
as strictly as the detectors.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from detectors import Alert, Detector
from detectors.base import DetectorState


class RowKind(StrEnum):
    """What a row of the detect query holds."""

    ALERT = "alert"
    #: The entity's current signals of one detector (for the dashboards' gauges).
    SIGNAL = "signal"
    #: The entity's signals of one detector are gone: its state was dropped.
    SIGNAL_GONE = "signal_gone"
    #: A detector (or the runner reading its input or state) raised for an entity.
    DETECTOR_ERROR = "detector_error"
    #: An entity seen the first time was not admitted: the query holds
    #: ``spark.max_entities`` already.
    ENTITY_REFUSED = "entity_refused"
    #: How many entities a shard holds after its turn: what the entity cap counts. The
    #: state store's rows are no measure of it: a shard keeps its entities in one value.
    ENTITY_COUNT = "entity_count"
    #: A keyed source's line, named by what the source said of itself, for the driver to
    #: put on the bus for the entity it is about (:mod:`streaming.forwards`).
    FORWARD = "forward"


@dataclass(frozen=True, slots=True)
class About:
    """Whom a note is about: a detector's view of one entity.

    Attributes:
        detector: The detector (``state`` or the bus reader for the runner's own errors;
            empty for a shard's count).
        entity: ``job:<id>``, ``tm:<id>``, ``cluster`` or ``shard:<n>``.
        event_ms: The entity's newest event time (0 when unknown): how far detection got.
        job_id: The job, when the entity has one.
        job_name: The job's name, when known.
        tm_id: The TaskManager, for TaskManager entities.
        host: The host, when known.
    """

    detector: str
    entity: str
    event_ms: int = 0
    job_id: str | None = None
    job_name: str | None = None
    tm_id: str | None = None
    host: str | None = None

    @classmethod
    def of(cls, detector: str, entity: str, state: DetectorState | None) -> About:
        """Who the entity is, from the detector's state (when it has one)."""
        if state is None:
            return cls(detector, entity)
        return cls(
            detector,
            entity,
            state.last_event_ms,
            state.job_id,
            state.job_name,
            state.tm_id,
            state.host,
        )

    def labels(self) -> dict[str, str]:
        """The entity's labels that are known (job id and name, TaskManager, host)."""
        pairs = (("job_id", self.job_id), ("job_name", self.job_name), ("tm_id", self.tm_id))
        return {k: v for k, v in (*pairs, ("host", self.host)) if v}


@dataclass(frozen=True, slots=True)
class Signal:
    """The entity's current signals of one detector (``values``: name → number)."""

    kind: ClassVar[RowKind] = RowKind.SIGNAL
    about: About
    values: dict[str, Any]

    def data(self) -> Any:  # noqa: D102
        return self.values


@dataclass(frozen=True, slots=True)
class _Bare:
    """A note that says no more than whom it is about."""

    about: About

    def data(self) -> Any:  # noqa: D102
        return None


@dataclass(frozen=True, slots=True)
class SignalGone(_Bare):
    """The entity's signals of one detector are gone."""

    kind: ClassVar[RowKind] = RowKind.SIGNAL_GONE


@dataclass(frozen=True, slots=True)
class DetectorFailure:
    """A detector raised for an entity; the driver logs and counts it (executors cannot).

    Attributes:
        about: The detector and entity.
        error: ``Type: message at file:line`` of the innermost frame.
        where: The call that raised: ``on_event``, ``on_timer``, ``load``, ``unpack``,
            ``decode``, ...
        failures: Calls in a row that raised.
        dropped: The entity was given up (its incident resolved).
    """

    kind: ClassVar[RowKind] = RowKind.DETECTOR_ERROR
    about: About
    error: str
    where: str
    failures: int = 1
    dropped: bool = False

    def data(self) -> Any:  # noqa: D102
        return {
            "error": self.error,
            "where": self.where,
            "failures": self.failures,
            "dropped": self.dropped,
        }


@dataclass(frozen=True, slots=True)
class Refused(_Bare):
    """An entity seen the first time was not admitted (the entity cap)."""

    kind: ClassVar[RowKind] = RowKind.ENTITY_REFUSED


@dataclass(frozen=True, slots=True)
class EntityCount:
    """A shard holds ``entities`` entities after its turn.

    ``due_ms``: the bus frontier at which the first of them is due (``None``: none is),
    so the driver ticks only the shards a tick would wake (:mod:`streaming.ticks`).
    """

    kind: ClassVar[RowKind] = RowKind.ENTITY_COUNT
    shard: str
    entities: int
    due_ms: int | None = None

    @property
    def about(self) -> About:  # noqa: D102
        return About("", f"shard:{self.shard}")

    def data(self) -> Any:  # noqa: D102
        return {"entities": self.entities, "due_ms": self.due_ms}


@dataclass(frozen=True, slots=True)
class Forward:
    """A keyed source's line for another entity: ``value`` goes on the bus under ``entity``.

    ``value`` is the bus value (the event with its TaskManager or job filled in, at its
    record's position under ``fwd:``, :mod:`streaming.forwards`); ``event_ms`` its time.
    """

    kind: ClassVar[RowKind] = RowKind.FORWARD
    entity: str
    value: str
    event_ms: int

    @property
    def about(self) -> About:  # noqa: D102
        return About("", self.entity, self.event_ms)

    def data(self) -> Any:  # noqa: D102
        return self.value


Note = Signal | SignalGone | DetectorFailure | Refused | EntityCount | Forward
#: One result of the runner, in order: a transition or a note about an entity.
Output = Alert | Note


def where(exc: BaseException) -> str:
    """``Type: message at file:line`` of the innermost frame: enough to find the bug."""
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" at {frames[-1].filename.rsplit('/', 2)[-1]}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {str(exc)[:300]}{at}"


def signal(detector: Detector[Any, Any], entity: str, state: DetectorState) -> Signal:
    """The entity's current signals for one detector."""
    return Signal(About.of(detector.name, entity, state), detector.signal_values(state))


def failure(
    detector: str,
    entity: str,
    state: DetectorState | None,
    exc: BaseException,
    call: str,
    failures: int = 1,
    *,
    dropped: bool = False,
) -> DetectorFailure:
    """``call`` raised ``exc``, ``failures`` times in a row (``dropped``: given up)."""
    return DetectorFailure(About.of(detector, entity, state), where(exc), call, failures, dropped)
