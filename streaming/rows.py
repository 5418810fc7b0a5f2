"""The detect query's output rows: alerts, and the notes the driver reads beside them.

One Spark query has one output schema, so every row carries a ``kind``
(:class:`RowKind`), the columns that say whom it is about, the alert's own columns
(alert rows only) and ``data`` (the notes' payload as JSON text). On either side of
Spark the rows are typed: the runner builds a note (:class:`Signal`, :class:`SignalGone`,
:class:`DetectorFailure`, :class:`Refused`, :class:`EntityCount`) or an
:class:`~detectors.model.Alert`, and the driver reads each row back into one with
:func:`read` and dispatches on its type. No note travels in an alert's columns, and no
alert column is read to tell the kinds apart.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

from pyspark.sql.types import StringType, StructField, StructType

from detectors import Alert, Detector
from detectors.base import DetectorState
from streaming.schemas import ALERT_SCHEMA, alert_of, alert_row


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


#: The rows' schema: ``kind``, the alert's columns (a note fills only the ones that say
#: whom it is about: detector, entity, event_ms, job_id, job_name, tm_id, host), ``data``.
DETECT_SCHEMA = StructType(
    [StructField("kind", StringType()), *ALERT_SCHEMA.fields, StructField("data", StringType())]
)
DETECT_COLUMNS: tuple[str, ...] = tuple(DETECT_SCHEMA.fieldNames())
_ABOUT = ("detector", "entity", "event_ms", "job_id", "job_name", "tm_id", "host")
_BLANK: dict[str, Any] = dict.fromkeys(DETECT_COLUMNS)


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
class SignalGone:
    """The entity's signals of one detector are gone."""

    kind: ClassVar[RowKind] = RowKind.SIGNAL_GONE
    about: About

    def data(self) -> Any:  # noqa: D102
        return None


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
class Refused:
    """An entity seen the first time was not admitted (the entity cap)."""

    kind: ClassVar[RowKind] = RowKind.ENTITY_REFUSED
    about: About

    def data(self) -> Any:  # noqa: D102
        return None


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


Note = Signal | SignalGone | DetectorFailure | Refused | EntityCount


def note_row(note: Note) -> dict[str, Any]:
    """A note as an output row (:data:`DETECT_SCHEMA`)."""
    a = note.about
    data = note.data()
    return {
        **_BLANK,
        "kind": note.kind.value,
        "detector": a.detector,
        "entity": a.entity,
        "event_ms": a.event_ms,
        "job_id": a.job_id,
        "job_name": a.job_name,
        "tm_id": a.tm_id,
        "host": a.host,
        "data": None if data is None else json.dumps(data, default=str),
    }


def alert_rows(alerts: list[Alert]) -> list[dict[str, Any]]:
    """Alerts as output rows (:data:`DETECT_SCHEMA`)."""
    return [{"kind": RowKind.ALERT.value, **alert_row(a), "data": None} for a in alerts]


def read(row: Mapping[str, Any]) -> Alert | Note:
    """A row back into what it holds (the inverse of :func:`note_row`, :func:`alert_rows`).

    Raises:
        ValueError: the row's ``kind`` is none of :class:`RowKind`.
    """
    kind = RowKind(row["kind"])
    if kind is RowKind.ALERT:
        return alert_of(row)
    about = About(*(row[c] if c != "event_ms" else int(row[c] or 0) for c in _ABOUT))
    data = json.loads(row["data"]) if row["data"] else None
    if kind is RowKind.SIGNAL:
        return Signal(about, data or {})
    if kind is RowKind.SIGNAL_GONE:
        return SignalGone(about)
    if kind is RowKind.ENTITY_REFUSED:
        return Refused(about)
    if kind is RowKind.ENTITY_COUNT:
        due = data.get("due_ms")
        return EntityCount(
            about.entity.removeprefix("shard:"),
            int(data["entities"]),
            None if due is None else int(due),
        )
    return DetectorFailure(
        about, data["error"], data["where"], int(data["failures"]), bool(data["dropped"])
    )


# The runner's builders ----------------------------------------------------------------


def signal_row(detector: Detector[Any, Any], entity: str, state: DetectorState) -> dict[str, Any]:
    """The entity's current signals for one detector."""
    about = About.of(detector.name, entity, state)
    return note_row(Signal(about, detector.signal_values(state)))


def gone_row(detector: str, entity: str) -> dict[str, Any]:
    """The entity's signals of one detector are gone (the state was dropped)."""
    return note_row(SignalGone(About(detector, entity)))


def where(exc: BaseException) -> str:
    """``Type: message at file:line`` of the innermost frame: enough to find the bug."""
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" at {frames[-1].filename.rsplit('/', 2)[-1]}:{frames[-1].lineno}" if frames else ""
    return f"{type(exc).__name__}: {str(exc)[:300]}{at}"


def error_row(
    detector: str,
    entity: str,
    state: DetectorState | None,
    exc: BaseException,
    call: str,
    failures: int = 1,
    *,
    dropped: bool = False,
) -> dict[str, Any]:
    """A :class:`DetectorFailure` row: ``call`` raised ``exc`` ``failures`` times in a row."""
    about = About.of(detector, entity, state)
    return note_row(DetectorFailure(about, where(exc), call, failures, dropped))


def refused_row(detector: str, entity: str) -> dict[str, Any]:
    """A :class:`Refused` row, counted on the driver."""
    return note_row(Refused(About(detector, entity)))


def count_row(shard: str, entities: int, due_ms: int | None = None) -> dict[str, Any]:
    """An :class:`EntityCount` row: the shard holds ``entities`` entities."""
    return note_row(EntityCount(shard, entities, due_ms))
