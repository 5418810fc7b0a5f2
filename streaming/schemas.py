"""The Spark schemas of what flinkwatch carries, derived from the Python models.

The detectors' :class:`~detectors.base.Event` and :class:`~detectors.base.Alert` are the
one source: a field added there reaches the parsed DataFrames, the event bus, the
adapter's input and output rows and the alert rows without another list to keep in
step. Only the record's coordinates (where it came from) and the parse stage's own
columns are declared here.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any

from pyspark.sql.types import (
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from detectors.model import Alert, Event

#: Model fields whose column has another name: ``time_ms`` is ``event_ms`` in rows (the
#: parsed DataFrames also carry it as the ``event_time`` timestamp).
_COLUMN = {"time_ms": "event_ms", "event_time_ms": "event_ms"}


def spark_type(annotation: Any) -> DataType:
    """The Spark type of a model field: ``int`` → long, ``float`` → double, else string.

    Optional fields are nullable columns of their type; enums and mappings travel as
    strings (the value, JSON text).
    """
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    if annotation is int:
        return LongType()
    if annotation is float:
        return DoubleType()
    return StringType()


def _fields(model: type) -> list[tuple[str, Any]]:
    hints = typing.get_type_hints(model)
    if dataclasses.is_dataclass(model):
        return [(f.name, hints[f.name]) for f in dataclasses.fields(model)]
    if issubclass(model, tuple):  # a NamedTuple
        return [(name, hints[name]) for name in model._fields]  # type: ignore[attr-defined]
    return [(name, hints[name]) for name in model.model_fields]  # type: ignore[attr-defined]


def columns_of(model: type) -> list[StructField]:
    """The model's fields as row columns, in the model's order."""
    return [StructField(_COLUMN.get(name, name), spark_type(t)) for name, t in _fields(model)]


#: The event's columns, as the parsed rows, the bus and the adapter carry them.
EVENT_FIELDS: tuple[StructField, ...] = tuple(columns_of(Event))
_EVENT_TYPES: dict[str, DataType] = {f.name: f.dataType for f in EVENT_FIELDS}

#: Where an event's record was: the source (raw topic:partition, or file), its offset and
#: the event's number within the record. The adapter drops repeats by them.
POSITION_FIELDS: tuple[StructField, ...] = (
    StructField("src", StringType()),
    StructField("offset", LongType()),
    StructField("seq", IntegerType()),
)

#: The parsed-event columns (parse stage output), in order: the Kafka coordinates, the
#: event (``event_time`` as a timestamp beside ``kind``; ``event_ms`` is derived later),
#: the log line's own level and logger, and the dead-letter columns.
EVENT_COLUMNS: tuple[str, ...] = (
    "topic",
    "partition",
    "offset",
    "seq",
    "kafka_ts",
    "kind",
    "event_time",
    *[f.name for f in EVENT_FIELDS if f.name not in ("kind", "event_ms")],
    "level",
    "logger",
    "error",
    "detail",
    "raw",
)

#: A bus record's value: the event and where its record was.
BUS_VALUE_SCHEMA = StructType([*EVENT_FIELDS[:2], *POSITION_FIELDS, *EVENT_FIELDS[2:]])
BUS_FIELDS: tuple[str, ...] = tuple(BUS_VALUE_SCHEMA.fieldNames())

#: An alert as a row (the detect query adds a `kind` and its notes, :mod:`streaming.rows`).
ALERT_SCHEMA = StructType(columns_of(Alert))
ALERT_COLUMNS: tuple[str, ...] = tuple(ALERT_SCHEMA.fieldNames())

DEAD_LETTER_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        # Which event of the record (a log record of an OTLP request, a metric sample).
        StructField("seq", IntegerType()),
        StructField("kafka_ts", StringType()),
        StructField("error", StringType()),
        StructField("detail", StringType()),
        StructField("raw", StringType()),
    ]
)
#: Dead-letter records: where the record was and why it was refused.
DEAD_LETTER_FIELDS: tuple[str, ...] = tuple(DEAD_LETTER_SCHEMA.fieldNames())


def struct_of(**fields: DataType) -> StructType:
    """A struct of these fields, in this order, each nullable.

    For ``from_json``'s schemas: given as DDL text (``"a string, b array<int>"``), a schema
    is read by Spark's SQL parser when each plan that holds it is analysed, and the OTLP
    ones took 0.6 s of a fresh JVM's first plan (issue #34, a slow hour: 0.15 s as
    types). A type goes to the JVM as its JSON, which the SQL parser refuses at the first
    character before Spark reads it as JSON.
    """
    return StructType([StructField(name, t) for name, t in fields.items()])


#: ``from_json`` options of the parsers: a record that is not JSON keeps its text in
#: ``_corrupt`` (a dead letter's detail) instead of failing the query.
JSON_OPTS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}


def null_column(name: str) -> Any:
    """An empty event column of the right type (a parser that never fills it)."""
    from pyspark.sql import functions as F

    return F.lit(None).cast(_EVENT_TYPES[name]).alias(name)


# Models ↔ rows ---------------------------------------------------------------------------


def alert_row(alert: Alert) -> dict[str, Any]:
    """An alert as an output row (:data:`ALERT_SCHEMA`; evidence as JSON text)."""
    out: dict[str, Any] = {}
    for name in Alert.model_fields:
        v = getattr(alert, name)
        if isinstance(v, Enum):
            v = v.value
        elif isinstance(v, dict):
            v = json.dumps(v, sort_keys=True, default=str)
        out[_COLUMN.get(name, name)] = v
    return out


def alert_of(row: Mapping[str, Any]) -> Alert:
    """An alert from an output row (the inverse of :func:`alert_row`)."""
    data = {name: row[_COLUMN.get(name, name)] for name in Alert.model_fields}
    data["evidence"] = json.loads(data["evidence"] or "{}")
    return Alert.model_validate(data)
