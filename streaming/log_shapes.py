"""What a record on the log topic is: its shape, by name, in Spark SQL.

The names are the ``shape`` column of ``streaming.parsing.parse_logs(shapes=True)``, which
``flinkwatch doctor`` shows; a record that cannot be a log at all (a metric record, an OTLP
request in protobuf) is also a dead letter, whether shapes are asked for or not.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from streaming.parse_columns import prefix

#: The record shapes :func:`streaming.parsing.parse_logs` recognises (its ``shape`` column,
#: ``shapes=True``). A shipper envelope whose line is itself a JSON layout is named
#: ``<envelope>+<layout>``.
LOG_LAYOUTS: tuple[str, ...] = ("log4j_text", "flink_json", "log4j2_json_layout", "ecs_json")
LOG_ENVELOPES: tuple[str, ...] = (
    "fluentbit",
    "docker_json",
    "vector",
    "filebeat",
    "json_envelope",
    "otlp_json",
)
NOT_LOG_SHAPES: tuple[str, ...] = (
    "metric_json",
    "telegraf_json",
    "vector_metric",
    "otlp_metrics",
    "influx_line",
    "otlp_protobuf",
    "unknown",
)


# A record that is part of a stack trace or of a multi-line message.
_CONTINUATION = (
    r"^(?:\s|at |Caused by:|Suppressed:|\.\.\. \d+ more|\[\d{4}-|Dump of the process-tree|"
    r"[\w$]+(?:\.[\w$]+)+(?:Exception|Error|Throwable)\b|Exit code|Diagnostics)"
)


# Influx line protocol (Telegraf's default `data_format`): `measurement[,tags] fields time`.
_INFLUX_LINE = (
    r"^(?:[^\s\\]|\\.)+ (?:[^\s\\=]|\\.)+=(?:[^\s\\\"]|\\.|\"(?:[^\"\\]|\\.)*\")+"
    r"(?:,(?:[^\s\\=]|\\.)+=(?:[^\s\\\"]|\\.|\"(?:[^\"\\]|\\.)*\")+)* \d{10,19}$"
)
# Protocol buffers' bytes as Kafka's string cast hands them on: an OTLP request starts with
# field 1 (`\n`), and its lengths and fixed64 times are control bytes no log text holds.
_BINARY = "[\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\uFFFD]"


def _not_a_log(matched: Column) -> Column:
    """The shape of a record that cannot be a log (:data:`NOT_LOG_SHAPES`), else null."""
    text_unread = ~F.col("_is_json") & ~matched & ~F.col("_is_otlp")
    first = F.substring_index(F.col("raw"), "\n", 1)
    return (
        F.when(F.col("raw").startswith("\n") & F.col("raw").rlike(_BINARY), F.lit("otlp_protobuf"))
        .when(F.col("_json_metric").isNotNull(), F.col("_json_metric"))
        .when(text_unread & first.rlike(_INFLUX_LINE), F.lit("influx_line"))
    )


def _json_metric(unread: Column) -> Column:
    """The shape of a metric record in JSON (:data:`NOT_LOG_SHAPES`), else null.

    ``unread``: the record is a JSON object the unwrapping found no log line in.
    """
    ec = F.col("_e")
    return (
        F.when(
            unread & prefix(F.col("_text"), 64).rlike(r'^\s*\{\s*"resourceMetrics"'),
            F.lit("otlp_metrics"),
        )
        .when(unread & ec["name"].isNotNull() & ec["value"].isNotNull(), F.lit("metric_json"))
        .when(unread & ec["name"].isNotNull() & ec["fields"].isNotNull(), F.lit("telegraf_json"))
        .when(
            unread & ec["name"].isNotNull() & (ec["gauge"].isNotNull() | ec["counter"].isNotNull()),
            F.lit("vector_metric"),
        )
    )


def _envelope_shape() -> Column:
    """The shipper envelope's name (see :func:`streaming.parsing.parse_logs`).

    In the unwrapping's terms (``streaming.log_envelopes``): it reads the columns that step
    selects.
    """
    ec = F.col("_e")
    return (
        F.when(F.col("_is_otlp"), F.lit("otlp_json"))
        .when(~F.col("_is_json"), F.lit(None))
        .when(F.col("_filebeat"), F.lit("filebeat"))
        .when(
            ec["source_type"].isNotNull() | ec["kubernetes"]["pod_node_name"].isNotNull(),
            F.lit("vector"),
        )
        .when(
            ec["log"].isNotNull() & (ec["kubernetes"].isNotNull() | ec["date"].isNotNull()),
            F.lit("fluentbit"),
        )
        .when(ec["log"].isNotNull(), F.lit("docker_json"))
        .when(F.col("_top_layout"), F.lit(None))
        .when(ec["@timestamp"].isNotNull() & ec["message"].isNotNull(), F.lit("filebeat"))
        .when(F.col("_eline").isNotNull(), F.lit("json_envelope"))
    )


def _shape() -> Column:
    """The record's shape (see :func:`streaming.parsing.parse_logs`)."""
    jc = F.col("_j")
    matched = F.coalesce(F.col("_lay1") != "", F.lit(False))
    layout = (
        F.when(~F.col("_flink_json"), F.lit(None))
        .when(jc["log.level"].isNotNull(), F.lit("ecs_json"))
        .when(
            jc["instant"].isNotNull() | jc["timeMillis"].isNotNull() | jc["loggerName"].isNotNull(),
            F.lit("log4j2_json_layout"),
        )
        .otherwise(F.lit("flink_json"))
    )
    envelope = F.col("_shape_env")
    text = F.when(
        ~F.col("_is_json") & (matched | F.col("_line").rlike(_CONTINUATION)), F.lit("log4j_text")
    )
    return F.coalesce(
        F.col("_not_log"),
        F.when(envelope.isNotNull() & layout.isNotNull(), F.concat_ws("+", envelope, layout)),
        envelope,
        layout,
        F.when(~F.col("_is_otlp"), text),
        F.lit("unknown"),
    )
