"""Metric records (canonical JSON and Telegraf JSON) → ``metric`` events, in Spark SQL.

The log parser's sibling (:mod:`streaming.parsing`): same output columns, same limits and
dead-letter reasons, no Python per record.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, MapType, StringType, StructField, StructType

from streaming.parsing import JSON_OPTS, ParseLimits, epoch_ms_from_text, time_error
from streaming.schemas import null_column

#: Event columns a metric sample never fills.
_NOT_IN_METRICS = ("checkpoint_id", "duration_ms", "size_bytes", "from_state", "to_state", "reason")

#: What a metric label naming an entity may look like. Each distinct id becomes detector
#: state and Prometheus series, so a record whose ids are garbage (random bytes, a whole
#: log line, 10 KB of text) is a dead letter, not a new entity. Flink job ids are 32 hex
#: digits; TaskManager ids and hosts are YARN containers, pod names, ``host:port-xxxxxx``
#: resource ids and host names or addresses.
JOB_ID_PATTERN = r"^[0-9a-fA-F]{32}$"
ENTITY_ID_PATTERN = r"^[A-Za-z0-9\[][A-Za-z0-9._:@/\[\]-]{0,127}$"

_METRIC_JSON_SCHEMA = StructType(
    [
        StructField("name", StringType()),
        StructField("value", StringType()),
        StructField("timestamp", StringType()),
        StructField("labels", MapType(StringType(), StringType())),
        StructField("fields", MapType(StringType(), StringType())),
        StructField("tags", MapType(StringType(), StringType())),
        StructField("_corrupt", StringType()),
    ]
)


def _bad_ids(labels: Column) -> Column:
    """True where the job id, TaskManager id or host label is not an id (see the patterns)."""
    job, tm, host = labels["job_id"], labels["tm_id"], labels["host"]

    def bad(label: Column, pattern: str) -> Column:
        # An empty label is no id at all (Flink's reporter sends `host=""` in local mode).
        return label.isNotNull() & (label != "") & ~label.rlike(pattern)

    return bad(job, JOB_ID_PATTERN) | bad(tm, ENTITY_ID_PATTERN) | bad(host, ENTITY_ID_PATTERN)


# Telegraf sends `{"fields": {"value": x}}` (or gauge/counter) for a named metric, or, with
# the prometheus input's metric_version=2, `{"name": "prometheus", "fields": {<metric>: x}}`.
_TELEGRAF_VALUE_KEYS = ("value", "gauge", "counter")


def parse_metrics(records: DataFrame, limits: ParseLimits | None = None) -> DataFrame:
    """Parse metric records (canonical JSON and Telegraf JSON) into ``metric`` events.

    A Telegraf record with several fields becomes several events, numbered by ``seq``.
    """
    lim = limits or ParseLimits()
    value = F.col("value")
    j = F.from_json(value, _METRIC_JSON_SCHEMA, JSON_OPTS)
    df = records.select(
        "topic", "partition", "offset", "kafka_ts", value.alias("raw"), j.alias("_j")
    )
    jc = F.col("_j")
    telegraf = jc["fields"].isNotNull() & jc["value"].isNull()
    single_key = F.coalesce(
        *[F.when(F.map_contains_key(jc["fields"], k), F.lit(k)) for k in _TELEGRAF_VALUE_KEYS]
    )
    # (name, value) pairs: canonical → one; Telegraf → one per field.
    pairs = (
        F.when(
            telegraf & single_key.isNotNull(),
            F.array(
                F.struct(jc["name"].alias("n"), F.element_at(jc["fields"], single_key).alias("v"))
            ),
        )
        .when(
            telegraf,
            F.transform(
                F.map_entries(jc["fields"]),
                lambda e: F.struct(e["key"].alias("n"), e["value"].alias("v")),
            ),
        )
        .otherwise(F.array(F.struct(jc["name"].alias("n"), jc["value"].alias("v"))))
    )
    labels = F.coalesce(jc["labels"], jc["tags"], F.create_map().cast("map<string,string>"))
    df = df.select(
        "*",
        F.posexplode_outer(F.when(jc["_corrupt"].isNull() & jc.isNotNull(), pairs)).alias(
            "_seq", "_p"
        ),
        labels.alias("_labels"),
    )
    # Spark's JSON reader hands a bare NaN/Infinity token to a string field as `"NaN"`.
    num = F.regexp_replace(F.col("_p.v"), r'^"(.*)"$', "$1").cast(DoubleType())
    event_ms = epoch_ms_from_text(jc["timestamp"])
    error = (
        F.when(F.col("raw").isNull() | F.col("raw").rlike(r"^\s*$"), F.lit("empty"))
        .when(F.length(F.col("raw")) > lim.max_record_bytes, F.lit("too_large"))
        .when(jc.isNull() | jc["_corrupt"].isNotNull(), F.lit("invalid_json"))
        .when(
            F.col("_p").isNull() | F.col("_p.n").isNull() | F.col("_p.v").isNull(),
            F.lit("missing_field"),
        )
        .when(jc["timestamp"].isNull(), F.lit("missing_field"))
        .when(num.isNull(), F.lit("bad_type"))
        .when(F.isnan(num) | (F.abs(num) == float("inf")), F.lit("non_finite_value"))
        .when(_bad_ids(F.col("_labels")), F.lit("invalid_id"))
        .otherwise(time_error(event_ms, F.col("kafka_ts"), lim))
    )
    lab = F.col("_labels")
    ok = F.col("_err").isNull()
    return df.select("*", error.alias("_err")).select(
        "topic",
        "partition",
        "offset",
        F.coalesce(F.col("_seq"), F.lit(0)).alias("seq"),
        "kafka_ts",
        F.when(ok, F.lit("metric")).alias("kind"),
        F.when(ok, F.timestamp_millis(event_ms)).alias("event_time"),
        lab["job_id"].alias("job_id"),
        lab["job_name"].alias("job_name"),
        lab["tm_id"].alias("tm_id"),
        lab["host"].alias("host"),
        F.coalesce(
            F.when(
                lab["task_name"].isNotNull(),
                F.concat_ws("/", lab["task_name"], lab["subtask_index"]),
            ),
            lab["operator_name"],
        ).alias("task"),
        *[null_column(c) for c in _NOT_IN_METRICS],
        F.when(ok, F.col("_p.n")).alias("metric"),
        F.when(ok, num).alias("value"),
        null_column("message"),
        F.lit(None).cast(StringType()).alias("level"),
        F.lit(None).cast(StringType()).alias("logger"),
        F.col("_err").alias("error"),
        F.when(~ok, F.substring(F.coalesce(jc["_corrupt"], F.col("_p.v")), 1, 200)).alias("detail"),
        F.when(~ok, F.substring(F.col("raw"), 1, 65536)).alias("raw"),
    )
