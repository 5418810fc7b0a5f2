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
from pyspark.sql.types import LongType, StringType, StructField, StructType

from streaming.log_fields import _log_fields, _match_slots
from streaming.log_kinds import J, _by_cause, _by_level, _classify
from streaming.log_shapes import (
    _CONTINUATION,
    LOG_ENVELOPES,
    LOG_LAYOUTS,
    NOT_LOG_SHAPES,
    _envelope_shape,
    _json_metric,
    _not_a_log,
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
    epoch_ms_from_text,
    longer_than,
    prefix,
    time_error,
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


# The job the logging framework's MDC names (`flink-job-id`, Flink 1.19+, FLINK-34417): a
# top-level key in the ECS layout (log4j2 JsonTemplateLayout flattens the MDC), under
# `contextMap` in log4j2's JsonLayout, under `mdc` in a JsonTemplateLayout that nests it.
_MDC_JOB_KEY = "flink-job-id"

# Kinds a process logs about itself (no process id in the text): their tm_id comes from the
# shipper's envelope, see parse_logs. A TaskManager's word on its JobManager is its own too.
# In a file, the log's own `Starting TaskManager with ResourceID` line names the process
# (``source_tm`` from streaming.sources) where the envelope does not.
_SELF_REPORTED = ("fatal_error", "jvm_oom", "jm_heartbeat_timeout", "job_released")
# The host of rsyslog's header (see _LAYOUT). Anchored: a line in Flink's own layout fails it
# at its 11th character.
_SYSLOG_HOST = (
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2}) (\S+) \S+: \d{4}-"
)
#: Columns a file source adds that the parser reads when present (streaming.sources): the
#: time of the record before, and what the log said of itself (its TaskManager, its one job).
_FILE_COLUMNS = ("fallback_time", "source_tm", "source_job")
# A YARN container's log directory in a shipper's file path (JSON may escape the slashes).
_YARN_LOG_DIR = r"[/\\]+(container_(?:e\d+_)?\d+_\d+_\d+_\d+)[/\\]+[\w.-]+\.(?:log|out|err)\b"

# Log4j layouts. Group 1 = timestamp, 2 = level, 3 = logger, 4 = message.
#  - Flink default, log4j1 (<=1.10) and log4j2 (>=1.11, `[]` for the empty NDC)
#  - the logback layout and `[thread]` variants seen in the field
#  - Hadoop NodeManager (`logger: message`), for YARN container kills
#  - an optional `kubectl logs --timestamps` RFC 3339 prefix, or rsyslog's header (its
#    default template: `<RFC 3339 time> <host> <tag>: `, the tag ending in a colon)
_LAYOUT = (
    r"(?s)^(?:\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})\s+"
    r"(?:\S+\s+\S+:\s+)?)?"
    r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[,.]\d{1,9})?)\s+"
    r"(?:\[[^\]]*\]\s+)?"
    r"(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\s+"
    r"(?:\[[^\]]*\]\s+)?"
    r"([\w.$]+?)(?::\s+|\s+(?:\[[^\]]*\]\s+)?(?:\S+\s+)??-\s)"
    r"(.*)$"
)

_LAYOUT_PARTS = "".join(f"\u0001${i}" for i in (1, 2, 3, 4))


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


def _otlp_structured() -> Column:
    """An OTLP log record that says its level or logger itself: its body is the message.

    A logging bridge (the OpenTelemetry Java agent's log4j appender) sends the bare
    message; the filelog receiver sends the file's line, which must be in a layout.
    """
    return F.col("_is_otlp") & (F.col("_o_level").isNotNull() | F.col("_o_logger").isNotNull())


def _layout_time(s: Column) -> Column:
    """A JSON layout's time as written (log4j2 JsonLayout's ``instant``: its seconds)."""
    return F.coalesce(s["timestamp"], s["@timestamp"], s["timeMillis"], s["instant"]["epochSecond"])


