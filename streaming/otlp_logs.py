"""OTLP/JSON log requests (the OpenTelemetry Collector's `kafka` exporter), a row per log record.

A record of the log topic may be an ExportLogsServiceRequest holding many log records
(``encoding: otlp_json``). :func:`otlp_exploded` gives each its own row before the log
parser (:mod:`streaming.parsing`) unwraps envelopes (:mod:`streaming.log_envelopes`); a
record of any other shape passes through as it is. Spark SQL only, like the parser.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, IntegerType, LongType, StringType

from streaming.jvm_columns import made_once
from streaming.schemas import JSON_OPTS, struct_of

#: At most this many log records of one OTLP request become events; the rest are one
#: ``otlp_record_cap`` dead letter (a request is at most ``parsing.max_record_bytes`` anyway).
#: Above the Collector's default batch (8,192 records): a request costs what its records do.
MAX_OTLP_LOG_RECORDS = 10_000


# OTLP/JSON attributes: `[{"key": .., "value": {"stringValue": ..}}]`.
_S = StringType()
_OTLP_ATTRS = ArrayType(struct_of(key=_S, value=struct_of(stringValue=_S)))
# The OpenTelemetry Collector's `kafka` exporter with `encoding: otlp_json`: one
# ExportLogsServiceRequest per record. Each log record is read as its JSON text (Spark's
# reader hands an object to a string field as its text) and parsed on its own row.
_OTLP_LOGS_SCHEMA = struct_of(
    resourceLogs=ArrayType(
        struct_of(
            resource=struct_of(attributes=_OTLP_ATTRS),
            scopeLogs=ArrayType(struct_of(scope=struct_of(name=_S), logRecords=ArrayType(_S))),
        )
    ),
    _corrupt=_S,
)
# One log record. 64-bit integers are JSON strings in OTLP/JSON.
_OTLP_RECORD_SCHEMA = struct_of(
    timeUnixNano=_S,
    observedTimeUnixNano=_S,
    severityText=_S,
    severityNumber=_S,
    body=struct_of(stringValue=_S),
    attributes=_OTLP_ATTRS,
)


def _attr(attrs: Column, key: str) -> Column:
    """The string value of OTLP attribute ``key`` (null when absent)."""
    return F.get(F.filter(attrs, lambda a: a["key"] == key), 0)["value"]["stringValue"]


def _severity(number: Column) -> Column:
    """The level of an OTLP ``severityNumber`` (its ranges: 1-4 TRACE … 21-24 FATAL)."""
    n = number.try_cast(IntegerType())
    expr = F.when(n > 24, F.lit(None))
    for low, level in ((21, "FATAL"), (17, "ERROR"), (13, "WARN"), (9, "INFO"), (5, "DEBUG")):
        expr = expr.when(n >= low, F.lit(level))
    return expr.when(n >= 1, F.lit("TRACE"))


def _request_items(req: Column) -> Column:
    """A parsed request's log records, each its JSON text with its resource's and scope's names."""

    def item(r: Column, s: Column, lr: Column) -> Column:
        res = r["resource"]["attributes"]
        return F.struct(
            lr.alias("text"),
            s["scope"]["name"].alias("logger"),
            _attr(res, "host.name").alias("host"),
            _attr(res, "k8s.pod.name").alias("pod"),
            _attr(res, "log.file.path").alias("path"),
        )

    # flatten() of a list holding a null list is null: drop the null lists first.
    return F.flatten(
        F.filter(
            F.transform(
                req["resourceLogs"],
                lambda r: F.flatten(
                    F.filter(
                        F.transform(
                            r["scopeLogs"],
                            lambda s: F.transform(s["logRecords"], lambda lr: item(r, s, lr)),
                        ),
                        lambda a: a.isNotNull(),
                    )
                ),
            ),
            lambda a: a.isNotNull(),
        )
    )


