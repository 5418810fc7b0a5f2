"""OTLP/JSON log requests (the OpenTelemetry Collector's `kafka` exporter), a row per log record.

A record of the log topic may be an ExportLogsServiceRequest holding many log records
(``encoding: otlp_json``). :func:`otlp_exploded` gives each its own row before the log
parser (:mod:`streaming.parsing`) unwraps envelopes; a record of any other shape passes
through as it is. Spark SQL only, like the parser.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType

from streaming.schemas import JSON_OPTS

#: At most this many log records of one OTLP request become events; the rest are one
#: ``otlp_record_cap`` dead letter (a request is at most ``parsing.max_record_bytes`` anyway).
MAX_OTLP_LOG_RECORDS = 1000


# OTLP/JSON attributes: `[{"key": .., "value": {"stringValue": ..}}]`.
_OTLP_ATTRS = "array<struct<key: string, value: struct<stringValue: string>>>"
# The OpenTelemetry Collector's `kafka` exporter with `encoding: otlp_json`: one
# ExportLogsServiceRequest per record. 64-bit integers are JSON strings in OTLP/JSON.
_OTLP_RECORD = (
    "struct<timeUnixNano: string, observedTimeUnixNano: string, severityText: string, "
    f"severityNumber: string, body: struct<stringValue: string>, attributes: {_OTLP_ATTRS}>"
)
_OTLP_LOGS_SCHEMA = (
    f"resourceLogs array<struct<resource: struct<attributes: {_OTLP_ATTRS}>, "
    f"scopeLogs: array<struct<scope: struct<name: string>, logRecords: array<{_OTLP_RECORD}>>>>>, "
    "_corrupt string"
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


def otlp_exploded(records: DataFrame) -> DataFrame:
    """Records with one row per log record of an OTLP/JSON request (``_o``), others as they are.

    The test on the record's first characters keeps the other shapes from paying for the
    request's schema; a record of another shape gets ``_o`` null and ``_seq`` null.
    """
    value = F.col("value")
    # The regex runs on the first characters only: a long record does not pay for its length.
    # As the exporter writes it: compact, the request's one key first.
    is_otlp = value.startswith('{"resourceLogs":')
    # One projection before the generator (each copies the record).
    df = records.select(
        "*",
        is_otlp.alias("_is_otlp"),
        F.from_json(F.when(is_otlp, value), _OTLP_LOGS_SCHEMA, JSON_OPTS).alias("_req"),
    )
    req = F.col("_req")

    def item(r: Column, s: Column, lr: Column) -> Column:
        res = r["resource"]["attributes"]
        stamp = lr["timeUnixNano"]
        return F.struct(
            lr["body"]["stringValue"].alias("line"),
            # 0 (or no value) means the source gave no time: the collector's then counts.
            F.when(stamp.try_cast(LongType()) > 0, stamp)
            .otherwise(lr["observedTimeUnixNano"])
            .alias("ts"),
            F.coalesce(lr["severityText"], _severity(lr["severityNumber"])).alias("level"),
            s["scope"]["name"].alias("logger"),
            _attr(res, "host.name").alias("host"),
            _attr(res, "k8s.pod.name").alias("pod"),
            F.coalesce(_attr(lr["attributes"], "log.file.path"), _attr(res, "log.file.path")).alias(
                "path"
            ),
        )

    # flatten() of a list holding a null list is null: drop the null lists first.
    items = F.flatten(
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
    items = F.when(req["_corrupt"].isNull(), items)
    # One element past the cap is kept: it stands for the rest (an `otlp_record_cap` dead letter).
    return df.select(
        *records.columns,
        "_is_otlp",
        req["_corrupt"].isNotNull().alias("_otlp_bad"),
        F.size(items).alias("_otlp_n"),
        F.posexplode_outer(F.slice(items, 1, MAX_OTLP_LOG_RECORDS + 1)).alias("_seq", "_o"),
    )