def _layout_ms(s: Column) -> Column:
    """Epoch ms of a JSON layout's time (null when absent or unreadable)."""
    text = F.coalesce(s["timestamp"], s["@timestamp"])
    instant = s["instant"]
    instant_ms = instant["epochSecond"].try_cast(LongType()) * 1000 + F.coalesce(
        instant["nanoOfSecond"].try_cast(LongType()), F.lit(0)
    ) / F.lit(1_000_000)
    return (
        F.when(text.isNotNull(), epoch_ms_from_text(text))
        .when(instant["epochSecond"].isNotNull(), instant_ms.cast(LongType()))
        .when(s["timeMillis"].isNotNull(), epoch_ms_from_text(s["timeMillis"]))
    )


def _thrown(s: Column) -> Column:
    """log4j2 JsonLayout's exception as the lines a pattern layout prints (null: none).

    ``name: message`` and its cause's, or the trace itself when it is a string
    (``stacktraceAsString``); a trace as an array of frames adds no line detectors read.
    """
    t = s["thrown"]
    head = F.concat_ws(": ", t["name"], F.coalesce(t["message"], t["localizedMessage"]))
    cause = t["cause"]
    caused = F.when(
        cause["name"].isNotNull(),
        F.concat(F.lit("Caused by: "), F.concat_ws(": ", cause["name"], cause["message"])),
    )
    as_text = F.coalesce(t["extendedStackTrace"], t["stackTrace"])
    return F.when(
        t["name"].isNotNull(),
        F.when(as_text.isNotNull() & ~F.ltrim(as_text).startswith("["), as_text).otherwise(
            F.concat_ws("\n", head, caused)
        ),
    )


# What Java's `\s` matches, and the line terminators before which its `$` matches too: a
# regex made of `\s` and anchors can only match a text that starts (or ends) with one.
_SPACE_OR_BREAK = (" ", "\t", "\n", "\x0b", "\f", "\r", "\u0085", "\u2028", "\u2029")


def _blank(text: Column) -> Column:
    """Whether ``text`` is only white space: the regex only for a text starting with it."""
    starts = text == ""
    for c in _SPACE_OR_BREAK:
        starts = starts | text.startswith(c)
    return starts & text.rlike(r"^\s*$")


def _rstripped(text: Column) -> Column:
    """``text`` without trailing white space (the regex only where the text ends in one)."""
    ends = F.lit(False)
    for c in _SPACE_OR_BREAK:
        ends = ends | text.endswith(c)
    return F.when(ends, F.regexp_replace(text, r"\s+$", "")).otherwise(text)