def _record(item: Column, lr: Column) -> Column:
    """What the log parser reads of one log record (``_o``): ``lr`` parsed, ``item`` its names."""
    stamp = lr["timeUnixNano"]
    return F.struct(
        lr["body"]["stringValue"].alias("line"),
        # 0 (or no value) means the source gave no time: the collector's then counts.
        F.when(stamp.try_cast(LongType()) > 0, stamp)
        .otherwise(lr["observedTimeUnixNano"])
        .alias("ts"),
        F.coalesce(lr["severityText"], _severity(lr["severityNumber"])).alias("level"),
        item["logger"].alias("logger"),
        item["host"].alias("host"),
        item["pod"].alias("pod"),
        F.coalesce(_attr(lr["attributes"], "log.file.path"), item["path"]).alias("path"),
    )


def otlp_exploded(
    records: DataFrame, max_request_chars: int, max_records: int = MAX_OTLP_LOG_RECORDS
) -> DataFrame:
    """Records with one row per log record of an OTLP/JSON request (``_o``), others as they are.

    A row of a request costs what its own log record does: its ``value`` is that record's
    JSON text, and nothing of the whole request is carried past the explode or computed
    after it (either is paid once per log record, so a request's cost grew with the square
    of its records). A request that makes no row of its own records (unreadable, longer
    than ``max_request_chars``, or holding none) stays one row with its text. Of a
    request's records, the first ``max_records`` get rows, and one more stands for the
    rest (an ``otlp_record_cap`` dead letter). The test on the record's first characters
    keeps the other shapes from paying for the request's schema; a record of another shape
    gets ``_o`` null and ``_seq`` null.
    """
    c = made_once(
        ("otlp_logs.otlp_exploded", max_request_chars, max_records),
        lambda: _Exploding.make(max_request_chars, max_records),
    )
    others = [name for name in records.columns if name != "value"]
    df = records.select("*", *c.read)
    # Every per-request column is made before the explode, each in a projection of its own:
    # an expression in the generator's own select runs after it, once per row.
    df = df.select(*records.columns, "_is_otlp", *c.items)
    df = df.select(*others, c.value, "_is_otlp", "_otlp_bad", *c.counted)
    df = df.select(*others, "value", "_is_otlp", "_otlp_bad", "_otlp_n", c.exploded)
    df = df.select(*others, c.text, "_is_otlp", "_otlp_bad", "_otlp_n", "_seq", "_r", c.record)
    return df.select(*records.columns, "_is_otlp", "_otlp_bad", "_otlp_n", "_seq", c.o)


@dataclass(frozen=True)
class _Exploding:
    """:func:`otlp_exploded`'s expressions, in the order its projections use them."""

    read: list[Column]
    items: list[Column]
    value: Column
    counted: list[Column]
    exploded: Column
    text: Column
    record: Column
    o: Column

    @staticmethod
    def make(max_request_chars: int, max_records: int) -> _Exploding:
        value = F.col("value")
        # The regex runs on the first characters only: a long record does not pay for its
        # length. As the exporter writes it: compact, the request's one key first.
        is_otlp = value.startswith('{"resourceLogs":')
        # A request past the bound is not read: it is one too_large dead letter, as any
        # record. (Its byte length is known without reading it; see parsing.longer_than.)
        too_long = (F.octet_length(value) > max_request_chars) & (
            F.length(value) > max_request_chars
        )
        req = F.col("_req")
        n = F.size(F.col("_items"))
        r = F.col("_r")
        return _Exploding(
            read=[
                is_otlp.alias("_is_otlp"),
                F.from_json(F.when(is_otlp & ~too_long, value), _OTLP_LOGS_SCHEMA, JSON_OPTS).alias(
                    "_req"
                ),
            ],
            items=[
                req["_corrupt"].isNotNull().alias("_otlp_bad"),
                F.when(req["_corrupt"].isNull(), _request_items(req)).alias("_items"),
            ],
            value=F.when(n > 0, F.lit(None)).otherwise(value).alias("value"),
            counted=[
                n.alias("_otlp_n"),
                # One element past the cap is kept: it stands for the rest (an
                # `otlp_record_cap` dead letter).
                F.slice(F.col("_items"), 1, max_records + 1).alias("_items"),
            ],
            exploded=F.posexplode_outer("_items").alias("_seq", "_r"),
            text=F.coalesce(value, r["text"]).alias("value"),
            record=F.from_json(r["text"], _OTLP_RECORD_SCHEMA, JSON_OPTS).alias("_lr"),
            o=F.when(r.isNotNull(), _record(r, F.col("_lr"))).alias("_o"),
        )
