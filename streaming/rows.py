"""The detect query's output rows: alerts, and the notes the driver reads beside them.

One Spark query has one output schema, so every row carries a ``kind``
(:class:`~streaming.notes.RowKind`), the columns that say whom it is about, the alert's
own columns (alert rows only) and ``data`` (the notes' payload as JSON text). On either
side of Spark the rows are typed: the runner returns an :class:`~detectors.model.Alert`
or a note (:mod:`streaming.notes`) for each thing it has to say, the Spark shell turns
them into rows with :func:`output_rows`, and the driver reads each row back into one with
:func:`read` and dispatches on its type. No note travels in an alert's columns, and no
alert column is read to tell the kinds apart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql.types import StringType, StructField, StructType

from detectors import Alert
from streaming.notes import About as About
from streaming.notes import DetectorFailure as DetectorFailure
from streaming.notes import EntityCount as EntityCount
from streaming.notes import Forward as Forward
from streaming.notes import Note as Note
from streaming.notes import Output as Output
from streaming.notes import Refused as Refused
from streaming.notes import RowKind as RowKind
from streaming.notes import Signal as Signal
from streaming.notes import SignalGone as SignalGone
from streaming.schemas import ALERT_SCHEMA, alert_of, alert_row

#: The rows' schema: ``kind``, the alert's columns (a note fills only the ones that say
#: whom it is about: detector, entity, event_ms, job_id, job_name, tm_id, host), ``data``.
DETECT_SCHEMA = StructType(
    [StructField("kind", StringType()), *ALERT_SCHEMA.fields, StructField("data", StringType())]
)
DETECT_COLUMNS: tuple[str, ...] = tuple(DETECT_SCHEMA.fieldNames())
_ABOUT = ("detector", "entity", "event_ms", "job_id", "job_name", "tm_id", "host")
_BLANK: dict[str, Any] = dict.fromkeys(DETECT_COLUMNS)


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
    return [_alert_row(a) for a in alerts]


def _alert_row(alert: Alert) -> dict[str, Any]:
    return {"kind": RowKind.ALERT.value, **alert_row(alert), "data": None}


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
    if kind is RowKind.FORWARD:
        return Forward(about.entity, str(data), about.event_ms)
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


def output_rows(outputs: Iterable[Output]) -> list[dict[str, Any]]:
    """The runner's results as output rows (:data:`DETECT_SCHEMA`), in their order."""
    return [_alert_row(o) if isinstance(o, Alert) else note_row(o) for o in outputs]
