"""Flink log lines and metric records → parsed events, in Spark SQL.

Everything here builds Column expressions; no Python runs per record. The
input of :func:`parse_logs` (and of ``streaming.metric_parsing.parse_metrics``, which
shares the limits, the time checks and the output columns) is a DataFrame with the
record text and its coordinates (``value``, ``topic``, ``partition``, ``offset``,
``kafka_ts``); the output has :data:`~streaming.schemas.EVENT_COLUMNS`, one row per event, with
``error`` set (and ``kind`` null) for records that go to the dead letters.

Log timestamps without a zone are read in the session time zone, which
``streaming.session`` sets from ``parsing.log_timezone``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from streaming.log_fields import _log_fields, _match_slots
from streaming.log_kinds import J, _kinded
from streaming.log_layouts import (
    _LAYOUT,
    _LAYOUT_PARTS,
    _MDC_JOB_KEY,
    _SYSLOG_HOST,
    _headed,
    _layout_time,
    _level,
)
from streaming.log_shapes import (
    LOG_ENVELOPES,
    LOG_LAYOUTS,
    NOT_LOG_SHAPES,
    _envelope_shape,
    _json_metric,
    _shape,
)
from streaming.otlp_logs import otlp_exploded
from streaming.parse_columns import (
    _SEP,
    DEAD_LETTER_REASONS,
    ParseLimits,
    _group,
    _groups,
    _rx,
    capped_name,
    longer_than,
    prefix,
)
from streaming.schemas import JSON_OPTS, null_column

__all__ = [
    "DEAD_LETTER_REASONS",
    "LOG_ENVELOPES",
    "LOG_LAYOUTS",
    "NOT_LOG_SHAPES",
    "ParseLimits",
    "parse_logs",
]


# Kinds a process logs about itself (no process id in the text): their tm_id comes from the
# shipper's envelope, see parse_logs. A TaskManager's word on its JobManager is its own too.
# In a file, the log's own `Starting TaskManager with ResourceID` line names the process
# (``source_tm`` from streaming.sources) where the envelope does not.
_SELF_REPORTED = ("fatal_error", "jvm_oom", "jm_heartbeat_timeout", "job_released")
#: Columns a file source adds that the parser reads when present (streaming.sources): the
#: time of the record before, and what the log said of itself (its TaskManager, its one job).
_FILE_COLUMNS = ("fallback_time", "source_tm", "source_job")
# A YARN container's log directory in a shipper's file path (JSON may escape the slashes).
_YARN_LOG_DIR = r"[/\\]+(container_(?:e\d+_)?\d+_\d+_\d+_\d+)[/\\]+[\w.-]+\.(?:log|out|err)\b"


def _strings(*names: str) -> StructType:
    return StructType([StructField(n, StringType()) for n in names])


_LOG_JSON_SCHEMA = StructType(
    [
        StructField("level", StringType()),
        StructField("timestamp", StringType()),
        StructField("thread", StringType()),
        StructField("file", StringType()),
        StructField("logger", StringType()),
        StructField("line", StringType()),
        StructField("message", StringType()),
        StructField("log", StringType()),
        StructField("@timestamp", StringType()),
        StructField("time", StringType()),
        StructField("date", StringType()),
        StructField("host", StringType()),
        StructField("hostname", StringType()),
        StructField(
            "kubernetes",
            StructType(
                [
                    StructField("pod_name", StringType()),
                    StructField("host", StringType()),
                    # Vector's kubernetes_logs source.
                    StructField("pod_node_name", StringType()),
                    StructField("pod", StructType([StructField("name", StringType())])),
                    StructField("node", StructType([StructField("name", StringType())])),
                ]
            ),
        ),
        StructField("stream", StringType()),
        StructField("source_type", StringType()),
        # Elastic's ECS layout (log4j2 `EcsLayout.json`): flat dotted keys, the trace apart.
        StructField("log.level", StringType()),
        StructField("log.logger", StringType()),
        StructField("error.stack_trace", StringType()),
        # log4j2's stock JsonLayout: the time as `instant` (2.11+) or `timeMillis`, the
        # exception as an object (its trace an array of frames, or a string with
        # `stacktraceAsString`; a string field keeps an array's JSON text).
        StructField("loggerName", StringType()),
        StructField("instant", _strings("epochSecond", "nanoOfSecond")),
        StructField("timeMillis", StringType()),
        StructField(
            "thrown",
            StructType(
                [
                    *_strings("name", "message", "localizedMessage").fields,
                    *_strings("extendedStackTrace", "stackTrace").fields,
                    StructField("cause", _strings("name", "message")),
                ]
            ),
        ),
        StructField(_MDC_JOB_KEY, StringType()),
        StructField("contextMap", StructType([StructField(_MDC_JOB_KEY, StringType())])),
        StructField("mdc", StructType([StructField(_MDC_JOB_KEY, StringType())])),
        # A metric record on the log topic (canonical, Telegraf, Vector's metric event).
        *_strings("name", "value", "fields", "gauge", "counter").fields,
        StructField("_corrupt", StringType()),
    ]
)


def parse_logs(
    records: DataFrame, limits: ParseLimits | None = None, *, shapes: bool = False
) -> DataFrame:
    """Parse log records (raw log4j lines, JSON layouts, shipper envelopes, OTLP/JSON).

    Args:
        records: Columns ``value`` (string), ``topic``, ``partition``, ``offset``,
            ``kafka_ts`` (timestamp, may be null).
        limits: Dead-letter bounds.
        shapes: Add two last columns for ``flinkwatch doctor``: ``own_tm``, the
            TaskManager (or host) the record's own source names (its pod, a YARN container
            in its path, its file's start line, its host), and ``shape``, the record shape
            recognised (one of :data:`LOG_LAYOUTS`, :data:`LOG_ENVELOPES`,
            ``<envelope>+<layout>`` or :data:`NOT_LOG_SHAPES`).

    Returns:
        One row per log event with :data:`~streaming.schemas.EVENT_COLUMNS` (an OTLP
        request makes one row per log record, numbered by ``seq``), plus ``shape``.
    """
    lim = limits or ParseLimits()
    df = otlp_exploded(records, lim.max_record_bytes, lim.max_otlp_log_records)
    df = _unwrapped(df, lim, shapes=shapes)
    df = _headed(df, lim, fallback_time="fallback_time" in records.columns)
    df = _kinded(df)
    return _event_columns(df, lim, shapes=shapes)


def _unwrapped(records: DataFrame, lim: ParseLimits, *, shapes: bool) -> DataFrame:
    """Records with the log line to parse (``_line``) out of whatever envelope it came in.

    ``_e`` is the record's JSON object (a layout or a shipper's envelope), ``_j`` the JSON
    layout the fields come from: ``_e`` itself, or the line inside the envelope when that
    line is a JSON layout (``_nested``: JSON on stdout under a Fluent Bit or Vector DaemonSet).
    What later steps need of the envelope is taken here, and only that goes on: every
    projection after this one copies each column it carries.
    """
    # The text to read: the record, or the body of one OTLP log record.
    text = F.when(F.col("_is_otlp"), F.col("_o.line")).otherwise(F.col("value"))
    trimmed = F.ltrim(text)
    is_json = trimmed.startswith("{")
    # The JSON object is the first line; continuation lines glued after it (files read
    # whole, shippers that join multi-line records) belong to its message.
    json_split = _groups(trimmed, r"^(\{[^\n]*\})[ \t\r]*(?:\n([\s\S]*))?$", 2)
    df = records.select(
        "topic",
        "partition",
        "offset",
        "kafka_ts",
        *[c for c in _FILE_COLUMNS if c in records.columns],
        "_is_otlp",
        "_otlp_bad",
        "_otlp_n",
        F.coalesce(F.col("_seq"), F.lit(0)).alias("seq"),
        "_o",
        F.col("value").alias("raw"),
        text.alias("_text"),
        longer_than(F.col("value"), lim.max_record_bytes).alias("_too_large"),
        is_json.alias("_is_json"),
        F.when(is_json, json_split).alias("_jsplit"),
    )
    json_text = _group(F.col("_jsplit"), 1)
    e = F.from_json(
        F.when(F.col("_is_json"), F.coalesce(json_text, F.ltrim(F.col("_text")))),
        _LOG_JSON_SCHEMA,
        JSON_OPTS,
    )
    df = df.select(
        "*", e.alias("_e"), F.coalesce(_group(F.col("_jsplit"), 2), F.lit("")).alias("_tail")
    )
    ec = F.col("_e")
    # Filebeat's `log` is an object (`log.offset`, `log.file.path`); its line is `message`.
    filebeat_log = F.col("_is_json") & F.col("_text").rlike(r'(?<!\\)"log"\s*:\s*\{')
    log_line = F.when(~filebeat_log, ec["log"])
    # Flink's JSON layout, log4j2's JsonLayout or ECS, also as Filebeat ships them decoded
    # (`json.keys_under_root`: the layout's keys next to Filebeat's `log` object).
    top_layout = (
        ec["message"].isNotNull()
        & F.coalesce(ec["level"], ec["log.level"]).isNotNull()
        & (ec["log"].isNull() | (filebeat_log & _layout_time(ec).isNotNull()))
    )
    df = df.select(
        "*",
        filebeat_log.alias("_filebeat"),
        top_layout.alias("_top_layout"),
        F.when(F.col("_is_json") & ~top_layout, F.coalesce(log_line, ec["message"])).alias(
            "_eline"
        ),
    )
    # The envelope's line is a JSON layout itself: parsed again, only then.
    inner = F.from_json(
        F.when(F.ltrim(F.col("_eline")).startswith("{"), F.col("_eline")),
        _LOG_JSON_SCHEMA,
        JSON_OPTS,
    )
    df = df.select("*", inner.alias("_inner"))
    ic = F.col("_inner")
    nested = F.coalesce(
        ic["_corrupt"].isNull()
        & ic["message"].isNotNull()
        & F.coalesce(ic["level"], ic["log.level"]).isNotNull(),
        F.lit(False),
    )
    flink_json = F.col("_top_layout") | nested
    tail = F.when(F.col("_tail") != "", F.col("_tail"))
    # Text to run the layout regex on: the record, or the line inside an envelope.
    line = F.when(
        F.col("_is_json"),
        F.when(~flink_json & F.col("_eline").isNotNull(), F.concat_ws("\n", F.col("_eline"), tail)),
    ).otherwise(F.col("_text"))
    df = df.select(
        "*",
        F.when(nested, ic).otherwise(ec).alias("_j"),
        line.alias("_line"),
        flink_json.alias("_flink_json"),
        nested.alias("_nested"),
    )
    flink_json, nested = F.col("_flink_json"), F.col("_nested")
    o = F.col("_o")
    envelope_ts = F.coalesce(
        o["ts"],
        F.when(
            F.col("_is_json") & (~flink_json | nested),
            F.coalesce(ec["@timestamp"], ec["time"], ec["date"], ec["timestamp"]),
        ),
    )
    # A shipper's envelope we know by its own keys (a JSON object with none of them and no
    # line is only `missing_field`).
    envelope = (
        ec["kubernetes"].isNotNull()
        | ec["stream"].isNotNull()
        | ec["source_type"].isNotNull()
        | ec["date"].isNotNull()
        | F.col("_filebeat")
        | (ec["@timestamp"].isNotNull() & ec["host"].isNotNull())
    )
    json_unread = F.col("_is_json") & F.col("_line").isNull() & ~flink_json
    return df.select(
        "topic",
        "partition",
        "offset",
        "kafka_ts",
        *[c for c in _FILE_COLUMNS if c in records.columns],
        "seq",
        "raw",
        "_too_large",
        "_is_otlp",
        "_otlp_bad",
        "_otlp_n",
        (F.col("_is_otlp") & (o["line"].isNull() | o["line"].rlike(r"^\s*$"))).alias("_otlp_blank"),
        # The layout's groups from one evaluation of its regex (see _headed): the match is
        # the whole line, replaced by its groups behind separators, which only the message
        # can hold; a line that does not match is left as it is.
        F.split(F.regexp_replace(F.col("_line"), _LAYOUT, _LAYOUT_PARTS), _SEP, 5).alias("_lparts"),
        o["level"].alias("_o_level"),
        o["logger"].alias("_o_logger"),
        o["path"].alias("_o_path"),
        "_is_json",
        "_tail",
        "_j",
        "_line",
        "_flink_json",
        "_nested",
        ec["_corrupt"].alias("_e_corrupt"),
        envelope_ts.alias("_env_ts"),
        F.when(json_unread, envelope).alias("_envelope"),
        _json_metric(json_unread).alias("_json_metric"),
        F.coalesce(o["pod"], ec["kubernetes"]["pod_name"], ec["kubernetes"]["pod"]["name"]).alias(
            "_pod"
        ),
        F.coalesce(
            o["host"],
            ec["kubernetes"]["host"],
            ec["kubernetes"]["node"]["name"],
            ec["kubernetes"]["pod_node_name"],
            F.get_json_object(ec["host"], "$.name"),
            ec["host"],
            ec["hostname"],
            # rsyslog's default template: `<RFC 3339 time> <host> <tag>: <line>`.
            F.when(~F.col("_is_json"), _rx(F.col("_line"), _SYSLOG_HOST)),
        ).alias("_env_host"),
        *([_envelope_shape().alias("_shape_env")] if shapes else []),
    )


def _file_column(df: DataFrame, name: str) -> Column:
    """A column a file source adds (:data:`_FILE_COLUMNS`), null for Kafka records."""
    return F.col(name) if name in df.columns else F.lit(None).cast(StringType())


def _event_columns(df: DataFrame, lim: ParseLimits, *, shapes: bool) -> DataFrame:
    """The parsed event's fields from the message, in :data:`EVENT_COLUMNS` order."""
    jc = F.col("_j")
    ok = F.col("error").isNull()
    matched = F.coalesce(F.col("_lay1") != "", F.lit(False))
    kind, msg = F.col("kind"), F.col("_message")
    slots = _match_slots(kind, msg)
    df = df.select("*", *[slot.alias(f"_slot{i}") for i, slot in enumerate(slots)])
    mdc = F.coalesce(jc[_MDC_JOB_KEY], jc["contextMap"][_MDC_JOB_KEY], jc["mdc"][_MDC_JOB_KEY])
    mdc_job = _rx(F.when(F.col("_is_json"), mdc), f"^{J}$")
    slot_cols = [F.col(f"_slot{i}") for i in range(len(slots))]
    fields = _log_fields(kind, msg, slot_cols, mdc_job, _file_column(df, "source_job"))
    level = _level()
    logger = F.coalesce(
        F.when(
            F.col("_flink_json"),
            F.coalesce(
                jc["logger"],
                jc["log.logger"],
                jc["loggerName"],
                F.regexp_replace(jc["file"], r"\.java$", ""),
            ),
        ),
        F.when(matched, F.col("_lay3")),
        F.col("_o_logger"),
    )
    # Where a shipper says the file came from: a YARN container directory names the process.
    path = F.coalesce(F.col("_o_path"), F.when(F.col("_is_json"), F.col("raw")))
    # The process a record's own source names (see _SELF_REPORTED); the pod comes first.
    own_tm = F.coalesce(_rx(path, _YARN_LOG_DIR), _file_column(df, "source_tm"), F.col("_env_host"))
    detail = F.when(
        F.col("error") == "otlp_record_cap",
        F.format_string(
            "%d log records beyond the first %d",
            F.col("_otlp_n") - lim.max_otlp_log_records,
            F.lit(lim.max_otlp_log_records),
        ),
    ).otherwise(prefix(F.col("_e_corrupt"), 200))
    return df.select(
        "topic",
        "partition",
        "offset",
        "seq",
        "kafka_ts",
        F.col("kind"),
        F.when(ok, F.timestamp_millis(F.col("_event_ms"))).alias("event_time"),
        fields["job_id"].alias("job_id"),
        capped_name(fields["job_name"]).alias("job_name"),
        capped_name(
            F.coalesce(
                fields["tm_id"],
                F.when(F.col("kind").isNotNull(), F.col("_pod")),
                # A process's own fatal lines name no process: the shipper's YARN container
                # directory (`…/container_…/taskmanager.log`), the log's own start line (files),
                # or, failing both, its host does.
                F.when(F.col("kind").isin(*_SELF_REPORTED), own_tm),
            )
        ).alias("tm_id"),
        capped_name(F.coalesce(fields["host"], F.col("_env_host"))).alias("host"),
        fields["task"].alias("task"),
        fields["checkpoint_id"].alias("checkpoint_id"),
        fields["duration_ms"].alias("duration_ms"),
        fields["size_bytes"].alias("size_bytes"),
        fields["from_state"].alias("from_state"),
        fields["to_state"].alias("to_state"),
        prefix(fields["reason"], 500).alias("reason"),
        null_column("metric"),
        null_column("value"),
        prefix(F.col("_message"), lim.max_message_chars).alias("message"),
        F.when(level == "WARNING", F.lit("WARN")).otherwise(level).alias("level"),
        logger.alias("logger"),
        F.col("error"),
        F.when(F.col("error").isNotNull(), detail).alias("detail"),
        F.when(F.col("error").isNotNull(), prefix(F.col("raw"), 65536)).alias("raw"),
        # For doctor: whom a line of the record would be attributed to, had it no id itself.
        *([F.coalesce(F.col("_pod"), own_tm).alias("own_tm")] if shapes else []),
        *([_shape().alias("shape")] if shapes else []),
    )