def _headed(df: DataFrame, lim: ParseLimits, *, fallback_time: bool) -> DataFrame:
    """The layout's header (time, level, logger), the message, the error and the kind."""
    jc = F.col("_j")
    # `_layN` as four regexp_extract calls would give them: empty when the layout does not
    # match, null for no line.
    line, parts = F.col("_line"), F.col("_lparts")
    hit = (F.size(parts) == 5) & (parts[0] == "") & ~line.startswith(_SEP)
    none = F.when(line.isNotNull(), F.lit(""))
    df = df.select(
        "*", *[F.when(hit, parts[i]).otherwise(none).alias(f"_lay{i}") for i in (1, 2, 3, 4)]
    )
    tail = F.when(F.col("_tail") != "", F.col("_tail"))
    jmsg = F.concat_ws("\n", jc["message"], jc["error.stack_trace"], _thrown(jc), tail)
    matched = F.coalesce(F.col("_lay1") != "", F.lit(False))
    # Trailing line breaks go too (Docker's json-file driver keeps the `\n` in `log`).
    message = _rstripped(
        F.when(F.col("_flink_json"), jmsg).when(matched, F.col("_lay4")).otherwise(F.col("_line"))
    )
    ts_text = F.when(F.col("_flink_json"), _layout_time(jc)).when(matched, F.col("_lay1"))
    ts_ms = F.when(F.col("_flink_json"), _layout_ms(jc)).when(
        matched, epoch_ms_from_text(F.col("_lay1"))
    )
    df = df.select(
        "*",
        ts_text.alias("_ts_text"),
        ts_ms.alias("_ts_ms"),
        _not_a_log(matched).alias("_not_log"),
    )
    # A record without a time of its own takes the Kafka record's or, in a file, the
    # time of the record before it (``fallback_time``, see streaming.sources).
    fallback = F.unix_millis(F.col("kafka_ts"))
    if fallback_time:
        fallback = F.coalesce(fallback, epoch_ms_from_text(F.col("fallback_time")))
    event_ms = F.coalesce(
        F.col("_ts_ms"),
        epoch_ms_from_text(F.col("_env_ts")),
        F.when(~matched & ~F.col("_flink_json"), fallback),
    )
    is_continuation = F.col("_line").rlike(_CONTINUATION)
    otlp = F.col("_is_otlp")
    error = (
        F.when(F.col("raw").isNull() | _blank(F.col("raw")), F.lit("empty"))
        .when(F.col("_too_large"), F.lit("too_large"))
        .when(F.col("_not_log") == "otlp_protobuf", F.lit("otlp_protobuf"))
        .when(F.col("_not_log").isNotNull(), F.lit("metric_on_log_topic"))
        .when(otlp & F.col("_otlp_bad"), F.lit("invalid_json"))
        .when(otlp & (F.col("seq") >= lim.max_otlp_log_records), F.lit("otlp_record_cap"))
        .when(F.col("_otlp_blank"), F.lit("envelope_without_line"))
        .when(F.col("_is_json") & F.col("_e_corrupt").isNotNull(), F.lit("invalid_json"))
        .when(
            F.col("_envelope").isNotNull(),
            F.when(F.col("_envelope"), F.lit("envelope_without_line")).otherwise(
                F.lit("missing_field")
            ),
        )
        .when(
            ~F.col("_flink_json")
            & ~matched
            & ~is_continuation
            & F.col("_line").isNotNull()
            & ~_otlp_structured(),
            F.lit("unknown_layout"),
        )
        .when(F.col("_ts_text").isNotNull() & F.col("_ts_ms").isNull(), F.lit("bad_timestamp"))
        .otherwise(time_error(event_ms, F.col("kafka_ts"), lim))
    )
    df = df.select(
        "*",
        error.alias("error"),
        message.alias("_raw_message"),
        event_ms.alias("_event_ms"),
    )
    df = df.select("*", _line_breaks(F.col("_raw_message")).alias("_message"))
    ok = F.col("error").isNull()
    df = df.select("*", F.when(ok, F.substring_index(F.col("_message"), "\n", 1)).alias("_first"))
    df = df.select("*", F.when(ok, _classify(F.col("_message"), F.col("_first"))).alias("_kind"))
    df = df.select("*", _by_cause(F.col("_kind"), F.col("_message")).alias("_ruled"))
    return df.select("*", _by_level(F.col("_ruled"), _level()).alias("kind"))


# rsyslog's imfile writes a line break inside a message as the two characters `\n` (its
# `escapeLF`, on by default): a stack trace arrives as one line. Such a message has no real
# line break, and a `\n` before a stack frame, a cause or an exception class.
_ESCAPED_BREAK = r"\\n(?:\t|at |Caused by: |[\w$]+(?:\.[\w$]+)+(?:Exception|Error|Throwable)\b)"


def _line_breaks(message: Column) -> Column:
    """``message`` with rsyslog's escaped line breaks made real again (see _ESCAPED_BREAK)."""
    escaped = message.contains("\\n") & ~message.contains("\n") & message.rlike(_ESCAPED_BREAK)
    return F.when(escaped, F.regexp_replace(message, r"\\n", "\n")).otherwise(message)


def _level() -> Column:
    """The record's level as its layout (or else its OTLP severity) prints it, upper case."""
    jc = F.col("_j")
    matched = F.coalesce(F.col("_lay1") != "", F.lit(False))
    return F.upper(
        F.coalesce(
            F.when(F.col("_flink_json"), F.coalesce(jc["level"], jc["log.level"])),
            F.when(matched, F.col("_lay2")),
            F.col("_o_level"),
        )
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
